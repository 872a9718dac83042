#include "chief/core/job_queue.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/hash.h"
#include "common/status_macros.h"

namespace brook::chief {

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "QUEUED";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kCancelled:
      return "CANCELLED";
  }
  return "UNKNOWN";
}

uint64_t ExamplesTrained(const JobInfo& info) {
  uint64_t examples = 0;
  if (info.progress.has_value()) {
    for (uint64_t e : info.progress->examples_per_epoch) examples += e;
  }
  return examples;
}

absl::Status JobQueueOptions::Validate() const {
  if (max_running_jobs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_running_jobs must be >= 1, got ", max_running_jobs));
  }
  if (trainer_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("trainer_timeout must be positive");
  }
  if (max_events_per_job < 1) return absl::InvalidArgumentError("max_events_per_job must be >= 1");
  return absl::OkStatus();
}

namespace {

// RFC 1123 label: what Kubernetes and DNS accept as a name part.
bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  for (char c : s) {
    if (!alnum(c) && c != '-') return false;
  }
  return alnum(s.front()) && alnum(s.back());
}

// "<name>-<suffix>": [a-z0-9-], alphanumeric at the end, at most 100.
bool IsJobIdOf(const std::string& id, const std::string& name) {
  if (id.size() > 100 || id.size() <= name.size() + 1 || !absl::StartsWith(id, name + "-")) {
    return false;
  }
  for (char c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return id.back() != '-';
}

}  // namespace

std::string NewJobId(const std::string& name, absl::Time now, uint32_t random) {
  return absl::StrCat(name, "-", absl::FormatTime("%Y%m%d-%H%M%S", now, absl::UTCTimeZone()), "-",
                      absl::Hex(random & 0xffffff, absl::kZeroPad6));
}

absl::StatusOr<std::unique_ptr<JobQueue>> JobQueue::Create(const JobQueueOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<JobQueue>(new JobQueue(options));
}

JobQueue::~JobQueue() = default;

JobQueue::Job* JobQueue::Find(const std::string& job_id) const {
  auto it = seq_of_.find(job_id);
  return it == seq_of_.end() ? nullptr : jobs_.at(it->second).get();
}

absl::StatusOr<JobQueue::Job*> JobQueue::FindOrNotFound(const std::string& job_id) const {
  Job* job = Find(job_id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  return job;
}

void JobQueue::AddEvent(Job* job, absl::Time now, std::string text) {
  std::vector<JobEvent>& events = job->info.events;
  if (events.size() >= options_.max_events_per_job) {
    const size_t drop = events.size() - options_.max_events_per_job + 1;
    events.erase(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(drop));
    job->info.events_dropped += drop;
  }
  events.push_back(JobEvent{.time = now, .text = std::move(text)});
  ++job->version;
}

absl::StatusOr<std::string> JobQueue::Submit(const JobSubmission& sub, absl::Time now) {
  if (!IsDnsLabel(sub.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: '", sub.name,
                     "' is not a DNS label (1-63 of [a-z0-9-], starting and ending alphanumeric)"));
  }
  if (sub.trainers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("trainers: must be >= 1, got ", sub.trainers));
  }
  if (sub.units.empty()) return absl::InvalidArgumentError("units: the job has no work units");
  const WorkLeasesOptions lease_options{.epochs = sub.epochs, .lease_duration = sub.lease_duration};
  RETURN_IF_ERROR(lease_options.Validate());  // names epochs / lease_duration
  if (auto leases = WorkLeases::Create(sub.units, lease_options); !leases.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("units: ", leases.status().message()));
  }
  if (!sub.id.empty() && !IsJobIdOf(sub.id, sub.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("id: '", sub.id, "' is not '", sub.name, "-' and a suffix of [a-z0-9-]"));
  }
  if (!sub.id.empty() && seq_of_.count(sub.id) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("id: job '", sub.id, "' exists"));
  }
  for (const auto& [seq, job] : jobs_) {
    if (job->info.name == sub.name && !IsFinished(job->info.state)) {
      return absl::AlreadyExistsError(absl::StrCat("name: job '", job->info.id, "' named '",
                                                   sub.name, "' is ",
                                                   std::string(JobStateName(job->info.state))));
    }
  }
  auto job = std::make_unique<Job>();
  JobInfo& info = job->info;
  info.seq = next_seq_++;
  info.id = sub.id.empty() ? absl::StrCat(sub.name, "-", info.seq) : sub.id;
  info.name = sub.name;
  info.priority = sub.priority;
  info.submit_time = now;
  info.spec_json = sub.spec_json;
  info.spec_hash = sub.spec_hash;
  info.units = sub.units;
  info.epochs = sub.epochs;
  info.trainers_wanted = sub.trainers;
  info.lease_duration = sub.lease_duration;
  AddEvent(job.get(), now,
           absl::StrCat("submitted (priority ", sub.priority, ", ", sub.units.size(),
                        " work units, ", sub.epochs, " epochs, ", sub.trainers, " trainers)"));
  std::string id = info.id;
  seq_of_[id] = info.seq;
  jobs_[info.seq] = std::move(job);
  return id;
}

JobInfo JobQueue::Snapshot(const Job& job) const {
  JobInfo info = job.info;
  if (job.leases != nullptr) {
    info.progress = job.leases->Stats();
    info.finalizing = info.state == JobState::kRunning && job.leases->finished();
  }
  return info;
}

absl::StatusOr<JobInfo> JobQueue::Get(const std::string& job_id) const {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  return Snapshot(*job);
}

std::vector<JobQueue::Job*> JobQueue::Ordered() const {
  std::vector<Job*> out;
  for (const auto& [seq, job] : jobs_) out.push_back(job.get());
  auto key = [](const Job* j) {
    const JobInfo& i = j->info;
    const int group = i.state == JobState::kRunning ? 0 : i.state == JobState::kQueued ? 1 : 2;
    if (group == 2) {  // latest end first
      return std::make_tuple(group, 0, -absl::ToUnixMicros(i.end_time),
                             -static_cast<int64_t>(i.seq));
    }
    return std::make_tuple(group, -i.priority, absl::ToUnixMicros(i.submit_time),
                           static_cast<int64_t>(i.seq));
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const Job* a, const Job* b) { return key(a) < key(b); });
  return out;
}

std::vector<JobInfo> JobQueue::List() const {
  std::vector<JobInfo> out;
  for (const Job* job : Ordered()) out.push_back(Snapshot(*job));
  return out;
}

void JobQueue::Unassign(Job* job, const std::string& trainer_id) {
  std::vector<std::string>& t = job->info.trainers;
  t.erase(std::remove(t.begin(), t.end(), trainer_id), t.end());
  if (job->leases != nullptr) {
    // NOT_FOUND: the leases expired it already; its units are back either way.
    job->leases->Release(trainer_id).IgnoreError();
  }
  auto it = trainers_.find(trainer_id);
  if (it != trainers_.end()) it->second.job_id.clear();
  ++job->version;
}

void JobQueue::Release(Job* job, absl::Time now) {
  FreeTrainers(job, now);
  AddEvent(job, now,
           absl::StrCat("all ", job->info.epochs, " epochs trained; trainers freed, finalizing"));
}

void JobQueue::FreeTrainers(Job* job, absl::Time now) {
  for (const std::string& t : job->info.trainers) {
    auto it = trainers_.find(t);
    if (it != trainers_.end()) {
      it->second.job_id.clear();
      it->second.last_seen = std::max(it->second.last_seen, now);  // idle clock starts now
    }
  }
  job->info.trainers.clear();
}

void JobQueue::End(Job* job, JobState state, const std::string& message, absl::Time now) {
  FreeTrainers(job, now);
  job->info.state = state;
  job->info.message = message;
  job->info.end_time = now;
  AddEvent(job, now,
           absl::StrCat(std::string(JobStateName(state)), message.empty() ? "" : ": ", message));
}

absl::Status JobQueue::Cancel(const std::string& job_id, const std::string& reason,
                              absl::Time now) {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  if (IsFinished(job->info.state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", job_id, "' already ", std::string(JobStateName(job->info.state))));
  }
  End(job, JobState::kCancelled, reason.empty() ? "cancelled" : reason, now);
  return absl::OkStatus();
}

absl::Status JobQueue::Finish(const std::string& job_id, const std::string& message,
                              absl::Time now) {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  if (job->info.state != JobState::kRunning) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", job_id, "' is ", std::string(JobStateName(job->info.state)), ", not RUNNING"));
  }
  End(job, JobState::kSucceeded, message, now);
  return absl::OkStatus();
}

absl::Status JobQueue::Fail(const std::string& job_id, const std::string& message, absl::Time now) {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  if (job->info.state != JobState::kRunning) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", job_id, "' is ", std::string(JobStateName(job->info.state)), ", not RUNNING"));
  }
  End(job, JobState::kFailed, message, now);
  return absl::OkStatus();
}

absl::Status JobQueue::Start(Job* job, absl::Time now) {
  auto leases = WorkLeases::Create(
      job->info.units, {.epochs = job->info.epochs, .lease_duration = job->info.lease_duration});
  if (!leases.ok()) return leases.status();
  job->leases = std::move(leases).value();
  job->info.state = JobState::kRunning;
  job->info.start_time = now;
  AddEvent(job, now, absl::StrCat("started; tables under '", TablePrefix(job->info.id), "'"));
  return absl::OkStatus();
}

std::vector<std::string> JobQueue::Schedule(absl::Time now) {
  std::vector<std::string> started;
  std::vector<Job*> order = Ordered();
  int running = 0;
  for (Job* job : order) running += job->info.state == JobState::kRunning ? 1 : 0;
  for (Job* job : order) {
    if (running >= options_.max_running_jobs) break;
    if (job->info.state != JobState::kQueued) continue;
    if (absl::Status s = Start(job, now); !s.ok()) {
      // Submit validated the same inputs, so this is a restored record gone bad.
      End(job, JobState::kFailed, absl::StrCat("could not start: ", s.message()), now);
      continue;
    }
    started.push_back(job->info.id);
    ++running;
  }
  // Idle trainers, lowest id first, to running jobs in schedule order.
  auto idle = trainers_.begin();
  for (Job* job : Ordered()) {
    if (job->info.state != JobState::kRunning || job->leases->finished()) continue;
    while (static_cast<int>(job->info.trainers.size()) < job->info.trainers_wanted) {
      while (idle != trainers_.end() && !idle->second.job_id.empty()) ++idle;
      if (idle == trainers_.end()) return started;
      idle->second.job_id = job->info.id;
      // Cannot fail: the id is non-empty.
      job->leases->RegisterTrainer(idle->first, now).IgnoreError();
      job->info.trainers.push_back(idle->first);
      AddEvent(job, now, absl::StrCat("trainer '", idle->first, "' assigned"));
    }
  }
  return started;
}

absl::Status JobQueue::RegisterTrainer(const std::string& trainer_id, absl::Time now) {
  if (trainer_id.empty()) return absl::InvalidArgumentError("empty trainer id");
  auto it = trainers_.find(trainer_id);
  if (it != trainers_.end() && !it->second.job_id.empty()) {
    Job* job = Find(it->second.job_id);
    if (job != nullptr) {
      AddEvent(job, now, absl::StrCat("trainer '", trainer_id, "' restarted; its units go back"));
      Unassign(job, trainer_id);
    }
  }
  trainers_[trainer_id] = PoolTrainer{.last_seen = now, .job_id = {}};
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> JobQueue::AssignTrainer(const std::string& trainer_id,
                                                                   absl::Time now) {
  auto it = trainers_.find(trainer_id);
  if (it == trainers_.end()) {
    RETURN_IF_ERROR(RegisterTrainer(trainer_id, now));
    it = trainers_.find(trainer_id);
  }
  it->second.last_seen = std::max(it->second.last_seen, now);
  if (it->second.job_id.empty()) Schedule(now);
  if (it->second.job_id.empty()) return std::optional<std::string>();
  return std::optional<std::string>(it->second.job_id);
}

std::optional<std::string> JobQueue::JobOfTrainer(const std::string& trainer_id) const {
  auto it = trainers_.find(trainer_id);
  if (it == trainers_.end() || it->second.job_id.empty()) return std::nullopt;
  return it->second.job_id;
}

absl::StatusOr<JobQueue::Job*> JobQueue::JobOf(const std::string& trainer_id,
                                               const std::string* job_id, absl::Time now) {
  auto it = trainers_.find(trainer_id);
  if (it == trainers_.end()) {
    return absl::NotFoundError(
        absl::StrCat("trainer '", trainer_id, "' is not registered (or expired): register again"));
  }
  it->second.last_seen = std::max(it->second.last_seen, now);
  const std::string& serving = it->second.job_id;
  if (serving.empty() || (job_id != nullptr && *job_id != serving)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "trainer '", trainer_id, "' serves ", serving.empty() ? "no job" : "job '" + serving + "'",
        job_id != nullptr ? absl::StrCat(", not job '", *job_id, "'") : std::string(),
        ": ask for an assignment"));
  }
  Job* job = Find(serving);
  if (job == nullptr || job->leases == nullptr) {
    return absl::InternalError(absl::StrCat("trainer '", trainer_id, "' assigned to job '", serving,
                                            "' which is not running"));
  }
  return job;
}

absl::StatusOr<std::optional<JobLease>> JobQueue::Acquire(const std::string& trainer_id,
                                                          absl::Time now) {
  ASSIGN_OR_RETURN(Job * job, JobOf(trainer_id, nullptr, now));
  ASSIGN_OR_RETURN(std::optional<Lease> lease, job->leases->Acquire(trainer_id, now));
  if (!lease.has_value()) return std::optional<JobLease>();
  ++job->version;
  return std::optional<JobLease>(JobLease{.job_id = job->info.id, .lease = *std::move(lease)});
}

absl::Status JobQueue::Commit(const std::string& trainer_id, const std::string& job_id,
                              uint32_t unit_id, uint64_t lease_epoch, uint64_t committed_offset,
                              uint64_t examples, absl::Time now, std::optional<uint64_t> steps) {
  ASSIGN_OR_RETURN(Job * job, JobOf(trainer_id, &job_id, now));
  RETURN_IF_ERROR(job->leases->Commit(trainer_id, unit_id, lease_epoch, committed_offset, examples,
                                      now, steps));
  ++job->version;
  return absl::OkStatus();
}

absl::Status JobQueue::Complete(const std::string& trainer_id, const std::string& job_id,
                                uint32_t unit_id, uint64_t lease_epoch, uint64_t end_offset,
                                uint64_t examples, absl::Time now, std::optional<uint64_t> steps) {
  ASSIGN_OR_RETURN(Job * job, JobOf(trainer_id, &job_id, now));
  RETURN_IF_ERROR(
      job->leases->Complete(trainer_id, unit_id, lease_epoch, end_offset, examples, now, steps));
  ++job->version;
  if (job->leases->finished()) Release(job, now);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> JobQueue::StepBase(const std::string& job_id, uint32_t unit_id) const {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  if (job->leases == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' has not started"));
  }
  return job->leases->StepBase(unit_id);
}

absl::Status JobQueue::Heartbeat(const std::string& trainer_id, absl::Time now) {
  auto it = trainers_.find(trainer_id);
  if (it == trainers_.end()) {
    return absl::NotFoundError(
        absl::StrCat("trainer '", trainer_id, "' is not registered (or expired): register again"));
  }
  it->second.last_seen = std::max(it->second.last_seen, now);
  if (it->second.job_id.empty()) return absl::OkStatus();
  Job* job = Find(it->second.job_id);
  if (job == nullptr || job->leases == nullptr) return absl::OkStatus();
  return job->leases->Heartbeat(trainer_id, now);
}

std::vector<std::string> JobQueue::Expire(absl::Time now) {
  std::vector<std::string> expired;
  for (const auto& [seq, job] : jobs_) {
    // A finalizing job freed its trainers: their silence is not its loss.
    if (job->info.state != JobState::kRunning || job->leases->finished()) continue;
    for (const std::string& t : job->leases->Expire(now)) {
      AddEvent(job.get(), now, absl::StrCat("trainer '", t, "' expired; its units go back"));
      Unassign(job.get(), t);
      trainers_.erase(t);
      expired.push_back(t);
    }
  }
  for (auto it = trainers_.begin(); it != trainers_.end();) {
    if (it->second.job_id.empty() && now - it->second.last_seen > options_.trainer_timeout) {
      expired.push_back(it->first);
      it = trainers_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

absl::Status JobQueue::AddCheckpoint(const std::string& job_id, const std::string& dir,
                                     int64_t step, absl::Time now) {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  if (job->leases == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' never started"));
  }
  job->info.checkpoints.push_back(JobCheckpoint{.dir = dir, .step = step, .time = now});
  AddEvent(job, now, absl::StrCat("checkpoint at step ", step, ": ", dir));
  return absl::OkStatus();
}

absl::Status JobQueue::ReportMetrics(const std::string& job_id, double loss, double auc,
                                     uint64_t examples, absl::Time now) {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  if (job->leases == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' never started"));
  }
  JobMetrics& m = job->info.metrics;  // the skipped counters stay
  m.reported = true;
  m.loss = loss;
  m.auc = auc;
  m.examples = examples;
  m.time = now;
  ++job->version;
  return absl::OkStatus();
}

absl::Status JobQueue::SetEval(const std::string& job_id, const JobEval& eval, absl::Time now) {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  if (job->leases == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' never started"));
  }
  job->info.eval = eval;
  AddEvent(job, now,
           absl::StrFormat("eval at step %d: %d examples, AUC %.4f, logloss %.4f", eval.step,
                           eval.examples, eval.auc, eval.logloss));
  return absl::OkStatus();
}

absl::Status JobQueue::SetExport(const std::string& job_id, const std::string& dir,
                                 absl::Time now) {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  if (job->leases == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' never started"));
  }
  job->info.export_dir = dir;
  AddEvent(job, now, absl::StrCat("exported to ", dir));
  return absl::OkStatus();
}

absl::Status JobQueue::SetTablesDropped(const std::string& job_id, const std::string& what,
                                        absl::Time now) {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  if (!IsFinished(job->info.state)) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' has not ended"));
  }
  job->info.tables_dropped = now;
  AddEvent(job, now, what);
  return absl::OkStatus();
}

absl::Status JobQueue::SetInitialized(const std::string& job_id, const std::string& what,
                                      absl::Time now) {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  if (job->info.state != JobState::kRunning) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' is not running"));
  }
  job->info.initialized = now;
  AddEvent(job, now, what);
  return absl::OkStatus();
}

absl::Status JobQueue::LogEvent(const std::string& job_id, const std::string& text,
                                absl::Time now) {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  AddEvent(job, now, text);
  return absl::OkStatus();
}

absl::Status JobQueue::AddSkipped(const std::string& job_id, uint64_t corrupt_regions,
                                  uint64_t corrupt_bytes, uint64_t bad_examples,
                                  const std::string& what, absl::Time now) {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  JobMetrics& m = job->info.metrics;
  m.skipped_corrupt_regions += corrupt_regions;
  m.skipped_corrupt_bytes += corrupt_bytes;
  m.skipped_bad_examples += bad_examples;
  AddEvent(job, now, what);
  return absl::OkStatus();
}

std::vector<std::string> JobQueue::JobIds() const {
  std::vector<std::string> ids;
  for (const auto& [seq, job] : jobs_) ids.push_back(job->info.id);
  return ids;
}

absl::StatusOr<uint64_t> JobQueue::Version(const std::string& job_id) const {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  return job->version;
}

absl::StatusOr<uint64_t> JobQueue::Seq(const std::string& job_id) const {
  ASSIGN_OR_RETURN(Job * job, FindOrNotFound(job_id));
  return job->info.seq;
}

uint64_t PushStreamOf(const JobInfo& job, uint32_t unit_id, int64_t data_epoch) {
  const uint64_t job_salt =
      Mix64(Hash64(job.id), static_cast<uint64_t>(absl::ToUnixMicros(job.submit_time)));
  const uint64_t stream =
      Mix64(job_salt, (static_cast<uint64_t>(data_epoch) << 32) | uint64_t{unit_id});
  return stream != 0 ? stream : 1;
}

}  // namespace brook::chief
