// PartRunner: cuts one job over [0, n) into contiguous parts and runs them at
// once, one on the calling thread and the others on helper threads that are
// idle at that moment. It never queues behind a busy helper: with none free
// the whole job runs on the caller, as it would without a PartRunner. Nor
// does it split while another Run() is in progress: concurrent requests
// already keep the cores busy, and a split would only add hand-offs.
//
// Why: a PS request of thousands of keys is one long lookup on one thread
// while the client waits and the machine's other cores may sit idle. Split,
// the lookup ends sooner when there are cores to spare (BENCHMARKS.md,
// issue 3).
//
// Thread-safe: Run() may be called from many threads at once; each helper
// takes one part at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace brook {

class PartRunner {
 public:
  using Part = absl::FunctionRef<absl::Status(size_t begin, size_t end)>;

  // Starts `helpers` threads (0: every Run runs inline).
  explicit PartRunner(int helpers);
  // Stops and joins the helpers. REQUIRES: no Run() in progress.
  ~PartRunner();
  PartRunner(const PartRunner&) = delete;
  PartRunner& operator=(const PartRunner&) = delete;

  int helpers() const { return static_cast<int>(helpers_.size()); }

  // Runs part(begin, end) over [0, n) in as many contiguous parts as there
  // are idle helpers + 1, each at least min_part items long; part(0, n)
  // inline when n < 2 x min_part, no helper is idle, or another Run() is in
  // progress. `part` must be safe
  // to call from several threads at once on disjoint ranges. Returns once
  // every part has finished: OK, or the first failed part's status in range
  // order.
  absl::Status Run(size_t n, size_t min_part, Part part);

  // Runs that used at least one helper, and the parts helpers ran.
  uint64_t split_runs() const { return split_runs_.load(std::memory_order_relaxed); }
  uint64_t helper_parts() const { return helper_parts_.load(std::memory_order_relaxed); }

 private:
  struct Job;
  struct Pending;
  struct Helper;
  static void Loop(Helper* helper);

  std::vector<std::unique_ptr<Helper>> helpers_;
  std::atomic<int> running_{0};  // Run() calls in progress
  std::atomic<uint64_t> split_runs_{0};
  std::atomic<uint64_t> helper_parts_{0};
};

}  // namespace brook
