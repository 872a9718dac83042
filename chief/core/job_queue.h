// The chief's job queue (docs/architecture.md "chief/": job queue and state): every job
// submitted to one chief, its state, its work-unit leases once it runs, its
// checkpoints, last metrics and event log (`brook logs`), plus the pool of
// trainers and which job each one serves.
//
// - Scheduling: queued jobs start in order of priority (higher first), then
//   submit time, then submission number, while fewer than max_running_jobs
//   run. Schedule() also hands idle trainers to running jobs (same order) up
//   to each job's `trainers` wanted. A trainer serves one job at a time.
// - Finalizing: when a job's last work unit completes its trainers are freed
//   but the job stays RUNNING (JobInfo::finalizing) -- it still holds its
//   slot on the PS nodes -- until the chief has evaluated and exported it and
//   calls Finish (or Fail).
//   Nothing schedules implicitly: the service calls Schedule after changes.
// - Shared PS nodes: every job runs on the same PS nodes; its tables live in
//   its own namespace, TablePrefix(job id) + table name, so two jobs (or two
//   runs of one spec) never share rows.
// - Trainer calls (Acquire/Commit/Complete/Heartbeat, Expire) are forwarded
//   to the job's WorkLeases; when they report every epoch done the job
//   starts finalizing and its trainers are freed. Cancel/Fail free them too.
// - Persistence: JobQueueCodec (job_queue_state.h; chief_state_store.h writes them).
//   Every change bumps the job's version(), so a store writes changed jobs only.
//
// Time is always an argument (`now`). JobQueue is thread-compatible: it
// requires external synchronization (the chief's service holds a mutex).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/core/work_leases.h"
#include "sharding/sharding.h"

namespace brook::chief {

enum class JobState { kQueued = 0, kRunning = 1, kSucceeded = 2, kFailed = 3, kCancelled = 4 };
std::string_view JobStateName(JobState state);  // "QUEUED", "RUNNING", ...
inline bool IsFinished(JobState s) { return s != JobState::kQueued && s != JobState::kRunning; }

// How jobs share PS nodes: table T of job J is "J/T" on the PS.
inline std::string TablePrefix(const std::string& job_id) { return job_id + "/"; }

// What Submit takes. The spec itself is opaque here (validated by the job
// spec library); the queue keeps its canonical text and hash.
struct JobSubmission {
  std::string name;  // a DNS label: [a-z0-9-], 1..63, alphanumeric at both ends
  // The job's id: "<name>-<suffix>" of [a-z0-9-], at most 100 characters,
  // never used before (the chief makes it unique beyond its own state:
  // NewJobId). Empty: "<name>-<seq>" (tests).
  std::string id;
  int priority = 0;  // higher runs first
  std::string spec_json;
  std::string spec_hash;
  std::vector<sharding::WorkUnit> units;  // the job's data, non-empty
  int epochs = 1;                         // 0: unbounded (WorkLeasesOptions)
  int trainers = 1;                       // trainers wanted, >= 1
  absl::Duration lease_duration = absl::Seconds(30);
};

struct JobCheckpoint {
  std::string dir;
  int64_t step = 0;
  absl::Time time;
};

struct JobMetrics {
  bool reported = false;  // false until the first report
  double loss = 0;
  double auc = 0;
  uint64_t examples = 0;
  absl::Time time;
  // Data skipped under data.on_corrupt: skip (JobQueue::AddSkipped).
  uint64_t skipped_corrupt_regions = 0;
  uint64_t skipped_corrupt_bytes = 0;
  uint64_t skipped_bad_examples = 0;
};

// An evaluation of the job's model on its eval data.
struct JobEval {
  bool done = false;
  int64_t step = 0;
  int64_t examples = 0;
  double auc = 0, logloss = 0, accuracy = 0, calibration = 0;
  absl::Time time;
};

struct JobEvent {
  absl::Time time;
  std::string text;
};

// A new job id: "<name>-<YYYYMMDD>-<HHMMSS>-<6 hex digits>" (UTC, random
// digits), so ids sort by submit time and are not reused by a chief whose
// state was wiped over the same PS nodes and directories.
std::string NewJobId(const std::string& name, absl::Time now, uint32_t random);

// A snapshot of one job (Get/List).
struct JobInfo {
  std::string id;  // JobSubmission::id
  uint64_t seq = 0;
  std::string name;
  int priority = 0;
  JobState state = JobState::kQueued;
  std::string message;  // why it failed or was cancelled
  absl::Time submit_time, start_time = absl::InfinitePast(), end_time = absl::InfinitePast();
  std::string spec_json, spec_hash;
  std::vector<sharding::WorkUnit> units;
  int epochs = 1;
  int trainers_wanted = 1;
  absl::Duration lease_duration;
  std::vector<std::string> trainers;        // assigned now (running jobs)
  std::optional<WorkLeasesStats> progress;  // once started
  // RUNNING with every epoch trained: waiting for the chief's final eval,
  // checkpoint and export (then Finish).
  bool finalizing = false;
  std::vector<JobCheckpoint> checkpoints;
  JobMetrics metrics;
  JobEval eval;            // the last evaluation
  std::string export_dir;  // set once exported
  // When its tables and dense variables were dropped from every PS
  // (InfinitePast: not yet).
  absl::Time tables_dropped = absl::InfinitePast();
  // When its spec's init_from was loaded onto the PS nodes (InfinitePast:
  // not yet). Persisted, so a restarted chief never loads it again over rows
  // trainers have updated since.
  absl::Time initialized = absl::InfinitePast();
  std::vector<JobEvent> events;  // oldest first, the last max_events_per_job
  uint64_t events_dropped = 0;
};

// Committed examples over every data epoch so far.
uint64_t ExamplesTrained(const JobInfo& info);

struct JobQueueOptions {
  int max_running_jobs = 1;  // jobs running at once on the shared PS nodes
  // An idle (unassigned) trainer silent this long is dropped from the pool at
  // Expire. Assigned trainers expire by their job's lease_duration.
  absl::Duration trainer_timeout = absl::Seconds(30);
  size_t max_events_per_job = 1000;  // bounds the persisted event log

  absl::Status Validate() const;
};

// A lease of a job's work unit, as the queue hands it to a trainer.
struct JobLease {
  std::string job_id;
  Lease lease;
};

class JobQueue {
 public:
  static absl::StatusOr<std::unique_ptr<JobQueue>> Create(const JobQueueOptions& options);
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;
  ~JobQueue();

  // Queues a job; returns its id. INVALID_ARGUMENT naming the field (name,
  // id, trainers, units, epochs, lease_duration) and nothing changes;
  // ALREADY_EXISTS if a QUEUED or RUNNING job has the name, or any job the id.
  absl::StatusOr<std::string> Submit(const JobSubmission& job, absl::Time now);
  // NOT_FOUND for an unknown id.
  absl::StatusOr<JobInfo> Get(const std::string& job_id) const;
  // Running first, then queued (schedule order), then finished (latest end first).
  std::vector<JobInfo> List() const;
  // QUEUED or RUNNING -> CANCELLED; a running job's trainers are freed (idle:
  // the next Schedule assigns them). NOT_FOUND; FAILED_PRECONDITION if finished.
  absl::Status Cancel(const std::string& job_id, const std::string& reason, absl::Time now);
  // RUNNING -> SUCCEEDED / FAILED (e.g. a step limit reached, or a trainer
  // reports an unrecoverable error); frees its trainers. NOT_FOUND;
  // FAILED_PRECONDITION unless running.
  absl::Status Finish(const std::string& job_id, const std::string& message, absl::Time now);
  absl::Status Fail(const std::string& job_id, const std::string& message, absl::Time now);

  // Starts queued jobs while fewer than max_running_jobs run, then assigns
  // idle trainers to running jobs short of trainers. Returns the ids started.
  std::vector<std::string> Schedule(absl::Time now);

  // Trainer pool. RegisterTrainer adds a trainer (idle) or, for a known id,
  // counts as a restarted process: it leaves its job (its leases go back)
  // and becomes idle. INVALID_ARGUMENT for an empty id.
  absl::Status RegisterTrainer(const std::string& trainer_id, absl::Time now);
  // The job the trainer serves: its current one, else one Schedule(now) gives
  // it; nullopt if there is none. Registers an unknown trainer first.
  absl::StatusOr<std::optional<std::string>> AssignTrainer(const std::string& trainer_id,
                                                           absl::Time now);
  // The job a trainer serves now, if any.
  std::optional<std::string> JobOfTrainer(const std::string& trainer_id) const;

  // Forwarded to the trainer's job's WorkLeases (see work_leases.h for codes).
  // NOT_FOUND: trainer unknown (register again). FAILED_PRECONDITION: the
  // trainer serves no job, or (Commit/Complete) not `job_id`.
  // Acquire: nullopt when nothing is free now. A Complete that finishes the
  // job's last epoch frees its trainers; the job is then `finalizing`.
  absl::StatusOr<std::optional<JobLease>> Acquire(const std::string& trainer_id, absl::Time now);
  absl::Status Commit(const std::string& trainer_id, const std::string& job_id, uint32_t unit_id,
                      uint64_t lease_epoch, uint64_t committed_offset, uint64_t examples,
                      absl::Time now, std::optional<uint64_t> steps = std::nullopt);
  absl::Status Complete(const std::string& trainer_id, const std::string& job_id, uint32_t unit_id,
                        uint64_t lease_epoch, uint64_t end_offset, uint64_t examples,
                        absl::Time now, std::optional<uint64_t> steps = std::nullopt);
  // WorkLeases::StepBase of the job's unit. NOT_FOUND; FAILED_PRECONDITION
  // for a job that never started.
  absl::StatusOr<int64_t> StepBase(const std::string& job_id, uint32_t unit_id) const;
  absl::Status Heartbeat(const std::string& trainer_id, absl::Time now);
  // Expires silent trainers: of each running job (their leases go back) and
  // idle ones past trainer_timeout. Both leave the pool. Returns their ids.
  std::vector<std::string> Expire(absl::Time now);

  // Job bookkeeping: NOT_FOUND for an unknown id; FAILED_PRECONDITION for a
  // job that never started (metrics, checkpoints: the final checkpoint and
  // eval may land after it SUCCEEDED). LogEvent takes any job.
  absl::Status AddCheckpoint(const std::string& job_id, const std::string& dir, int64_t step,
                             absl::Time now);
  absl::Status ReportMetrics(const std::string& job_id, double loss, double auc, uint64_t examples,
                             absl::Time now);
  absl::Status LogEvent(const std::string& job_id, const std::string& text, absl::Time now);
  // Adds to the job's skipped-data counters (JobMetrics) and logs `what` as
  // an event. Takes any job.
  absl::Status AddSkipped(const std::string& job_id, uint64_t corrupt_regions,
                          uint64_t corrupt_bytes, uint64_t bad_examples, const std::string& what,
                          absl::Time now);
  absl::Status SetEval(const std::string& job_id, const JobEval& eval, absl::Time now);
  absl::Status SetExport(const std::string& job_id, const std::string& dir, absl::Time now);
  // Records that a finished job's tables left every PS (`what`: the event
  // text). FAILED_PRECONDITION unless the job is finished.
  // Records that the job's init_from was loaded (JobInfo::initialized),
  // with `what` as its event. FAILED_PRECONDITION unless it is running.
  absl::Status SetInitialized(const std::string& job_id, const std::string& what, absl::Time now);
  absl::Status SetTablesDropped(const std::string& job_id, const std::string& what, absl::Time now);

  // Persistence. Jobs in seq order; version() grows on every change of a job.
  std::vector<std::string> JobIds() const;
  absl::StatusOr<uint64_t> Version(const std::string& job_id) const;
  absl::StatusOr<uint64_t> Seq(const std::string& job_id) const;
  uint64_t next_seq() const { return next_seq_; }
  // Trainers in the pool (registered and not expired), idle or assigned.
  size_t num_trainers() const { return trainers_.size(); }
  const JobQueueOptions& options() const { return options_; }

 private:
  friend class JobQueueCodec;  // job_queue_state.h: the persisted form

  struct Job {
    JobInfo info;                        // `progress` is filled by Snapshot, never stored here
    std::unique_ptr<WorkLeases> leases;  // set once started
    uint64_t version = 1;
  };
  struct PoolTrainer {
    absl::Time last_seen;
    std::string job_id;  // empty: idle
  };

  explicit JobQueue(const JobQueueOptions& options) : options_(options) {}
  Job* Find(const std::string& job_id) const;
  absl::StatusOr<Job*> FindOrNotFound(const std::string& job_id) const;
  absl::StatusOr<Job*> JobOf(const std::string& trainer_id, const std::string* job_id,
                             absl::Time now);
  std::vector<Job*> Ordered() const;  // List order
  absl::Status Start(Job* job, absl::Time now);
  void End(Job* job, JobState state, const std::string& message, absl::Time now);
  void Release(Job* job, absl::Time now);  // every epoch done: trainers freed
  void FreeTrainers(Job* job, absl::Time now);
  void Unassign(Job* job, const std::string& trainer_id);
  void AddEvent(Job* job, absl::Time now, std::string text);
  JobInfo Snapshot(const Job& job) const;

  // Constant after construction.
  const JobQueueOptions options_;

  std::map<uint64_t, std::unique_ptr<Job>> jobs_;  // by seq
  std::map<std::string, uint64_t> seq_of_;         // job id -> seq
  std::map<std::string, PoolTrainer> trainers_;    // ordered: deterministic assignment
  uint64_t next_seq_ = 1;
};

// The PS push stream of a work unit in one data epoch of a job
// (AcquireWorkResponse.push_stream): the same for every holder of that
// unit-epoch, different for another job, unit or epoch, and for a job
// resubmitted under the same id (its submit time differs). Never 0.
uint64_t PushStreamOf(const JobInfo& job, uint32_t unit_id, int64_t data_epoch);

}  // namespace brook::chief
