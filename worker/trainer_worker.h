// A trainer under a chief (`brook trainer --chief HOST:PORT`): registers,
// then loops -- acquire a work-unit lease, train on it, report -- for
// whichever job the chief assigns, until stopped.
//
// - The job's spec comes with the lease (canonical JSON); its tables live on
//   the PS under the job's prefix (a PrefixedPsClient). One Trainer per job,
//   kept across its units so the step count and the learning-rate schedule
//   run on.
// - A unit is read from its resume offset. Every commit_interval the records
//   whose pushes are all acknowledged (UnitProgress's low-water mark) are
//   committed to the chief, and at the unit's end it is completed: a unit
//   re-leased after this trainer dies resumes exactly after what the PS has.
// - A heartbeat thread keeps the leases; when the chief says the trainer no
//   longer serves the job (cancelled, or the leases expired while the
//   trainer was paused), or refuses a commit as stale, training stops at
//   the next step boundary and the work is dropped.
// - The chief being away (restarting) is waited out: calls are retried with
//   backoff, and commits resume with the offsets reached meanwhile.
//
// Thread-compatible: one Run at a time; stats() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "security/bearer_token.h"
#include "security/tls.h"
#include "trainer/trainer.h"

namespace brook::v1 {
class AcquireWorkResponse;
}  // namespace brook::v1
namespace brook::ps {
class GrpcPsClient;
}  // namespace brook::ps

namespace brook::chief {
class ChiefClient;
}  // namespace brook::chief

namespace brook::worker {

struct TrainerWorkerOptions {
  std::string chief;    // host:port
  std::string node_id;  // "" = "trainer-<host>-<pid>"
  std::string address;  // this trainer's metrics endpoint, told to the chief
  std::string device = "cpu";
  int cpu_threads = 0;  // CPU backend threads (0 = every core)
  int parse_threads = 0;
  // PS nodes; empty = the ones the chief names at registration.
  std::vector<std::string> ps_addresses;
  absl::Duration commit_interval = absl::Seconds(1);
  absl::Duration metrics_interval = absl::Seconds(1);
  // TLS towards the chief and the PS nodes (security/tls.h), and the chief's
  // bearer token; both off by default.
  security::TlsOptions tls;
  std::string chief_token;
  // The token sent to the PS nodes (ps::GrpcPsClientOptions::token).
  security::ClientToken ps_token;
};

struct TrainerWorkerStats {
  std::string job_id;  // the job being trained, "" when idle
  int64_t units_completed = 0;
  int64_t units_dropped = 0;      // stopped mid-unit (lease lost, job cancelled)
  uint64_t examples = 0;          // committed to the chief, all jobs
  trainer::TrainerStats trainer;  // of the current (or last) job
};

// What a work unit's reader skipped under data.on_corrupt: skip.
struct SkippedData {
  uint64_t corrupt_regions = 0, corrupt_bytes = 0, bad_examples = 0;
};

class TrainerWorker {
 public:
  static absl::StatusOr<std::unique_ptr<TrainerWorker>> Create(const TrainerWorkerOptions& options);
  ~TrainerWorker();
  TrainerWorker(const TrainerWorker&) = delete;
  TrainerWorker& operator=(const TrainerWorker&) = delete;

  // Works until Stop(). Returns OK after a Stop, or the error that made the
  // worker unable to go on (the PS unreachable for good, a bad device).
  absl::Status Run();
  // Any thread: ends Run (a unit in training is stopped at a step boundary
  // and its acknowledged progress committed). PS calls in progress are
  // cancelled: a call retrying a PS fault must not hold the process for
  // the job's retry window.
  void Stop();

  const std::string& node_id() const { return node_id_; }
  TrainerWorkerStats stats() const;

 private:
  struct Job;
  explicit TrainerWorker(const TrainerWorkerOptions& options);
  absl::Status Register();
  absl::StatusOr<Job*> JobFor(const std::string& job_id, const std::string& spec_json,
                              const std::string& table_prefix);
  absl::Status TrainUnit(Job* job, const v1::AcquireWorkResponse& lease);
  // Retries a commit until the chief answers (it may be restarting).
  // `steps`: the unit-epoch's steps that trained the records before offset
  // (nullopt: not counted, outside a push stream). The chief's answer moves
  // `job_step_base` on, when given.
  // `skipped`: what the unit's reader skipped (data.on_corrupt: skip) since
  // the last accepted commit; the counters move on when this one is.
  absl::Status Commit(const v1::AcquireWorkResponse& lease, uint64_t offset, uint64_t examples,
                      bool done, std::optional<uint64_t> steps = std::nullopt,
                      std::atomic<int64_t>* job_step_base = nullptr,
                      const SkippedData& skipped = SkippedData());
  void HeartbeatLoop();
  void ReportMetrics(const Job& job);  // best effort
  // What the PS client is retrying now, as the job event text; "" if nothing.
  std::string RetryWarning(const Job& job) const;
  bool Sleep(absl::Duration d);  // false when stopping

  const TrainerWorkerOptions options_;
  std::string node_id_;
  std::unique_ptr<chief::ChiefClient> chief_;
  std::unique_ptr<ps::GrpcPsClient> ps_;  // set under mu_ (Stop cancels it)
  uint64_t ps_client_id_ = 0;             // guarded by mu_: the id ps_ pushes under
  std::unique_ptr<Job> job_;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> must_register_{false};
  mutable std::mutex mu_;
  std::string serving_job_;             // guarded by mu_: what the chief last said
  TrainerWorkerStats stats_;            // guarded by mu_ (trainer filled in stats())
  trainer::Trainer* active_ = nullptr;  // guarded by mu_: the Trainer in Train
};

}  // namespace brook::worker
