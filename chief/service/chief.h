// The chief (docs/architecture.md "Chief"): the job queue, its work-unit leases and its
// RocksDB state store behind the Chief API, plus what the chief does on its
// own -- checkpoints on an interval, and at the end of a job the final
// checkpoint, evaluation on the eval data and the model export.
//
// Each API call is one method taking and returning the wire messages; the
// gRPC service (chief_server.h) only adapts. Every call that changes a job
// saves the queue before it returns, so a chief killed with -9 restarts
// (Open over the same state_dir) where its last answer left it.
//
// Housekeeping runs on a background thread every `tick`: expire silent
// trainers (their units go back), start queued jobs and assign idle
// trainers, start checkpoints that are due, and finalize jobs whose data is
// done, and evaluations every eval.every_steps. Checkpoints, evaluations and
// finalization talk to the PS and run on a worker
// thread of their own, outside the mutex, so API calls never wait on them.
//
// Fencing: trainers tell the chief the client id their PS pushes carry. When
// a trainer expires (or its node id registers again), the chief fences that
// id on every PS (PsClient::FenceClients), on a thread of its own right
// away, and sends the whole fence list again every `fence_resend` so a
// restarted PS learns it back. The answers carry each PS's incarnation: a
// PS that restarted is reported to every running job (an event saying what
// it kept, or what it rolled back to), also checked before a job finishes. A paused trainer that
// wakes up past its lease then has its pushes refused: its data was re-leased to others.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "brook/v1/chief.pb.h"
#include "chief/core/job_queue.h"
#include "ps/client/ps_client.h"

namespace brook::chief {

struct ChiefOptions {
  std::string state_dir;                  // required: RocksDB of the job queue
  std::vector<std::string> ps_addresses;  // told to trainers at RegisterNode
  // A trainer silent this long loses its leases; trainers heartbeat every
  // lease_duration / 4.
  absl::Duration lease_duration = absl::Seconds(10);
  int max_running_jobs = 1;
  absl::Duration tick = absl::Milliseconds(200);
  // What the chief's PS client is retrying now ("": nothing), e.g. a PS
  // refusing connections: the jobs' events say so (not set: fence sends
  // alone tell).
  std::function<std::string()> ps_fault;
  // Sets how long the PS client's checkpoint, export and restore calls
  // retry an unreachable PS: the chief sets the job's training.retry_seconds
  // before each of its tasks (they run one at a time). Not set: the
  // client's own window.
  std::function<void(absl::Duration)> set_ps_admin_retry_window;
  // What AcquireWork tells a trainer with nothing to do.
  absl::Duration retry_after = absl::Milliseconds(300);
  // Start the housekeeping, worker and fencing threads (off: tests call
  // Tick, RunPendingWork and SendFences).
  bool background = true;
  // How often the fence list is sent to every PS even when nothing changed.
  absl::Duration fence_resend = absl::Seconds(1);
  // Fenced client ids kept (and re-sent); the oldest go first.
  size_t max_fenced_clients = 4096;

  absl::Status Validate() const;
};

// What the chief counts, for /metrics (chief_metrics.h turns it into the
// brook_chief_* families): a snapshot taken under the chief's lock.
struct ChiefStats {
  std::vector<JobInfo> jobs;  // JobQueue::List order, progress filled
  uint64_t trainers = 0;      // registered and heartbeating, idle or assigned
  uint64_t expired_trainers = 0;
  uint64_t save_errors = 0;
  uint64_t tables_dropped = 0;
  uint64_t tasks_failed = 0;
  uint64_t fenced_total = 0;
  uint64_t fence_sends = 0, fence_send_errors = 0;
  uint64_t ps_restarts = 0, ps_rollbacks = 0;
  bool fence_pending = false;
};

class Chief {
 public:
  // Opens the state store and restores the queue. `ps` (not owned, may be
  // null: then jobs are neither checkpointed, evaluated nor exported) is the
  // whole PS cluster; it must outlive the chief.
  static absl::StatusOr<std::unique_ptr<Chief>> Open(const ChiefOptions& options, ps::PsClient* ps);
  ~Chief();  // stops the threads; a finalization in progress is abandoned (redone on restart)
  Chief(const Chief&) = delete;
  Chief& operator=(const Chief&) = delete;

  // The Chief API (proto/brook/v1/chief.proto).
  absl::StatusOr<v1::JobStatus> SubmitJob(const v1::SubmitJobRequest& request);
  absl::StatusOr<v1::JobStatus> GetJob(const v1::GetJobRequest& request);
  absl::StatusOr<v1::ListJobsResponse> ListJobs();
  absl::StatusOr<v1::JobStatus> CancelJob(const v1::CancelJobRequest& request);
  absl::StatusOr<v1::RegisterNodeResponse> RegisterNode(const v1::RegisterNodeRequest& request);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  absl::StatusOr<v1::AcquireWorkResponse> AcquireWork(const v1::AcquireWorkRequest& request);
  absl::StatusOr<v1::CompleteWorkResponse> CompleteWork(const v1::CompleteWorkRequest& request);
  absl::Status ReportMetrics(const v1::ReportMetricsRequest& request);

  // One round of housekeeping at `now` (the background thread calls it).
  void Tick(absl::Time now);
  // Runs the checkpoints and finalizations Tick queued, on the calling thread
  // (tests without background threads).
  void RunPendingWork();

  // Sends the fence list to every PS now (the fencing thread calls it when a
  // trainer expired and every fence_resend). OK with nothing to send or no PS.
  absl::Status SendFences();
  // The fenced PS client ids, oldest first.
  std::vector<uint64_t> FencedClients() const;

  ChiefStats Stats() const;

 private:
  class Impl;  // chief.cc: the queue, its store, the threads
  explicit Chief(std::unique_ptr<Impl> impl);
  const std::unique_ptr<Impl> impl_;
};

}  // namespace brook::chief
