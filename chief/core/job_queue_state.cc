// JobQueue <-> brook.v1.ChiefJobRecord: the persisted form of one job.
#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "brook/v1/chief.pb.h"
#include "chief/core/job_queue_state.h"
#include "chief/core/work_leases_state.h"
#include "common/status_macros.h"

namespace brook::chief {

namespace {

// Unix microseconds; InfinitePast (not set) is 0.
int64_t ToUs(absl::Time t) { return t == absl::InfinitePast() ? 0 : absl::ToUnixMicros(t); }
absl::Time FromUs(int64_t us) { return us == 0 ? absl::InfinitePast() : absl::FromUnixMicros(us); }

}  // namespace

void ToProto(const JobCheckpoint& c, v1::ChiefCheckpoint* out) {
  out->set_dir(c.dir);
  out->set_step(c.step);
  out->set_time_us(ToUs(c.time));
}

void ToProto(const JobEval& e, v1::ChiefEvalResult* out) {
  out->set_done(e.done);
  out->set_step(e.step);
  out->set_examples(e.examples);
  out->set_auc(e.auc);
  out->set_logloss(e.logloss);
  out->set_accuracy(e.accuracy);
  out->set_calibration(e.calibration);
  out->set_time_us(ToUs(e.time));
}

void ToProto(const JobEvent& e, v1::ChiefJobEvent* out) {
  out->set_time_us(ToUs(e.time));
  out->set_text(e.text);
}

absl::StatusOr<v1::ChiefJobRecord> JobQueueCodec::ToRecord(const JobQueue& queue,
                                                           const std::string& job_id) {
  ASSIGN_OR_RETURN(JobQueue::Job * job, queue.FindOrNotFound(job_id));
  const JobInfo& i = job->info;
  v1::ChiefJobRecord r;
  r.set_id(i.id);
  r.set_seq(i.seq);
  r.set_name(i.name);
  r.set_priority(i.priority);
  r.set_state(static_cast<int32_t>(i.state));
  r.set_message(i.message);
  r.set_submit_time_us(ToUs(i.submit_time));
  r.set_start_time_us(ToUs(i.start_time));
  r.set_end_time_us(ToUs(i.end_time));
  r.set_spec_json(i.spec_json);
  r.set_spec_hash(i.spec_hash);
  for (const sharding::WorkUnit& u : i.units) {
    v1::ChiefWorkUnit* out = r.add_units();
    out->set_id(u.id);
    out->set_path(u.path);
    out->set_begin(u.begin);
    out->set_end(u.end);
  }
  r.set_epochs(i.epochs);
  r.set_trainers_wanted(i.trainers_wanted);
  r.set_lease_duration_ms(absl::ToInt64Milliseconds(i.lease_duration));
  for (const std::string& t : i.trainers) r.add_trainers(t);
  if (job->leases != nullptr) {
    *r.mutable_leases() = WorkLeasesCodec::ToState(*job->leases);
  }
  for (const JobCheckpoint& c : i.checkpoints) ToProto(c, r.add_checkpoints());
  v1::ChiefJobMetrics* m = r.mutable_metrics();
  m->set_reported(i.metrics.reported);
  m->set_loss(i.metrics.loss);
  m->set_auc(i.metrics.auc);
  m->set_examples(i.metrics.examples);
  m->set_time_us(ToUs(i.metrics.time));
  m->set_skipped_corrupt_regions(i.metrics.skipped_corrupt_regions);
  m->set_skipped_corrupt_bytes(i.metrics.skipped_corrupt_bytes);
  m->set_skipped_bad_examples(i.metrics.skipped_bad_examples);
  ToProto(i.eval, r.mutable_eval());
  r.set_export_dir(i.export_dir);
  r.set_tables_dropped_us(ToUs(i.tables_dropped));
  r.set_initialized_us(ToUs(i.initialized));
  for (const JobEvent& e : i.events) ToProto(e, r.add_events());
  r.set_events_dropped(i.events_dropped);
  return r;
}

absl::StatusOr<std::unique_ptr<JobQueue::Job>> JobQueueCodec::JobFromRecord(
    const v1::ChiefJobRecord& r, absl::Time now) {
  const std::string who = absl::StrCat("job '", r.id(), "' (seq ", r.seq(), "): ");
  auto corrupt = [&](const std::string& why) { return absl::DataLossError(who + why); };
  if (r.name().empty() || r.id().size() <= r.name().size() + 1 ||
      !absl::StartsWith(r.id(), r.name() + "-")) {
    return corrupt(absl::StrCat("id is not its name '", r.name(), "' and a suffix"));
  }
  if (r.state() < 0 || r.state() > static_cast<int32_t>(JobState::kCancelled)) {
    return corrupt(absl::StrCat("unknown state ", r.state()));
  }
  auto job = std::make_unique<JobQueue::Job>();
  JobInfo& i = job->info;
  i.id = r.id();
  i.seq = r.seq();
  i.name = r.name();
  i.priority = r.priority();
  i.state = static_cast<JobState>(r.state());
  i.message = r.message();
  i.submit_time = FromUs(r.submit_time_us());
  i.start_time = FromUs(r.start_time_us());
  i.end_time = FromUs(r.end_time_us());
  i.spec_json = r.spec_json();
  i.spec_hash = r.spec_hash();
  for (const v1::ChiefWorkUnit& u : r.units()) {
    i.units.push_back(
        sharding::WorkUnit{.id = u.id(), .path = u.path(), .begin = u.begin(), .end = u.end()});
  }
  // A finished job that never started may have none (UnrestorableJob).
  if (i.units.empty() && !(IsFinished(i.state) && !r.has_leases())) {
    return corrupt("no work units");
  }
  i.epochs = r.epochs();
  i.trainers_wanted = r.trainers_wanted();
  i.lease_duration = absl::Milliseconds(r.lease_duration_ms());
  if (i.trainers_wanted < 1) return corrupt("trainers wanted < 1");
  const bool started = i.state == JobState::kRunning || (IsFinished(i.state) && r.has_leases());
  if (r.has_leases() != started) {
    return corrupt(absl::StrCat(std::string(JobStateName(i.state)),
                                r.has_leases() ? " with" : " without", " a lease table"));
  }
  if (r.has_leases()) {
    auto leases = WorkLeasesCodec::FromState(r.leases(), now);
    if (!leases.ok()) return corrupt(std::string(leases.status().message()));
    // RUNNING with every epoch done is a job the chief was finalizing
    // (JobInfo::finalizing): its restart finalizes it again.
    job->leases = std::move(leases).value();
  }
  if (!r.trainers().empty() && i.state != JobState::kRunning) {
    return corrupt("trainers assigned to a job that is not running");
  }
  for (const std::string& t : r.trainers()) {
    // Also restarts the trainer's heartbeat clock (FromProto did too).
    if (!job->leases->Heartbeat(t, now).ok()) {
      return corrupt(absl::StrCat("assigned trainer '", t, "' unknown to its lease table"));
    }
    i.trainers.push_back(t);
  }
  for (const v1::ChiefCheckpoint& c : r.checkpoints()) {
    i.checkpoints.push_back(
        JobCheckpoint{.dir = c.dir(), .step = c.step(), .time = FromUs(c.time_us())});
  }
  const v1::ChiefJobMetrics& m = r.metrics();
  i.metrics = JobMetrics{.reported = m.reported(),
                         .loss = m.loss(),
                         .auc = m.auc(),
                         .examples = m.examples(),
                         .time = FromUs(m.time_us()),
                         .skipped_corrupt_regions = m.skipped_corrupt_regions(),
                         .skipped_corrupt_bytes = m.skipped_corrupt_bytes(),
                         .skipped_bad_examples = m.skipped_bad_examples()};
  const v1::ChiefEvalResult& ev = r.eval();
  i.eval = JobEval{.done = ev.done(),
                   .step = ev.step(),
                   .examples = ev.examples(),
                   .auc = ev.auc(),
                   .logloss = ev.logloss(),
                   .accuracy = ev.accuracy(),
                   .calibration = ev.calibration(),
                   .time = FromUs(ev.time_us())};
  i.export_dir = r.export_dir();
  i.tables_dropped = FromUs(r.tables_dropped_us());
  i.initialized = FromUs(r.initialized_us());
  for (const v1::ChiefJobEvent& e : r.events()) {
    i.events.push_back(JobEvent{.time = FromUs(e.time_us()), .text = e.text()});
  }
  i.events_dropped = r.events_dropped();
  return job;
}

std::unique_ptr<JobQueue::Job> JobQueueCodec::UnrestorableJob(const v1::ChiefJobRecord& r,
                                                              const std::string& why,
                                                              absl::Time now) {
  auto job = std::make_unique<JobQueue::Job>();
  JobInfo& i = job->info;
  i.seq = r.seq();
  i.id = r.id().empty() ? absl::StrCat("job-", r.seq()) : r.id();
  i.name = r.name().empty() ? i.id : r.name();
  i.priority = r.priority();
  i.state = JobState::kFailed;
  i.message = absl::StrCat("the chief could not restore this job from its state: ", why);
  i.submit_time = absl::FromUnixMicros(r.submit_time_us());
  i.end_time = now;
  i.spec_json = r.spec_json();
  i.spec_hash = r.spec_hash();
  i.epochs = r.epochs();
  i.trainers_wanted = std::max(1, r.trainers_wanted());
  for (const v1::ChiefJobEvent& e : r.events()) {
    i.events.push_back(JobEvent{.time = FromUs(e.time_us()), .text = e.text()});
  }
  i.events.push_back(JobEvent{.time = now, .text = i.message});
  return job;
}

absl::StatusOr<std::unique_ptr<JobQueue>> JobQueueCodec::Restore(
    const JobQueueOptions& options, const std::vector<v1::ChiefJobRecord>& records,
    uint64_t next_seq, absl::Time now) {
  ASSIGN_OR_RETURN(std::unique_ptr<JobQueue> queue, JobQueue::Create(options));
  queue->next_seq_ = next_seq;
  std::set<std::string> active_names;
  for (const v1::ChiefJobRecord& r : records) {
    if (r.seq() == 0 || queue->jobs_.count(r.seq()) != 0) {
      // The store keys records by seq: neither can happen short of a bug.
      return absl::DataLossError(
          absl::StrCat("job '", r.id(), "': seq ", r.seq(), r.seq() == 0 ? "" : " stored twice"));
    }
    queue->next_seq_ = std::max(queue->next_seq_, r.seq() + 1);
    absl::StatusOr<std::unique_ptr<JobQueue::Job>> restored = JobFromRecord(r, now);
    std::string clash;
    if (restored.ok()) {
      const JobInfo& i = (*restored)->info;
      if (queue->seq_of_.count(i.id) != 0) {
        clash = absl::StrCat("its id is also job seq ", queue->seq_of_.at(i.id), "'s");
      } else if (!IsFinished(i.state) && active_names.count(i.name) != 0) {
        clash = absl::StrCat("a second active job named '", i.name, "'");
      }
      for (const std::string& t : i.trainers) {
        auto it = queue->trainers_.find(t);
        if (clash.empty() && it != queue->trainers_.end()) {
          clash =
              absl::StrCat("trainer '", t, "' is also assigned to job '", it->second.job_id, "'");
        }
      }
    }
    std::unique_ptr<JobQueue::Job> job;
    if (!restored.ok() || !clash.empty()) {
      job =
          UnrestorableJob(r, restored.ok() ? clash : std::string(restored.status().message()), now);
      if (queue->seq_of_.count(job->info.id) != 0) {
        job->info.id = absl::StrCat(job->info.id, "-seq", r.seq());
      }
    } else {
      job = std::move(restored).value();
    }
    if (!IsFinished(job->info.state)) active_names.insert(job->info.name);
    for (const std::string& t : job->info.trainers) {
      queue->trainers_.emplace(t, JobQueue::PoolTrainer{.last_seen = now, .job_id = job->info.id});
    }
    queue->seq_of_[job->info.id] = job->info.seq;
    queue->jobs_[job->info.seq] = std::move(job);
  }
  return queue;
}

}  // namespace brook::chief
