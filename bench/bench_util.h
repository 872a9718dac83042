// Pieces shared by the `brook bench` benchmarks: pre-drawn key batches, a
// fixed-duration multi-threaded rate loop, a scratch directory.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <latch>
#include <mutex>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/process_cpu.h"

namespace brook::bench {

// A fresh directory under `parent` (the system temp dir when empty; made,
// with its parents, if missing), removed with everything in it however the
// benchmark ends. Move-only.
class ScratchDir {
 public:
  static absl::StatusOr<ScratchDir> Make(const std::string& parent, const std::string& prefix) {
    std::error_code ec;
    const std::string base =
        parent.empty() ? std::filesystem::temp_directory_path(ec).string() : parent;
    std::filesystem::create_directories(base, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot create the work directory ", base, ": ", ec.message()));
    }
    std::string tmpl = absl::StrCat(base, "/", prefix, "-XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError(
          absl::StrCat("cannot create a directory under ", base, ": ",
                       std::error_code(errno, std::generic_category()).message()));
    }
    ScratchDir dir;
    dir.path_ = std::move(tmpl);
    return dir;
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  ScratchDir& operator=(ScratchDir&& other) noexcept {
    std::swap(path_, other.path_);
    return *this;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  ScratchDir() = default;
  std::string path_;
};

inline constexpr int kMaxPoolBatches = 256;

// Pre-drawn batches of distinct keys, uniform over [0, rows); thread t walks
// them from its own offset, so drawing keys costs nothing in the loops.
struct KeyPool {
  int batch = 0;
  int num_batches = 0;
  std::vector<uint64_t> keys;
  absl::Span<const uint64_t> Batch(int64_t i) const {
    return absl::MakeConstSpan(keys).subspan(static_cast<size_t>(i % num_batches) * batch, batch);
  }
  int64_t Start(int thread, int threads) const {
    return static_cast<int64_t>(thread) * num_batches / threads;
  }
};

inline KeyPool MakeKeyPool(int64_t rows, int batch, uint64_t seed) {
  KeyPool pool;
  pool.batch = batch;
  pool.num_batches =
      static_cast<int>(std::clamp<int64_t>(rows / batch, int64_t{1}, int64_t{kMaxPoolBatches}));
  pool.keys.reserve(static_cast<size_t>(pool.num_batches) * batch);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> dist(0, static_cast<uint64_t>(rows - 1));
  absl::flat_hash_set<uint64_t> seen;
  for (int b = 0; b < pool.num_batches; ++b) {
    seen.clear();
    while (static_cast<int>(seen.size()) < batch) {
      uint64_t k = dist(rng);
      if (seen.insert(k).second) pool.keys.push_back(k);
    }
  }
  return pool;
}

// A measured rate and the cores the whole process kept busy meanwhile
// (process CPU seconds per wall second). When cores_busy is near the
// machine's core count the rate is CPU-bound: another figure's share of the
// same cores is then what bounds it, not latency.
struct MeasuredRate {
  double calls_per_second = 0;
  double cores_busy = 0;
};

// Runs fn(thread, iteration) -> Status on `threads` threads for `seconds`
// (after one warm-up call each); returns completed calls per second and the
// cores the process kept busy over the timed part.
template <typename Fn>
absl::StatusOr<MeasuredRate> MeasureCallRate(int threads, double seconds, Fn fn) {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> calls{0};
  std::mutex mu;
  absl::Status first_error;
  std::latch start(threads + 1);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      absl::Status st = fn(t, 0);
      start.arrive_and_wait();
      int64_t i = 1, n = 0;
      while (st.ok() && !stop.load(std::memory_order_relaxed)) {
        st = fn(t, i++);
        if (st.ok()) ++n;
      }
      calls.fetch_add(n);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = st;
        stop.store(true);
      }
    });
  }
  start.arrive_and_wait();
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = ProcessCpuSeconds();
  const auto until = t0 + std::chrono::duration<double>(seconds);
  while (!stop.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  stop.store(true);
  for (auto& w : workers) w.join();
  const double cpu = ProcessCpuSeconds() - cpu0;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!first_error.ok()) return first_error;
  return MeasuredRate{static_cast<double>(calls.load()) / elapsed, cpu / elapsed};
}

// MeasureCallRate's calls per second alone.
template <typename Fn>
absl::StatusOr<double> CallsPerSecond(int threads, double seconds, Fn fn) {
  absl::StatusOr<MeasuredRate> rate = MeasureCallRate(threads, seconds, std::move(fn));
  if (!rate.ok()) return rate.status();
  return rate->calls_per_second;
}

}  // namespace brook::bench
