// The chief (DESIGN.md "Chief"): the job queue, its work-unit leases and its
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
// it kept, or what it rolled back to), also checked before a job finishes. A paused trainer that wakes up past its lease
// then has its pushes refused: its data was re-leased to others.
//
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "brook/v1/chief.pb.h"
#include "chief/core/chief_state_store.h"
#include "chief/core/job_queue.h"
#include "chief/job/job_spec.h"
#include "prometheus/metric_family.h"
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

class Chief {
 public:
  // Opens the state store and restores the queue. `ps` (not owned, may be
  // null: then jobs are neither checkpointed, evaluated nor exported) is the
  // whole PS cluster; it must outlive the chief.
  static absl::StatusOr<std::unique_ptr<Chief>> Open(const ChiefOptions& options,
                                                     ps::PsClient* ps);
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

  // brook_chief_* families for /metrics.
  std::vector<prometheus::MetricFamily> CollectMetrics() const;

 private:
  // Work for the worker thread.
  struct Task {
    enum Kind { kCheckpoint, kEval, kFinalize, kDrop, kInitialize } kind;
    std::string job_id;
  };
  // Per-job things the chief keeps in memory only.
  struct JobRuntime {
    std::shared_ptr<const JobSpec> spec;
    int64_t next_eval_step = 0;        // eval.every_steps: the next step to evaluate at
    int64_t next_checkpoint_step = 0;  // checkpoint.interval_steps: the next step to save at
    std::map<std::string, std::string> trainer_warnings;  // the last ReportMetrics.warning
    std::deque<std::pair<absl::Time, uint64_t>> examples_samples;  // rate window
    bool task_queued = false;
    absl::Time next_drop = absl::InfinitePast();  // after a failed drop: retry then
    bool last_was_checkpoint = false;  // checkpoints and evaluations take turns
  };

  Chief(const ChiefOptions& options, ps::PsClient* ps, std::unique_ptr<ChiefStateStore> store,
        std::unique_ptr<JobQueue> queue);
  absl::Status SaveLocked();  // REQUIRES: mu_
  // A job id as given, or the id of the job a name stands for (its active
  // job, else its latest), so `brook status NAME` works. REQUIRES: mu_
  std::string ResolveJobIdLocked(const std::string& id_or_name) const;
  absl::StatusOr<std::shared_ptr<const JobSpec>> SpecLocked(const JobInfo& info);
  v1::JobStatus StatusLocked(const JobInfo& info, bool with_events);
  int64_t StepsLocked(const std::string& job_id) const;
  void Enqueue(Task task);  // REQUIRES: mu_
  // init_from (issue 23): a running job whose spec has one and that has not
  // loaded it yet gets no lease; the worker loads it first (InitializeJob).
  bool AwaitsInitLocked(const JobInfo& info);  // REQUIRES: mu_
  absl::Status InitializeJob(const std::string& job_id);
  // A change in a trainer's retry warning becomes a job event. REQUIRES: mu_
  void LogTrainerWarningLocked(const v1::ReportMetricsRequest& r, absl::Time now);
  void RunTask(const Task& task);
  // Pops the first task and runs it with `lock` (on mu_) released.
  void RunFirstTask(std::unique_lock<std::mutex>& lock);
  absl::Status Checkpoint(const std::string& job_id, const JobSpec& spec, int64_t step,
                          const std::string& name);
  // Scores the job's model as the PS holds it now on its eval data and
  // records it (SetEval). nullopt when the job has no eval data.
  absl::StatusOr<std::optional<trainer::EvalResult>> Evaluate(const std::string& job_id,
                                                              const JobSpec& spec, int64_t step);
  absl::Status Finalize(const std::string& job_id);
  // Whether an ended job's tables should leave the PS now (JobSpec::
  // retention_seconds). REQUIRES: mu_
  bool TablesDueForDropLocked(const JobInfo& info, absl::Time now);
  // Whether a running job's checkpoint (checkpoint.interval_steps or
  // interval_seconds) or evaluation (eval.every_steps) is due, and, once one
  // is queued, its next step. REQUIRES: mu_
  bool CheckpointDueLocked(const JobInfo& info, const JobSpec& spec, absl::Time now);
  void AdvanceCheckpointLocked(const JobInfo& info, const JobSpec& spec);
  bool EvalDueLocked(const JobInfo& info, const JobSpec& spec);
  void AdvanceEvalLocked(const JobInfo& info, const JobSpec& spec);
  // Drops the job's tables and dense variables from every PS and records it.
  absl::Status DropTables(const std::string& job_id);
  // Logs the finalization phase about to run ("checkpoint", "eval",
  // "export", "finish"): each is redone whole if the chief dies in it.
  void FinalizePhase(const std::string& job_id, const char* phase);
  void HousekeepingLoop();
  void WorkerLoop();
  void FenceLoop();
  // Fences the PS client id of `trainer_id`, if it told one. REQUIRES: mu_
  void FenceTrainerLocked(const std::string& trainer_id);
  void FenceLocked(uint64_t ps_client_id);
  // A PS came back as a new process: tells every running job what it kept
  // or rolled back (a job event). REQUIRES: mu_
  void PsRestartedLocked(size_t shard, const ps::StartupInfo& startup);
  // A table or dense variable `ps_name` on a PS: if it is an ended job's
  // whose tables were dropped, they are dropped again. REQUIRES: mu_
  void RedropIfEndedLocked(const std::string& ps_name);
  // Logs on every running job that the PS nodes are unreachable from the
  // chief (once per episode, after a grace period), or reachable again.
  void NotePsReachabilityLocked(const std::string& fault, absl::Time now);

  const ChiefOptions options_;
  ps::PsClient* const ps_;

  mutable std::mutex mu_;
  std::unique_ptr<ChiefStateStore> store_;  // guarded by mu_
  std::unique_ptr<JobQueue> queue_;         // guarded by mu_
  std::map<std::string, JobRuntime> runtime_;  // guarded by mu_
  std::deque<Task> tasks_;                     // guarded by mu_
  std::condition_variable tasks_cv_;
  bool stopping_ = false;  // guarded by mu_
  uint64_t save_errors_ = 0;  // guarded by mu_
  uint64_t tasks_failed_ = 0;  // guarded by mu_
  uint64_t tables_dropped_ = 0;  // guarded by mu_: table parts of ended jobs
  // Ended jobs whose tables are dropped again after a PS restart: one that
  // came back from a restart point older than the drop has them again.
  std::set<std::string> redrop_;  // guarded by mu_
  uint64_t expired_trainers_ = 0;  // guarded by mu_: missed heartbeats, all jobs

  // Fencing, guarded by mu_.
  std::map<std::string, uint64_t> trainer_ps_clients_;  // node id -> PS client id
  // Where each trainer's process log is, as it last said; guarded by mu_.
  std::map<std::string, v1::NodeLog> trainer_logs_;
  std::deque<uint64_t> fenced_;                         // oldest first
  bool fence_pending_ = false;  // fenced_ changed since the last successful send
  std::condition_variable fence_cv_;
  uint64_t fence_sends_ = 0, fence_send_errors_ = 0, fenced_total_ = 0;
  // Why the last fence send failed ("": it did not), and whether the
  // running jobs were told (one event per episode, so a PS down is never
  // silent in `brook logs`, whatever the trainers are doing).
  std::string ps_unreachable_;
  std::string last_fence_error_;  // "": the last fence send succeeded
  absl::Time ps_unreachable_since_;
  bool ps_unreachable_logged_ = false;
  std::vector<uint64_t> ps_incarnations_;  // by shard; 0 = not seen yet
  uint64_t ps_restarts_ = 0, ps_rollbacks_ = 0;

  std::thread housekeeping_, worker_, fencer_;
};

}  // namespace brook::chief
