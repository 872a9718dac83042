#include "chief/service/chief.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "chief/core/chief_state_store.h"
#include "chief/core/job_queue_state.h"
#include "chief/export/init_from.h"
#include "chief/export/model_export.h"
#include "chief/export/output_dirs.h"
#include "chief/job/job_spec.h"
#include "common/random_id.h"
#include "common/status_macros.h"
#include "ps/client/prefixed_ps_client.h"
#include "sharding/sharding.h"
#include "storage/tfrecord.h"
#include "trainer/input/pipeline.h"
#include "trainer/model/model_spec.h"

namespace brook::chief {
namespace {

int64_t ToUs(absl::Time t) {
  return t == absl::InfinitePast() || t == absl::UnixEpoch() ? 0 : absl::ToUnixMicros(t);
}

// Every file the globs match, in glob order, each once.
absl::StatusOr<std::vector<std::string>> ExpandGlobs(const JobSpec& spec, bool eval) {
  ASSIGN_OR_RETURN(std::vector<JobSpec::GlobMatches> matches, spec.CheckData());
  std::vector<std::string> files;
  std::set<std::string> seen;
  const std::string prefix = eval ? "data.eval" : "data.train";
  for (const JobSpec::GlobMatches& m : matches) {
    if (m.field.rfind(prefix + "[", 0) != 0) continue;
    for (const std::string& f : m.files) {
      if (seen.insert(f).second) files.push_back(f);
    }
  }
  return files;
}

bool NeedsMoments(const trainer::ModelSpec& model) {
  for (const trainer::DenseInputSpec& d : model.dense) {
    if (d.transform == trainer::DenseTransform::kStandardize && !d.has_moments) return true;
  }
  return false;
}

// One pass over the training data for the standardize transforms, so every
// trainer (and the export) uses the same moments.
absl::Status ComputeMoments(const std::vector<std::string>& files, JobSpec* spec) {
  input::PipelineOptions o;
  o.files = files;
  o.compression = spec->data.compression;
  o.batch_size = 4096;
  o.skip_corrupt_records = o.skip_bad_examples = spec->data.skip_corrupt;
  ASSIGN_OR_RETURN(auto scan, input::Pipeline::Create(spec->features, o));
  trainer::MomentsAccumulator moments(spec->model, spec->features);
  for (;;) {
    absl::StatusOr<std::optional<input::Batch>> b = scan->Next();
    if (!b.ok()) {
      // The whole train data is read here: its corruption is met at submit.
      return absl::Status(b.status().code(),
                          absl::StrCat("computing the standardize moments: ", b.status().message(),
                                       " (", kOnCorruptHint, ")"));
    }
    if (!b->has_value()) break;
    RETURN_IF_ERROR(moments.Add((*b)->data));
  }
  return moments.Apply(&spec->model);
}

}  // namespace

class Chief::Impl {
 public:
  // What chief.h documents, one for one; Chief forwards to these.
  static absl::StatusOr<std::unique_ptr<Impl>> Open(const ChiefOptions& options, ps::PsClient* ps);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  absl::StatusOr<v1::JobStatus> SubmitJob(const v1::SubmitJobRequest& request);
  absl::StatusOr<v1::JobStatus> GetJob(const v1::GetJobRequest& request);
  absl::StatusOr<v1::ListJobsResponse> ListJobs();
  absl::StatusOr<v1::JobStatus> CancelJob(const v1::CancelJobRequest& request);
  absl::StatusOr<v1::RegisterNodeResponse> RegisterNode(const v1::RegisterNodeRequest& request);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  absl::StatusOr<v1::AcquireWorkResponse> AcquireWork(const v1::AcquireWorkRequest& request);
  absl::StatusOr<v1::CompleteWorkResponse> CompleteWork(const v1::CompleteWorkRequest& request);
  absl::Status ReportMetrics(const v1::ReportMetricsRequest& request);
  void Tick(absl::Time now);
  void RunPendingWork();
  absl::Status SendFences();
  std::vector<uint64_t> FencedClients() const;
  ChiefStats Stats() const;

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
    std::map<std::string, std::string> trainer_warnings;           // the last ReportMetrics.warning
    std::deque<std::pair<absl::Time, uint64_t>> examples_samples;  // rate window
    bool task_queued = false;
    absl::Time next_drop = absl::InfinitePast();  // after a failed drop: retry then
    bool last_was_checkpoint = false;             // checkpoints and evaluations take turns
  };

  Impl(const ChiefOptions& options, ps::PsClient* ps, std::unique_ptr<ChiefStateStore> store,
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
  std::unique_ptr<ChiefStateStore> store_;     // guarded by mu_
  std::unique_ptr<JobQueue> queue_;            // guarded by mu_
  std::map<std::string, JobRuntime> runtime_;  // guarded by mu_
  std::deque<Task> tasks_;                     // guarded by mu_
  std::condition_variable tasks_cv_;
  bool stopping_ = false;        // guarded by mu_
  uint64_t save_errors_ = 0;     // guarded by mu_
  uint64_t tasks_failed_ = 0;    // guarded by mu_
  uint64_t tables_dropped_ = 0;  // guarded by mu_: table parts of ended jobs
  // Ended jobs whose tables are dropped again after a PS restart: one that
  // came back from a restart point older than the drop has them again.
  std::set<std::string> redrop_;   // guarded by mu_
  uint64_t expired_trainers_ = 0;  // guarded by mu_: missed heartbeats, all jobs

  // Fencing, guarded by mu_.
  std::map<std::string, uint64_t> trainer_ps_clients_;  // node id -> PS client id
  // Where each trainer's process log is, as it last said; guarded by mu_.
  std::map<std::string, v1::NodeLog> trainer_logs_;
  std::deque<uint64_t> fenced_;  // oldest first
  bool fence_pending_ = false;   // fenced_ changed since the last successful send
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

absl::Status ChiefOptions::Validate() const {
  if (state_dir.empty()) return absl::InvalidArgumentError("state_dir is required");
  if (lease_duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("lease_duration must be positive");
  }
  if (max_running_jobs < 1) return absl::InvalidArgumentError("max_running_jobs must be >= 1");
  if (tick <= absl::ZeroDuration()) return absl::InvalidArgumentError("tick must be positive");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Chief::Impl>> Chief::Impl::Open(const ChiefOptions& options,
                                                               ps::PsClient* ps) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(std::unique_ptr<ChiefStateStore> store,
                   ChiefStateStore::Open(options.state_dir));
  JobQueueOptions qo;
  qo.max_running_jobs = options.max_running_jobs;
  qo.trainer_timeout = options.lease_duration;
  ASSIGN_OR_RETURN(std::unique_ptr<JobQueue> queue, store->Load(qo, absl::Now()));
  std::unique_ptr<Impl> chief(new Impl(options, ps, std::move(store), std::move(queue)));
  if (options.background) {
    chief->housekeeping_ = std::thread([c = chief.get()] { c->HousekeepingLoop(); });
    chief->worker_ = std::thread([c = chief.get()] { c->WorkerLoop(); });
    chief->fencer_ = std::thread([c = chief.get()] { c->FenceLoop(); });
  }
  return chief;
}

Chief::Impl::Impl(const ChiefOptions& options, ps::PsClient* ps,
                  std::unique_ptr<ChiefStateStore> store, std::unique_ptr<JobQueue> queue)
    : options_(options), ps_(ps), store_(std::move(store)), queue_(std::move(queue)) {}

Chief::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  tasks_cv_.notify_all();
  fence_cv_.notify_all();
  if (housekeeping_.joinable()) housekeeping_.join();
  if (worker_.joinable()) worker_.join();
  if (fencer_.joinable()) fencer_.join();
}

void Chief::Impl::FenceLocked(uint64_t ps_client_id) {
  if (ps_client_id == 0) return;
  if (std::find(fenced_.begin(), fenced_.end(), ps_client_id) != fenced_.end()) return;
  fenced_.push_back(ps_client_id);
  while (fenced_.size() > options_.max_fenced_clients) fenced_.pop_front();
  ++fenced_total_;
  fence_pending_ = true;
  fence_cv_.notify_all();
}

void Chief::Impl::FenceTrainerLocked(const std::string& trainer_id) {
  auto it = trainer_ps_clients_.find(trainer_id);
  if (it == trainer_ps_clients_.end()) return;
  FenceLocked(it->second);
  trainer_ps_clients_.erase(it);
}

std::vector<uint64_t> Chief::Impl::FencedClients() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {fenced_.begin(), fenced_.end()};
}

absl::Status Chief::Impl::SendFences() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fence_pending_ = false;  // a fence added while we send sets it again
    if (ps_ == nullptr) return absl::OkStatus();
    ids.assign(fenced_.begin(), fenced_.end());
  }
  // Sent even when empty: the answers carry each PS's incarnation.
  absl::StatusOr<std::vector<ps::StartupInfo>> startups = ps_->FenceClients(ids);
  std::unique_lock<std::mutex> lock(mu_);
  ++fence_sends_;
  last_fence_error_ = startups.ok() ? "" : std::string(startups.status().message());
  if (!startups.ok()) {
    ++fence_send_errors_;
    if (!fenced_.empty()) fence_pending_ = true;  // again at the next round
    return absl::UnavailableError(
        absl::StrCat("fencing ", ids.size(), " PS client ids: ", startups.status().message()));
  }
  ps_incarnations_.resize(startups->size(), 0);
  bool new_process = false;  // restarted, or first seen by this chief
  for (size_t shard = 0; shard < startups->size(); ++shard) {
    const ps::StartupInfo& now = (*startups)[shard];
    uint64_t& known = ps_incarnations_[shard];
    if (known != 0 && known != now.incarnation) PsRestartedLocked(shard, now);
    new_process = new_process || known != now.incarnation;
    known = now.incarnation;
  }
  if (new_process) {
    // A PS back from a restart point older than a drop (it ran without its
    // WAL, maybe while this chief was down) holds ended jobs' tables again.
    lock.unlock();
    absl::StatusOr<std::vector<ps::ServerStats>> stats = ps_->Stats();
    lock.lock();
    if (stats.ok()) {
      for (const ps::ServerStats& shard : *stats) {
        for (const ps::TableStats& t : shard.tables) RedropIfEndedLocked(t.name);
        for (const ps::DenseStats& d : shard.dense) RedropIfEndedLocked(d.name);
      }
    }
  }
  return absl::OkStatus();
}

void Chief::Impl::NotePsReachabilityLocked(const std::string& fault, absl::Time now) {
  // Shorter blips (a PS restarting on its data dir) are the restart
  // events' to tell.
  constexpr absl::Duration kGrace = absl::Seconds(5);
  std::string text;
  if (fault.empty()) {
    if (ps_unreachable_logged_) {
      text = absl::StrCat(
          "the PS nodes are reachable again (after ",
          absl::FormatDuration(absl::Trunc(now - ps_unreachable_since_, absl::Seconds(1))), ")");
    }
    ps_unreachable_.clear();
    ps_unreachable_logged_ = false;
  } else {
    if (ps_unreachable_.empty()) ps_unreachable_since_ = now;
    ps_unreachable_ = fault;
    if (!ps_unreachable_logged_ && now - ps_unreachable_since_ >= kGrace) {
      ps_unreachable_logged_ = true;
      text = absl::StrCat(
          "the chief cannot reach the PS nodes since ",
          absl::FormatTime("%H:%M:%S UTC", ps_unreachable_since_, absl::UTCTimeZone()), ": ",
          ps_unreachable_,
          " (the chief's own call; each job's trainers, checkpoints and exports retry the PS "
          "for that job's training.retry_seconds)");
    }
  }
  if (text.empty()) return;
  std::cerr << "brook chief: " << text << "\n";
  for (const JobInfo& info : queue_->List()) {
    if (info.state != JobState::kRunning && info.state != JobState::kQueued) continue;
    queue_->LogEvent(info.id, text, now).IgnoreError();
  }
  SaveLocked().IgnoreError();
}

void Chief::Impl::RedropIfEndedLocked(const std::string& ps_name) {
  const size_t slash = ps_name.find('/');
  if (slash == std::string::npos) return;
  absl::StatusOr<JobInfo> info = queue_->Get(ps_name.substr(0, slash));
  if (info.ok() && IsFinished(info->state) && info->tables_dropped != absl::InfinitePast()) {
    redrop_.insert(info->id);
  }
}

void Chief::Impl::PsRestartedLocked(size_t shard, const ps::StartupInfo& startup) {
  const std::string who = absl::StrCat("PS shard ", shard,
                                       shard < options_.ps_addresses.size()
                                           ? absl::StrCat(" (", options_.ps_addresses[shard], ")")
                                           : std::string(),
                                       " restarted");
  const bool rolled_back = !startup.wal;
  ++ps_restarts_;
  if (rolled_back) ++ps_rollbacks_;
  const absl::Time now = absl::Now();
  for (const JobInfo& info : queue_->List()) {
    if (info.state != JobState::kRunning) continue;
    const int64_t step = StepsLocked(info.id);
    std::string text;
    if (!startup.data_dir) {
      text = absl::StrCat(who,
                          " with no data dir: every row and dense variable it held is back "
                          "at its initial value; what this job trained into it is lost (the "
                          "job is at step ",
                          step, ")");
    } else if (!rolled_back) {
      text = absl::StrCat(who, " and replayed its write-ahead log (", startup.wal_records_replayed,
                          " records after ",
                          startup.restored_checkpoint.empty()
                              ? std::string("its start")
                              : absl::StrCat("checkpoint ", startup.restored_checkpoint),
                          "): nothing it acknowledged was lost");
    } else if (startup.restored_checkpoint.empty()) {
      text = absl::StrCat(who,
                          " without its write-ahead log and with no checkpoint: it is "
                          "empty again; what this job trained into it up to step ",
                          step, " is lost");
    } else {
      // The restart point is the PS's, shared by every job: what this job
      // lost is measured from its own checkpoints, not the point's step.
      const absl::Time written = absl::FromUnixMicros(startup.restored_created_unix_micros);
      const std::string point = absl::StrCat(
          " without its write-ahead log: ROLLED BACK to its restart point ",
          startup.restored_checkpoint, " (written ",
          absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", written, absl::UTCTimeZone()), ")");
      const JobCheckpoint* before = nullptr;
      for (const JobCheckpoint& c : info.checkpoints) {
        if (c.time <= written + absl::Seconds(1)) before = &c;
      }
      if (written < info.start_time) {
        text = absl::StrCat(who, point,
                            ", from before this job started: its tables there are "
                            "gone and what it trained into them up to step ",
                            step,
                            " is lost; its trainers declare them again from their "
                            "initializers");
      } else if (before == nullptr) {
        text = absl::StrCat(who, point,
                            ", before this job's first checkpoint: what it pushed "
                            "there after that time is lost (it is at step ",
                            step, ")");
      } else {
        text = absl::StrCat(who, point,
                            "; the updates this job pushed to it after its checkpoint "
                            "at step ",
                            before->step, " are lost: about ",
                            std::max<int64_t>(0, step - before->step), " steps (step ",
                            before->step, " to ", step, ")");
      }
    }
    std::cerr << "brook chief: job " << info.id << ": " << text << "\n";
    if (absl::Status s = queue_->LogEvent(info.id, text, now); !s.ok()) {
      std::cerr << "brook chief: " << s.message() << "\n";
    }
  }
  if (absl::Status s = SaveLocked(); !s.ok()) std::cerr << "brook chief: " << s.message() << "\n";
}

void Chief::Impl::FenceLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  absl::Time next_resend = absl::Now();  // learn the PS incarnations at once
  while (!stopping_) {
    // A failed send is retried after a tick, not in a tight loop.
    fence_cv_.wait_for(lock, absl::ToChronoMilliseconds(options_.tick),
                       [&] { return stopping_ || fence_pending_; });
    if (stopping_) return;
    const absl::Time now = absl::Now();
    if (!fence_pending_ && now < next_resend) continue;
    next_resend = now + options_.fence_resend;
    lock.unlock();
    if (absl::Status s = SendFences(); !s.ok()) std::cerr << "brook chief: " << s.message() << "\n";
    lock.lock();
  }
}

absl::Status Chief::Impl::SaveLocked() {
  absl::Status s = store_->Save(*queue_);
  if (!s.ok()) {
    ++save_errors_;
    return absl::InternalError(absl::StrCat("chief state not saved: ", s.message()));
  }
  return s;
}

absl::StatusOr<std::shared_ptr<const JobSpec>> Chief::Impl::SpecLocked(const JobInfo& info) {
  JobRuntime& rt = runtime_[info.id];
  if (rt.spec == nullptr) {
    absl::StatusOr<JobSpec> spec = JobSpec::FromYaml(info.spec_json, "");
    if (!spec.ok()) {
      return absl::DataLossError(absl::StrCat(
          "job '", info.id, "': stored spec does not parse: ", spec.status().message()));
    }
    rt.spec = std::make_shared<const JobSpec>(*std::move(spec));
  }
  return rt.spec;
}

int64_t Chief::Impl::StepsLocked(const std::string& job_id) const {
  absl::StatusOr<JobInfo> info = queue_->Get(job_id);
  if (!info.ok() || !info->progress.has_value()) return 0;
  return info->progress->steps;
}

v1::JobStatus Chief::Impl::StatusLocked(const JobInfo& i, bool with_events) {
  v1::JobStatus s;
  s.set_id(i.id);
  s.set_name(i.name);
  s.set_priority(i.priority);
  s.set_state(std::string(JobStateName(i.state)));
  s.set_message(i.message);
  s.set_submit_time_us(ToUs(i.submit_time));
  s.set_start_time_us(ToUs(i.start_time));
  s.set_end_time_us(ToUs(i.end_time));
  s.set_spec_hash(i.spec_hash);
  s.set_epochs(i.epochs);
  s.set_trainers_wanted(i.trainers_wanted);
  for (const std::string& t : i.trainers) s.add_trainers(t);
  s.set_finalizing(i.finalizing);
  uint64_t examples = 0;
  if (i.progress.has_value()) {
    const WorkLeasesStats& p = *i.progress;
    s.set_epoch(p.epoch);
    s.set_units_total(p.units_total);
    s.set_units_done(p.units_done);
    s.set_units_leased(p.units_leased);
    s.set_units_pending(p.units_pending);
    for (uint64_t e : p.examples_per_epoch) {
      s.add_examples_per_epoch(e);
      examples += e;
    }
    for (uint64_t r : p.records_per_epoch) s.add_records_per_epoch(r);
    if (p.epoch >= 1 && !p.records_per_epoch.empty()) {
      s.set_records_per_epoch_estimate(p.records_per_epoch[0]);
    }
    s.set_releases(p.releases);
    s.set_expired_trainers(p.expired_trainers);
    double progress = 1;
    if (!p.finished && i.epochs > 0 && p.units_total > 0) {
      progress = (static_cast<double>(p.epoch) +
                  static_cast<double>(p.units_done) / static_cast<double>(p.units_total)) /
                 i.epochs;
    } else if (!p.finished) {
      progress = 0;
    }
    s.set_progress(std::clamp(progress, 0.0, 1.0));
  }
  s.set_examples_trained(examples);
  s.set_skipped_corrupt_regions(i.metrics.skipped_corrupt_regions);
  s.set_skipped_corrupt_bytes(i.metrics.skipped_corrupt_bytes);
  s.set_skipped_bad_examples(i.metrics.skipped_bad_examples);
  if (i.metrics.reported) {
    s.set_loss(i.metrics.loss);
    s.set_train_auc(std::isnan(i.metrics.auc) ? 0 : i.metrics.auc);
  }
  auto rt = runtime_.find(i.id);
  if (rt != runtime_.end() && rt->second.examples_samples.size() >= 2 &&
      i.state == JobState::kRunning) {
    const auto& first = rt->second.examples_samples.front();
    const auto& last = rt->second.examples_samples.back();
    const double dt = absl::ToDoubleSeconds(last.first - first.first);
    if (dt > 0) s.set_examples_per_second(static_cast<double>(last.second - first.second) / dt);
  }
  for (const JobCheckpoint& c : i.checkpoints) ToProto(c, s.add_checkpoints());
  ToProto(i.eval, s.mutable_eval());
  s.set_export_dir(i.export_dir);
  s.set_tables_dropped_time_us(ToUs(i.tables_dropped));
  if (with_events) {
    for (const JobEvent& e : i.events) ToProto(e, s.add_events());
    for (const auto& [node, log] : trainer_logs_) {
      v1::ChiefTrainerLog* t = s.add_trainer_logs();
      t->set_node_id(node);
      *t->mutable_log() = log;
    }
    s.set_events_dropped(i.events_dropped);
    s.set_spec_json(i.spec_json);
  }
  return s;
}

absl::StatusOr<v1::JobStatus> Chief::Impl::SubmitJob(const v1::SubmitJobRequest& request) {
  // Parse, expand and scan outside the mutex: a big dataset's record count or
  // moments pass must not stall the trainers' calls.
  ASSIGN_OR_RETURN(JobSpec spec, JobSpec::FromYaml(request.spec_json(), ""));
  if (spec.training.steps > 0) return absl::InvalidArgumentError(kChiefRefusesSteps);
  // The files as this chief sees them: every one a TFRecord, the first
  // records fitting the feature spec (the CLI checked them where it runs).
  ASSIGN_OR_RETURN(std::vector<JobSpec::GlobMatches> matches, spec.CheckData());
  ASSIGN_OR_RETURN(input::DataCheckResult data_check, spec.CheckDataContents(matches));
  ASSIGN_OR_RETURN(std::vector<std::string> train, ExpandGlobs(spec, /*eval=*/false));
  std::vector<sharding::DataFile> files;
  for (const std::string& f : train) {
    sharding::DataFile d{.path = f};
    if (spec.data.records_per_unit > 0) {
      ASSIGN_OR_RETURN(d.records, storage::CountTFRecords(f, spec.data.compression.value_or(
                                                                 storage::CompressionFromPath(f))));
    }
    files.push_back(std::move(d));
  }
  if (NeedsMoments(spec.model)) RETURN_IF_ERROR(ComputeMoments(train, &spec));
  if (!spec.init_from.path.empty()) RETURN_IF_ERROR(PlanInitFrom(spec).status());

  JobSubmission sub;
  sub.name = spec.name;
  sub.priority = spec.priority;
  sub.spec_json = spec.CanonicalJson();
  sub.spec_hash = spec.SpecHash();
  sub.units = sharding::PlanWorkUnits(files, static_cast<uint64_t>(spec.data.records_per_unit));
  sub.epochs = spec.training.epochs;
  sub.trainers = spec.trainers;
  sub.lease_duration = options_.lease_duration;

  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  // A fresh id, never one whose checkpoints or export exist: a job never
  // starts from, or writes into, another run's files.
  for (int attempt = 0;; ++attempt) {
    sub.id = NewJobId(sub.name, now, static_cast<uint32_t>(RandomNonZeroId()));
    if (!queue_->Get(sub.id).ok()) break;
    if (attempt == 8) return absl::InternalError("no unused job id after 8 tries");
  }
  RETURN_IF_ERROR(CheckOutputDirs(spec, /*create=*/true));
  for (const std::string& parent : {spec.checkpoint.dir, spec.export_dir}) {
    if (parent.empty()) continue;
    const std::string dir = absl::StrCat(parent, "/", sub.id);
    std::error_code ec;
    if (std::filesystem::exists(dir, ec)) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir, " exists: it holds another run's files; a job never writes into them"));
    }
  }
  ASSIGN_OR_RETURN(std::string id, queue_->Submit(sub, now));
  if (!ps_unreachable_.empty()) {
    RETURN_IF_ERROR(queue_->LogEvent(
        id,
        absl::StrCat("warning: the chief cannot reach the PS nodes now: ", ps_unreachable_,
                     "; the job's trainers retry it for training.retry_seconds (",
                     spec.training.retry_seconds, " s) before the job fails"),
        now));
  }
  for (const std::string& w : data_check.warnings) {
    RETURN_IF_ERROR(queue_->LogEvent(id, absl::StrCat("warning: ", w), now));
  }
  runtime_[id].spec = std::make_shared<const JobSpec>(std::move(spec));
  queue_->Schedule(now);
  RETURN_IF_ERROR(SaveLocked());
  ASSIGN_OR_RETURN(JobInfo info, queue_->Get(id));
  return StatusLocked(info, false);
}

std::string Chief::Impl::ResolveJobIdLocked(const std::string& id_or_name) const {
  if (queue_->Get(id_or_name).ok()) return id_or_name;
  // A name: its active job, else its latest (List puts those first).
  for (const JobInfo& info : queue_->List()) {
    if (info.name == id_or_name) return info.id;
  }
  return id_or_name;
}

absl::StatusOr<v1::JobStatus> Chief::Impl::GetJob(const v1::GetJobRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(JobInfo info, queue_->Get(ResolveJobIdLocked(request.job_id())));
  return StatusLocked(info, request.with_events());
}

absl::StatusOr<v1::ListJobsResponse> Chief::Impl::ListJobs() {
  std::lock_guard<std::mutex> lock(mu_);
  v1::ListJobsResponse out;
  for (const JobInfo& info : queue_->List()) *out.add_jobs() = StatusLocked(info, false);
  return out;
}

absl::StatusOr<v1::JobStatus> Chief::Impl::CancelJob(const v1::CancelJobRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  const std::string id = ResolveJobIdLocked(request.job_id());
  RETURN_IF_ERROR(
      queue_->Cancel(id, request.reason().empty() ? "cancelled by user" : request.reason(), now));
  queue_->Schedule(now);
  RETURN_IF_ERROR(SaveLocked());
  ASSIGN_OR_RETURN(JobInfo info, queue_->Get(id));
  return StatusLocked(info, false);
}

absl::StatusOr<v1::RegisterNodeResponse> Chief::Impl::RegisterNode(
    const v1::RegisterNodeRequest& request) {
  if (request.role() != v1::NODE_ROLE_TRAINER) {
    return absl::InvalidArgumentError("role: only trainers register with the chief");
  }
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  RETURN_IF_ERROR(queue_->RegisterTrainer(request.node_id(), now));
  // A node id registering again is a new process (or one that lost its
  // leases): whatever its previous registration pushes from now on is stale.
  auto known = trainer_ps_clients_.find(request.node_id());
  if (known != trainer_ps_clients_.end() && known->second != request.ps_client_id()) {
    FenceTrainerLocked(request.node_id());
  }
  if (request.ps_client_id() != 0) trainer_ps_clients_[request.node_id()] = request.ps_client_id();
  if (request.has_log()) trainer_logs_[request.node_id()] = request.log();
  queue_->Schedule(now);
  RETURN_IF_ERROR(SaveLocked());
  v1::RegisterNodeResponse out;
  for (const std::string& a : options_.ps_addresses) out.add_ps_addresses(a);
  out.set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.lease_duration / 4));
  return out;
}

absl::StatusOr<v1::HeartbeatResponse> Chief::Impl::Heartbeat(const v1::HeartbeatRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(queue_->Heartbeat(request.node_id(), absl::Now()));
  // A restarted chief learns the trainers' PS client ids back from here.
  if (request.ps_client_id() != 0) trainer_ps_clients_[request.node_id()] = request.ps_client_id();
  if (request.has_log()) trainer_logs_[request.node_id()] = request.log();
  v1::HeartbeatResponse out;
  out.set_job_id(queue_->JobOfTrainer(request.node_id()).value_or(""));
  return out;
}

absl::StatusOr<v1::AcquireWorkResponse> Chief::Impl::AcquireWork(
    const v1::AcquireWorkRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  v1::AcquireWorkResponse out;
  out.set_retry_after_ms(absl::ToInt64Milliseconds(options_.retry_after));
  if (request.node_id().empty()) return absl::InvalidArgumentError("node_id is required");
  // An unknown node must register (it then learns its leases are gone).
  if (!queue_->Heartbeat(request.node_id(), now).ok()) {
    return absl::NotFoundError(absl::StrCat("trainer '", request.node_id(),
                                            "' is not registered (or expired): register again"));
  }
  ASSIGN_OR_RETURN(std::optional<std::string> job, queue_->AssignTrainer(request.node_id(), now));
  if (!job.has_value()) {
    RETURN_IF_ERROR(SaveLocked());
    return out;
  }
  if (absl::StatusOr<JobInfo> assigned = queue_->Get(*job);
      assigned.ok() && AwaitsInitLocked(*assigned)) {
    RETURN_IF_ERROR(SaveLocked());
    return out;  // retry later: no step trains before init_from is loaded
  }
  absl::StatusOr<std::optional<JobLease>> lease = queue_->Acquire(request.node_id(), now);
  if (absl::IsOutOfRange(lease.status())) return out;  // the job's data is done
  if (!lease.ok()) return lease.status();
  RETURN_IF_ERROR(SaveLocked());
  if (!lease->has_value()) return out;
  ASSIGN_OR_RETURN(JobInfo info, queue_->Get((*lease)->job_id));
  const Lease& l = (*lease)->lease;
  out.set_job_id(info.id);
  out.set_spec_json(info.spec_json);
  out.set_table_prefix(TablePrefix(info.id));
  v1::ChiefWorkUnit* u = out.mutable_unit();
  u->set_id(l.unit.id);
  u->set_path(l.unit.path);
  u->set_begin(l.unit.begin);
  u->set_end(l.unit.end);
  out.set_resume_offset(l.resume_offset);
  if (l.resume_step.has_value()) {
    out.set_resume_step(*l.resume_step);
    out.set_push_stream(PushStreamOf(info, l.unit.id, l.epoch));
  }
  out.set_job_step_base(l.step_base);
  out.set_data_epoch(l.epoch);
  out.set_lease_epoch(l.lease_epoch);
  return out;
}

absl::StatusOr<v1::CompleteWorkResponse> Chief::Impl::CompleteWork(
    const v1::CompleteWorkRequest& r) {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  const std::optional<uint64_t> steps =
      r.has_steps() ? std::optional<uint64_t>(r.steps()) : std::nullopt;
  if (r.done()) {
    RETURN_IF_ERROR(queue_->Complete(r.node_id(), r.job_id(), r.unit_id(), r.lease_epoch(),
                                     r.offset(), r.examples(), now, steps));
  } else {
    RETURN_IF_ERROR(queue_->Commit(r.node_id(), r.job_id(), r.unit_id(), r.lease_epoch(),
                                   r.offset(), r.examples(), now, steps));
  }
  if (r.skipped_corrupt_regions() + r.skipped_bad_examples() > 0) {
    // Counted with the commit they came with: a refused commit adds nothing.
    std::string file = absl::StrCat("work unit ", r.unit_id());
    if (absl::StatusOr<JobInfo> job = queue_->Get(r.job_id()); job.ok()) {
      for (const sharding::WorkUnit& u : job->units) {
        if (u.id == r.unit_id()) file = absl::StrCat(u.path, " (work unit ", u.id, ")");
      }
    }
    RETURN_IF_ERROR(queue_->AddSkipped(
        r.job_id(), r.skipped_corrupt_regions(), r.skipped_corrupt_bytes(),
        r.skipped_bad_examples(),
        absl::StrFormat("trainer '%s' skipped %d corrupt regions (%d bytes) and %d records that "
                        "do not parse in %s (data.on_corrupt: skip)",
                        r.node_id(), r.skipped_corrupt_regions(), r.skipped_corrupt_bytes(),
                        r.skipped_bad_examples(), file),
        now));
  }
  RETURN_IF_ERROR(SaveLocked());
  ASSIGN_OR_RETURN(JobInfo info, queue_->Get(r.job_id()));
  const uint64_t examples = ExamplesTrained(info);
  auto& samples = runtime_[r.job_id()].examples_samples;
  samples.emplace_back(now, examples);
  while (samples.size() > 2 && now - samples.front().first > absl::Minutes(1)) samples.pop_front();
  v1::CompleteWorkResponse out;
  if (info.progress.has_value()) out.set_job_steps(info.progress->steps);
  if (absl::StatusOr<int64_t> base = queue_->StepBase(r.job_id(), r.unit_id()); base.ok()) {
    out.set_job_step_base(*base);
  }
  return out;
}

absl::Status Chief::Impl::ReportMetrics(const v1::ReportMetricsRequest& r) {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  if (queue_->JobOfTrainer(r.node_id()) != r.job_id()) {
    return absl::FailedPreconditionError(
        absl::StrCat("trainer '", r.node_id(), "' does not serve job '", r.job_id(), "'"));
  }
  ASSIGN_OR_RETURN(JobInfo info, queue_->Get(r.job_id()));
  const uint64_t examples = ExamplesTrained(info);
  if (!r.error().empty()) {
    RETURN_IF_ERROR(
        queue_->Fail(r.job_id(), absl::StrCat("trainer '", r.node_id(), "': ", r.error()), now));
    queue_->Schedule(now);
    return SaveLocked();
  }
  LogTrainerWarningLocked(r, now);
  RETURN_IF_ERROR(queue_->ReportMetrics(r.job_id(), r.loss(), r.train_auc(), examples, now));
  return SaveLocked();
}

void Chief::Impl::LogTrainerWarningLocked(const v1::ReportMetricsRequest& r, absl::Time now) {
  std::string& last = runtime_[r.job_id()].trainer_warnings[r.node_id()];
  if (r.warning() == last) return;
  // One event when a trainer starts riding out a PS fault, one when it ends.
  const std::string text =
      r.warning().empty()
          ? absl::StrCat("trainer '", r.node_id(), "': no longer retrying (was: ", last, ")")
          : absl::StrCat("trainer '", r.node_id(), "': ", r.warning());
  last = r.warning();
  std::cerr << "brook chief: job " << r.job_id() << ": " << text << "\n";
  if (absl::Status s = queue_->LogEvent(r.job_id(), text, now); !s.ok()) {
    std::cerr << "brook chief: " << s.message() << "\n";
  }
}

void Chief::Impl::Enqueue(Task task) {
  runtime_[task.job_id].task_queued = true;
  tasks_.push_back(std::move(task));
  tasks_cv_.notify_all();
}

void Chief::Impl::Tick(absl::Time now) {
  // Asked outside mu_: the PS client has its own lock.
  std::string fault = options_.ps_fault ? options_.ps_fault() : std::string();
  std::lock_guard<std::mutex> lock(mu_);
  if (fault.empty()) fault = last_fence_error_;
  NotePsReachabilityLocked(fault, now);
  for (const std::string& t : queue_->Expire(now)) {
    ++expired_trainers_;
    FenceTrainerLocked(t);
    std::cerr << "brook chief: trainer '" << t
              << "' missed its heartbeats; its work units go back\n";
  }
  queue_->Schedule(now);
  for (const JobInfo& info : queue_->List()) {
    if (IsFinished(info.state)) {
      if (TablesDueForDropLocked(info, now)) Enqueue({Task::kDrop, info.id});
      continue;
    }
    if (info.state != JobState::kRunning) continue;
    JobRuntime& rt = runtime_[info.id];
    if (rt.task_queued) continue;
    if (AwaitsInitLocked(info)) continue;  // it queued the load
    if (info.finalizing) {
      Enqueue({Task::kFinalize, info.id});
      continue;
    }
    absl::StatusOr<std::shared_ptr<const JobSpec>> spec = SpecLocked(info);
    if (!spec.ok() || ps_ == nullptr) continue;
    // When both are due they take turns: slow checkpoints due at every tick
    // must not starve evaluations, nor the other way round.
    const bool checkpoint = CheckpointDueLocked(info, **spec, now);
    const bool eval = EvalDueLocked(info, **spec);
    if (checkpoint && (!eval || !rt.last_was_checkpoint)) {
      AdvanceCheckpointLocked(info, **spec);
      rt.last_was_checkpoint = true;
      Enqueue({Task::kCheckpoint, info.id});
    } else if (eval) {
      AdvanceEvalLocked(info, **spec);
      rt.last_was_checkpoint = false;
      Enqueue({Task::kEval, info.id});
    }
  }
  if (absl::Status s = SaveLocked(); !s.ok()) std::cerr << "brook chief: " << s.message() << "\n";
}

bool Chief::Impl::CheckpointDueLocked(const JobInfo& info, const JobSpec& spec, absl::Time now) {
  const JobCheckpointSpec& ckpt = spec.checkpoint;
  if (ckpt.dir.empty()) return false;
  JobRuntime& rt = runtime_[info.id];
  if (ckpt.interval_steps > 0) {
    const int64_t last_step = info.checkpoints.empty() ? 0 : info.checkpoints.back().step;
    if (rt.next_checkpoint_step == 0) {
      rt.next_checkpoint_step = (last_step / ckpt.interval_steps + 1) * ckpt.interval_steps;
    }
    if (StepsLocked(info.id) >= rt.next_checkpoint_step) return true;
  }
  const absl::Time last = info.checkpoints.empty() ? info.start_time : info.checkpoints.back().time;
  return ckpt.interval_seconds > 0 && now - last >= absl::Seconds(ckpt.interval_seconds);
}

void Chief::Impl::AdvanceCheckpointLocked(const JobInfo& info, const JobSpec& spec) {
  const int64_t every = spec.checkpoint.interval_steps;
  if (every > 0)
    runtime_[info.id].next_checkpoint_step = (StepsLocked(info.id) / every + 1) * every;
}

bool Chief::Impl::EvalDueLocked(const JobInfo& info, const JobSpec& spec) {
  if (spec.eval_every_steps <= 0 || spec.data.eval.empty()) return false;
  JobRuntime& rt = runtime_[info.id];
  const int64_t every = spec.eval_every_steps;
  if (rt.next_eval_step == 0) rt.next_eval_step = (info.eval.step / every + 1) * every;
  return StepsLocked(info.id) >= rt.next_eval_step;
}

void Chief::Impl::AdvanceEvalLocked(const JobInfo& info, const JobSpec& spec) {
  const int64_t every = spec.eval_every_steps;
  runtime_[info.id].next_eval_step = (StepsLocked(info.id) / every + 1) * every;
}

bool Chief::Impl::TablesDueForDropLocked(const JobInfo& info, absl::Time now) {
  const JobRuntime& rt = runtime_[info.id];
  if (ps_ == nullptr || !info.progress.has_value() || rt.task_queued || now < rt.next_drop) {
    return false;
  }
  if (info.tables_dropped != absl::InfinitePast()) return redrop_.count(info.id) != 0;
  absl::StatusOr<std::shared_ptr<const JobSpec>> spec = SpecLocked(info);
  const int64_t retention =
      spec.ok() ? (*spec)->retention_seconds : JobSpec::kDefaultRetentionSeconds;
  // A success whose model was written out needs nothing more on the PS;
  // anything else is kept `retention` for a look (or a rescue) first.
  const bool written = !info.export_dir.empty() || !info.checkpoints.empty();
  if (info.state == JobState::kSucceeded && written) return true;
  return now - info.end_time >= absl::Seconds(retention);
}

absl::Status Chief::Impl::DropTables(const std::string& job_id) {
  absl::StatusOr<ps::DroppedTables> dropped = ps_->DropTablesWithPrefix(TablePrefix(job_id));
  if (!dropped.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    runtime_[job_id].next_drop = absl::Now() + absl::Seconds(30);
    return absl::Status(dropped.status().code(),
                        absl::StrCat("dropping the job's tables from the PS nodes (retried): ",
                                     dropped.status().message()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  tables_dropped_ += dropped->tables;
  const bool again = redrop_.erase(job_id) != 0;
  if (again && dropped->tables + dropped->dense == 0) return absl::OkStatus();
  RETURN_IF_ERROR(queue_->SetTablesDropped(
      job_id,
      absl::StrCat(
          again ? "dropped again " : "dropped ", "its ", dropped->tables, " table parts and ",
          dropped->dense,
          " dense variable parts from every PS (memory and RocksDB): the job has ended",
          again ? "; a PS had brought them back from a restart point older than the drop" : ""),
      absl::Now()));
  return SaveLocked();
}

void Chief::Impl::HousekeepingLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    Tick(absl::Now());
    lock.lock();
    tasks_cv_.wait_for(lock, absl::ToChronoMilliseconds(options_.tick), [&] { return stopping_; });
  }
}

void Chief::Impl::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    tasks_cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (stopping_) return;
    RunFirstTask(lock);
  }
}

void Chief::Impl::RunPendingWork() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!tasks_.empty()) RunFirstTask(lock);
}

void Chief::Impl::RunFirstTask(std::unique_lock<std::mutex>& lock) {
  Task task = std::move(tasks_.front());
  tasks_.pop_front();
  lock.unlock();
  RunTask(task);
  lock.lock();
  runtime_[task.job_id].task_queued = false;
}

void Chief::Impl::RunTask(const Task& task) {
  if (options_.set_ps_admin_retry_window) {
    // The job's own window for its checkpoints, evals and exports, as its
    // trainers have for their pushes.
    absl::Duration window = absl::Seconds(JobTrainingSpec::kDefaultRetrySeconds);
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::StatusOr<JobInfo> info = queue_->Get(task.job_id); info.ok()) {
      if (absl::StatusOr<std::shared_ptr<const JobSpec>> spec = SpecLocked(*info); spec.ok()) {
        window = absl::Seconds((*spec)->training.retry_seconds);
      }
    }
    options_.set_ps_admin_retry_window(window);
  }
  absl::Status s;
  if (task.kind == Task::kFinalize) {
    s = Finalize(task.job_id);
  } else if (task.kind == Task::kDrop) {
    s = DropTables(task.job_id);
  } else if (task.kind == Task::kInitialize) {
    s = InitializeJob(task.job_id);
  } else {
    std::shared_ptr<const JobSpec> spec;
    int64_t steps = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      absl::StatusOr<JobInfo> info = queue_->Get(task.job_id);
      if (!info.ok() || info->state != JobState::kRunning) return;
      absl::StatusOr<std::shared_ptr<const JobSpec>> got = SpecLocked(*info);
      if (!got.ok()) {
        s = got.status();
      } else {
        spec = *got;
        steps = StepsLocked(task.job_id);
      }
    }
    if (s.ok() && task.kind == Task::kEval) {
      s = Evaluate(task.job_id, *spec, steps).status();
    } else if (s.ok()) {
      s = Checkpoint(task.job_id, *spec, steps, absl::StrCat("step-", steps));
    }
  }
  if (!s.ok() && !absl::IsCancelled(s)) {  // cancelled: the chief is stopping
    std::lock_guard<std::mutex> lock(mu_);
    ++tasks_failed_;
    std::cerr << "brook chief: job " << task.job_id << ": " << s.message() << "\n";
    queue_->LogEvent(task.job_id, absl::StrCat("error: ", s.message()), absl::Now()).IgnoreError();
    SaveLocked().IgnoreError();
  }
}

bool Chief::Impl::AwaitsInitLocked(const JobInfo& info) {
  if (info.state != JobState::kRunning || info.initialized != absl::InfinitePast()) return false;
  absl::StatusOr<std::shared_ptr<const JobSpec>> spec = SpecLocked(info);
  if (!spec.ok() || (*spec)->init_from.path.empty()) return false;
  if (ps_ != nullptr && !runtime_[info.id].task_queued) Enqueue({Task::kInitialize, info.id});
  return true;
}

// Loads the job's init_from onto its own tables before any trainer trains a
// step of it. A source that went bad since submit fails the job; a PS that
// is unreachable is retried at the next tick.
absl::Status Chief::Impl::InitializeJob(const std::string& job_id) {
  std::shared_ptr<const JobSpec> spec;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(JobInfo info, queue_->Get(job_id));
    if (info.state != JobState::kRunning || info.initialized != absl::InfinitePast()) {
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(spec, SpecLocked(info));
  }
  ps::PrefixedPsClient job_ps(ps_, TablePrefix(job_id));
  absl::StatusOr<InitFromPlan> plan = PlanInitFrom(*spec);
  absl::StatusOr<InitFromResult> loaded =
      plan.ok() ? LoadInitFrom(&job_ps, *spec, *plan) : plan.status();
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  if (!loaded.ok()) {
    const absl::Status& e = loaded.status();
    const std::string msg = absl::StrCat("init_from ", spec->init_from.path, ": ", e.message());
    if (absl::IsUnavailable(e) || absl::IsDeadlineExceeded(e) || absl::IsResourceExhausted(e) ||
        absl::IsAborted(e) || absl::IsCancelled(e)) {
      return absl::Status(e.code(), absl::StrCat(msg, " (retried)"));
    }
    RETURN_IF_ERROR(queue_->Fail(job_id, msg, now));
    return SaveLocked();
  }
  RETURN_IF_ERROR(queue_->SetInitialized(job_id, loaded->event, now));
  return SaveLocked();
}

absl::Status Chief::Impl::Checkpoint(const std::string& job_id, const JobSpec& spec, int64_t step,
                                     const std::string& name) {
  const std::string dir = absl::StrCat(spec.checkpoint.dir, "/", job_id, "/", name);
  {
    // DIR/<job id>/ is this job's alone: a step dir there that no recorded
    // checkpoint names is what a chief or PS killed mid-checkpoint left.
    // It would refuse this one ("exists"); it is no one's to keep.
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(JobInfo info, queue_->Get(job_id));
    const bool recorded = std::any_of(info.checkpoints.begin(), info.checkpoints.end(),
                                      [&](const JobCheckpoint& c) { return c.dir == dir; });
    std::error_code ec;
    if (!recorded) std::filesystem::remove_all(dir, ec);
  }
  ps::CheckpointOptions o;
  o.dir = dir;
  o.table_prefix = TablePrefix(job_id);  // this job's tables only (issue 23)
  o.step = step;
  absl::StatusOr<std::vector<ps::CheckpointInfo>> done = ps_->Checkpoint(o);
  if (!done.ok()) {
    return absl::Status(done.status().code(),
                        absl::StrCat("checkpoint to ", dir, " failed: ", done.status().message()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  // Its time is when the PS nodes took it (the instant of their restart
  // points too), not when the last one finished writing.
  absl::Time now = absl::Now();
  for (const ps::CheckpointInfo& part : *done) {
    if (part.created_unix_micros > 0)
      now = std::min(now, absl::FromUnixMicros(part.created_unix_micros));
  }
  RETURN_IF_ERROR(queue_->AddCheckpoint(job_id, dir, step, now));
  // Keep the newest `keep`; older ones are deleted (they stay listed), and
  // so is anything else in the job's checkpoint dir (a killed attempt's).
  ASSIGN_OR_RETURN(JobInfo info, queue_->Get(job_id));
  const int n = static_cast<int>(info.checkpoints.size());
  std::set<std::string> kept;
  for (int i = std::max(0, n - spec.checkpoint.keep); i < n; ++i) {
    kept.insert(std::filesystem::path(info.checkpoints[static_cast<size_t>(i)].dir).filename());
  }
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(absl::StrCat(spec.checkpoint.dir, "/", job_id), ec)) {
    if (kept.count(entry.path().filename().string()) == 0) {
      std::error_code removed;
      std::filesystem::remove_all(entry.path(), removed);
    }
  }
  return SaveLocked();
}

absl::StatusOr<std::optional<trainer::EvalResult>> Chief::Impl::Evaluate(const std::string& job_id,
                                                                         const JobSpec& spec,
                                                                         int64_t step) {
  if (spec.data.eval.empty()) return std::optional<trainer::EvalResult>();
  ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandGlobs(spec, /*eval=*/true));
  ps::PrefixedPsClient job_ps(ps_, TablePrefix(job_id));
  ASSIGN_OR_RETURN(trainer::EvalResult eval, ScoreModel(&job_ps, spec, files));
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  RETURN_IF_ERROR(queue_->SetEval(job_id,
                                  JobEval{.done = true,
                                          .step = step,
                                          .examples = eval.examples,
                                          .auc = eval.auc,
                                          .logloss = eval.logloss,
                                          .accuracy = eval.accuracy,
                                          .calibration = eval.calibration,
                                          .time = now},
                                  now));
  RETURN_IF_ERROR(SaveLocked());
  return std::optional<trainer::EvalResult>(eval);
}

void Chief::Impl::FinalizePhase(const std::string& job_id, const char* phase) {
  std::cerr << "brook chief: job " << job_id << ": finalizing: " << phase << "\n";
  // A test's kill -9 point: the chief waits here (until it is stopped) when
  // BROOK_TEST_FINALIZE_PAUSE names the phase.
  const char* pause = std::getenv("BROOK_TEST_FINALIZE_PAUSE");
  if (pause == nullptr || std::string_view(pause) != phase) return;
  std::cout << "brook chief: job " << job_id << ": paused before finalizing: " << phase
            << std::endl;
  std::unique_lock<std::mutex> lock(mu_);
  tasks_cv_.wait(lock, [&] { return stopping_; });
}

absl::Status Chief::Impl::Finalize(const std::string& job_id) {
  std::shared_ptr<const JobSpec> spec;
  int64_t steps = 0;
  bool final_checkpoint_recorded = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(JobInfo info, queue_->Get(job_id));
    if (info.state != JobState::kRunning || !info.finalizing) return absl::OkStatus();
    ASSIGN_OR_RETURN(spec, SpecLocked(info));
    steps = StepsLocked(job_id);
    // A restarted chief finalizes again from where the last one was cut.
    const std::string final_dir = absl::StrCat(spec->checkpoint.dir, "/", job_id, "/final");
    for (const JobCheckpoint& c : info.checkpoints) {
      if (c.dir == final_dir) final_checkpoint_recorded = true;
    }
    if (ps_ == nullptr) {
      RETURN_IF_ERROR(
          queue_->Finish(job_id, "trained; no PS client: not evaluated or exported", absl::Now()));
      return SaveLocked();
    }
  }
  // A PS that restarted since the last round is reported to the job before
  // the job is declared done.
  if (absl::Status f = SendFences(); !f.ok()) std::cerr << "brook chief: " << f.message() << "\n";
  absl::Status s = [&]() -> absl::Status {
    FinalizePhase(job_id, "checkpoint");
    if (!spec->checkpoint.dir.empty() && !final_checkpoint_recorded) {
      // A chief killed while writing it left a part: the model has not
      // changed since (training is over), so it is written again whole.
      std::error_code ec;
      std::filesystem::remove_all(absl::StrCat(spec->checkpoint.dir, "/", job_id, "/final"), ec);
      RETURN_IF_ERROR(Checkpoint(job_id, *spec, steps, "final"));
    }
    FinalizePhase(job_id, "eval");
    ASSIGN_OR_RETURN(std::optional<trainer::EvalResult> eval, Evaluate(job_id, *spec, steps));
    std::vector<std::string> eval_files;
    if (eval.has_value()) {
      ASSIGN_OR_RETURN(eval_files, ExpandGlobs(*spec, /*eval=*/true));
    }
    std::string message = absl::StrCat("all ", spec->training.epochs, " epochs trained");
    if (eval.has_value()) absl::StrAppendFormat(&message, "; eval AUC %.4f", eval->auc);
    if (!spec->export_dir.empty()) {
      ExportRequest req;
      req.dir = absl::StrCat(spec->export_dir, "/", job_id);
      req.job_id = job_id;
      req.table_prefix = TablePrefix(job_id);
      req.step = steps;
      req.eval = eval;
      ASSIGN_OR_RETURN(req.train_files, ExpandGlobs(*spec, /*eval=*/false));
      req.eval_files = eval_files;
      FinalizePhase(job_id, "export");
      absl::StatusOr<ExportManifest> exported = WriteExport(ps_, *spec, req);
      // A chief killed after the manifest landed redoes finalization: the
      // export is already complete.
      if (!exported.ok() &&
          !(absl::IsAlreadyExists(exported.status()) && ReadExport(req.dir).ok())) {
        return exported.status();
      }
      std::lock_guard<std::mutex> lock(mu_);
      RETURN_IF_ERROR(queue_->SetExport(job_id, req.dir, absl::Now()));
      absl::StrAppend(&message, "; exported to ", req.dir);
    }
    FinalizePhase(job_id, "finish");
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(queue_->Finish(job_id, message, absl::Now()));
    return SaveLocked();
  }();
  // Cancelled: the chief is stopping; the next one finalizes the job again.
  if (!s.ok() && !absl::IsCancelled(s)) {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<JobInfo> info = queue_->Get(job_id);
    if (info.ok() && info->state == JobState::kRunning) {
      queue_->Fail(job_id, absl::StrCat("finalization failed: ", s.message()), absl::Now())
          .IgnoreError();
      SaveLocked().IgnoreError();
    }
  }
  return s;
}

ChiefStats Chief::Impl::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ChiefStats s;
  s.jobs = queue_->List();
  s.trainers = queue_->num_trainers();
  s.expired_trainers = expired_trainers_;
  s.save_errors = save_errors_;
  s.tables_dropped = tables_dropped_;
  s.tasks_failed = tasks_failed_;
  s.fenced_total = fenced_total_;
  s.fence_sends = fence_sends_;
  s.fence_send_errors = fence_send_errors_;
  s.ps_restarts = ps_restarts_;
  s.ps_rollbacks = ps_rollbacks_;
  s.fence_pending = fence_pending_;
  return s;
}

// ----- Chief: the API over Impl.

absl::StatusOr<std::unique_ptr<Chief>> Chief::Open(const ChiefOptions& options, ps::PsClient* ps) {
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::Open(options, ps));
  return std::unique_ptr<Chief>(new Chief(std::move(impl)));
}
Chief::Chief(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Chief::~Chief() = default;
absl::StatusOr<v1::JobStatus> Chief::SubmitJob(const v1::SubmitJobRequest& request) {
  return impl_->SubmitJob(request);
}
absl::StatusOr<v1::JobStatus> Chief::GetJob(const v1::GetJobRequest& request) {
  return impl_->GetJob(request);
}
absl::StatusOr<v1::ListJobsResponse> Chief::ListJobs() { return impl_->ListJobs(); }
absl::StatusOr<v1::JobStatus> Chief::CancelJob(const v1::CancelJobRequest& request) {
  return impl_->CancelJob(request);
}
absl::StatusOr<v1::RegisterNodeResponse> Chief::RegisterNode(
    const v1::RegisterNodeRequest& request) {
  return impl_->RegisterNode(request);
}
absl::StatusOr<v1::HeartbeatResponse> Chief::Heartbeat(const v1::HeartbeatRequest& request) {
  return impl_->Heartbeat(request);
}
absl::StatusOr<v1::AcquireWorkResponse> Chief::AcquireWork(const v1::AcquireWorkRequest& request) {
  return impl_->AcquireWork(request);
}
absl::StatusOr<v1::CompleteWorkResponse> Chief::CompleteWork(
    const v1::CompleteWorkRequest& request) {
  return impl_->CompleteWork(request);
}
absl::Status Chief::ReportMetrics(const v1::ReportMetricsRequest& request) {
  return impl_->ReportMetrics(request);
}
void Chief::Tick(absl::Time now) { impl_->Tick(now); }
void Chief::RunPendingWork() { impl_->RunPendingWork(); }
absl::Status Chief::SendFences() { return impl_->SendFences(); }
std::vector<uint64_t> Chief::FencedClients() const { return impl_->FencedClients(); }
ChiefStats Chief::Stats() const { return impl_->Stats(); }

}  // namespace brook::chief
