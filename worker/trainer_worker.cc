#include "worker/trainer_worker.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "brook/v1/chief.pb.h"
#include "chief/client/chief_client.h"
#include "chief/job/job_spec.h"
#include "common/endpoint_error.h"
#include "common/random_id.h"
#include "common/status_macros.h"
#include "ps/client/grpc_ps_client.h"
#include "ps/client/prefixed_ps_client.h"
#include "storage/tfrecord.h"
#include "trainer/backend/backend_loader.h"
#include "trainer/input/pipeline.h"
#include "trainer/input/progress.h"
#include "trainer/trainer.h"

namespace brook::worker {

using chief::ChiefClient;
using chief::ChiefClientOptions;
using chief::JobSpec;
using chief::kOnCorruptHint;

namespace {

// Calls the chief until it answers with anything but "unreachable": a chief
// restarting (kill -9, rollout) is waited out, not treated as an error.
template <typename Fn>
auto RetryUnavailable(const std::atomic<bool>& stopping, Fn fn) -> decltype(fn()) {
  absl::Duration backoff = absl::Milliseconds(100);
  for (bool logged = false;; logged = true) {
    auto r = fn();
    const absl::StatusCode code = r.status().code();
    if ((code != absl::StatusCode::kUnavailable && code != absl::StatusCode::kDeadlineExceeded) ||
        IsWrongEndpoint(r.status()) || stopping.load()) {
      return r;  // a marked one is no chief at all (TLS mismatch, HTTP/1): no wait helps
    }
    // Once per wait, with the cause ("connection refused", ...).
    if (!logged) std::cerr << "brook trainer: " << r.status().message() << "; retrying\n";
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

// A fresh PS client id per registration: the chief fences the previous one
// when the lease it went with expired.
uint64_t NewPsClientId() { return RandomNonZeroId(); }

std::string DefaultNodeId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat("trainer-", host, "-", getpid());
}

}  // namespace

// The job being trained: its spec, its namespace on the PS, its Trainer.
struct TrainerWorker::Job {
  std::string id;
  JobSpec spec;
  std::unique_ptr<ps::PrefixedPsClient> ps;
  std::unique_ptr<trainer::Backend> backend;
  std::unique_ptr<trainer::Trainer> trainer;
};

TrainerWorker::TrainerWorker(const TrainerWorkerOptions& options)
    : options_(options), node_id_(options.node_id.empty() ? DefaultNodeId() : options.node_id) {}

TrainerWorker::~TrainerWorker() = default;

absl::StatusOr<std::unique_ptr<TrainerWorker>> TrainerWorker::Create(
    const TrainerWorkerOptions& options) {
  if (options.chief.empty()) return absl::InvalidArgumentError("the chief's address is required");
  std::unique_ptr<TrainerWorker> w(new TrainerWorker(options));
  ChiefClientOptions co;
  co.deadline = absl::Seconds(10);
  co.tls = options.tls;
  co.bearer_token = options.chief_token;
  ASSIGN_OR_RETURN(w->chief_, ChiefClient::Connect(options.chief, co));
  return w;
}

void TrainerWorker::Stop() {
  stopping_.store(true);
  std::lock_guard<std::mutex> lock(mu_);
  if (active_ != nullptr) active_->Stop();
  if (ps_ != nullptr) ps_->Cancel();
}

bool TrainerWorker::Sleep(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (!stopping_.load()) {
    const absl::Duration left = end - absl::Now();
    if (left <= absl::ZeroDuration()) return true;
    absl::SleepFor(std::min(left, absl::Milliseconds(50)));
  }
  return false;
}

TrainerWorkerStats TrainerWorker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  TrainerWorkerStats s = stats_;
  if (job_ != nullptr && job_->trainer != nullptr) s.trainer = job_->trainer->stats();
  return s;
}

namespace {

// This process's log (proto NodeLog): the regular files fd 2 and fd 1 are.
v1::NodeLog OwnLog() {
  v1::NodeLog log;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) log.set_host(host);
  for (int fd : {2, 1}) {
    std::error_code ec;
    const std::filesystem::path link = absl::StrCat("/proc/self/fd/", fd);
    const std::filesystem::path target = std::filesystem::read_symlink(link, ec);
    if (ec || !std::filesystem::is_regular_file(link, ec)) continue;
    if (log.paths_size() > 0 && log.paths(0) == target.string()) continue;
    log.add_paths(target.string());
  }
  return log;
}

}  // namespace

absl::Status TrainerWorker::Register() {
  v1::RegisterNodeRequest req;
  req.set_role(v1::NODE_ROLE_TRAINER);
  req.set_node_id(node_id_);
  req.set_address(options_.address);
  *req.mutable_log() = OwnLog();
  // Every registration pushes under a new client id: if this process was
  // paused past its lease, the chief has fenced the old one on every PS.
  const uint64_t ps_client_id = NewPsClientId();
  req.set_ps_client_id(ps_client_id);
  ASSIGN_OR_RETURN(v1::RegisterNodeResponse resp,
                   RetryUnavailable(stopping_, [&] { return chief_->RegisterNode(req); }));
  {
    // No job holds the old client any more (Run dropped job_ first).
    ps::GrpcPsClientOptions po;
    po.client_id = ps_client_id;
    po.addresses = options_.ps_addresses;
    po.tls = options_.tls;
    po.token = options_.ps_token;
    po.on_retry = [](const ps::PsRetryEpisode& e) {
      std::cerr << "brook trainer: " << e.error << "; retrying (training.retry_seconds)\n";
    };
    if (po.addresses.empty())
      po.addresses.assign(resp.ps_addresses().begin(), resp.ps_addresses().end());
    if (po.addresses.empty()) {
      return absl::FailedPreconditionError("the chief knows no PS nodes and none were given");
    }
    ASSIGN_OR_RETURN(auto grpc, ps::GrpcPsClient::Create(po));
    // Not waiting for the PS nodes here: every call retries a PS that is
    // not up yet for the job's retry window (JobFor), after which the job
    // fails naming it; a trainer that waited here would leave the job
    // RUNNING with nothing to say.
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_.load()) grpc->Cancel();
    ps_ = std::move(grpc);
    ps_client_id_ = ps_client_id;
  }
  must_register_.store(false);
  std::cerr << "brook trainer " << node_id_ << ": registered with the chief at " << options_.chief
            << "\n";
  return absl::OkStatus();
}

void TrainerWorker::HeartbeatLoop() {
  const absl::Duration interval = std::max(options_.commit_interval, absl::Milliseconds(500));
  while (Sleep(interval)) {
    v1::HeartbeatRequest req;
    req.set_node_id(node_id_);
    *req.mutable_log() = OwnLog();
    {
      std::lock_guard<std::mutex> lock(mu_);
      req.set_ps_client_id(ps_client_id_);
    }
    absl::StatusOr<v1::HeartbeatResponse> resp = chief_->Heartbeat(req);
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::IsNotFound(resp.status())) {
      // Expired (paused too long) or a chief that lost us: our leases are
      // someone else's now. Stop, and register again.
      must_register_.store(true);
      if (active_ != nullptr) active_->Stop();
    } else if (resp.ok()) {
      serving_job_ = resp->job_id();
      if (active_ != nullptr && serving_job_ != stats_.job_id) active_->Stop();
    }
  }
}

absl::StatusOr<TrainerWorker::Job*> TrainerWorker::JobFor(const std::string& job_id,
                                                          const std::string& spec_json,
                                                          const std::string& table_prefix) {
  if (job_ != nullptr && job_->id == job_id) return job_.get();
  auto job = std::make_unique<Job>();
  job->id = job_id;
  ASSIGN_OR_RETURN(job->spec, JobSpec::FromYaml(spec_json, ""));
  // The client serves one job at a time: its calls ride out PS faults for
  // this job's window.
  ps_->SetRetryWindow(absl::Seconds(job->spec.training.retry_seconds));
  job->ps = std::make_unique<ps::PrefixedPsClient>(ps_.get(), table_prefix);
  trainer::CpuBackendOptions cpu;
  cpu.num_threads = options_.cpu_threads;
  ASSIGN_OR_RETURN(job->backend, trainer::CreateBackend(options_.device, cpu));
  ASSIGN_OR_RETURN(job->trainer,
                   trainer::Trainer::Create(job->ps.get(), job->spec.model, job->spec.features,
                                            job->spec.ToTrainerOptions(), job->backend.get()));
  RETURN_IF_ERROR(job->trainer->Setup());
  std::lock_guard<std::mutex> lock(mu_);
  job_ = std::move(job);
  stats_.job_id = job_id;
  std::cerr << "brook trainer " << node_id_ << ": training job " << job_id << "\n";
  return job_.get();
}

void TrainerWorker::ReportMetrics(const Job& job) {
  const trainer::TrainerStats ts = job.trainer->stats();
  v1::ReportMetricsRequest m;
  m.set_node_id(node_id_);
  m.set_job_id(job.id);
  m.set_loss(ts.last_loss);
  m.set_train_auc(ts.train_auc);
  m.set_steps(ts.steps);
  m.set_warning(RetryWarning(job));
  chief_->ReportMetrics(m).IgnoreError();
}

std::string TrainerWorker::RetryWarning(const Job& job) const {
  std::optional<ps::GrpcPsClient::RetryEpisode> e = ps_->retrying();
  // A blip that one quick retry covers is not worth an event.
  if (!e.has_value() || absl::Now() - e->since < absl::Seconds(1)) return "";
  return absl::StrCat("PS shard ", e->shard, " (", e->address, ") ",
                      e->out_of_space ? "out of space: retrying pushes"
                      : e->silent     ? "not answering: waiting on its calls"
                                      : "unreachable: retrying its calls",
                      " for up to ", job.spec.training.retry_seconds,
                      " s (training.retry_seconds): ", e->error);
}

absl::Status TrainerWorker::Commit(const v1::AcquireWorkResponse& lease, uint64_t offset,
                                   uint64_t examples, bool done, std::optional<uint64_t> steps,
                                   std::atomic<int64_t>* job_step_base,
                                   const SkippedData& skipped) {
  v1::CompleteWorkRequest req;
  req.set_node_id(node_id_);
  req.set_job_id(lease.job_id());
  req.set_unit_id(lease.unit().id());
  req.set_lease_epoch(lease.lease_epoch());
  req.set_offset(offset);
  req.set_examples(examples);
  req.set_done(done);
  if (steps.has_value()) req.set_steps(*steps);
  req.set_skipped_corrupt_regions(skipped.corrupt_regions);
  req.set_skipped_corrupt_bytes(skipped.corrupt_bytes);
  req.set_skipped_bad_examples(skipped.bad_examples);
  absl::StatusOr<v1::CompleteWorkResponse> resp =
      RetryUnavailable(stopping_, [&] { return chief_->CompleteWork(req); });
  // Other trainers' commits move the job's step on (AcquireWorkResponse).
  if (resp.ok() && job_step_base != nullptr) job_step_base->store(resp->job_step_base());
  return resp.status();
}

absl::Status TrainerWorker::TrainUnit(Job* job, const v1::AcquireWorkResponse& lease) {
  const JobSpec& spec = job->spec;
  // Exactly-once steps (docs/architecture.md "Exactly once per epoch", docs/reliability.md):
  // every holder of this unit in this data epoch pushes its steps under one
  // PS stream, numbered from the unit's start, so a step an earlier holder
  // pushed but did not commit (it died) is applied once. That needs the
  // same steps: without shuffling the records after resume_offset batch the
  // same way whoever reads them; with shuffling the holder reads from the
  // unit's start and skips the committed steps (the shuffle order is a
  // function of the seed and the records read).
  const bool shuffled = spec.training.shuffle_buffer > 0;
  // Without a known resume step (state from an older chief) the holder
  // pushes under its own client's sequences: at-least-once, as before.
  const bool in_stream = lease.has_resume_step() && lease.push_stream() != 0;
  const uint64_t resume_step = in_stream ? lease.resume_step() : 0;
  trainer::TrainStream stream;
  if (in_stream) {
    stream.id = lease.push_stream();
    stream.first_step = resume_step;
  }
  // The job's step of this unit's step 0 (docs/reliability.md "Steps").
  std::atomic<int64_t> job_step_base{lease.job_step_base()};
  stream.job_step_base = &job_step_base;
  const uint64_t read_from = shuffled && in_stream ? lease.unit().begin() : lease.resume_offset();
  sharding::WorkUnit unit{.id = lease.unit().id(),
                          .path = lease.unit().path(),
                          .begin = read_from,
                          .end = lease.unit().end()};
  input::PipelineOptions o;
  o.units = {unit};
  o.compression = spec.data.compression;
  o.batch_size = spec.training.batch_size;
  o.parse_threads = options_.parse_threads;
  o.shuffle_buffer = static_cast<size_t>(spec.training.shuffle_buffer);
  // Reproducible per (job seed, data epoch, unit), different every epoch.
  o.seed =
      spec.training.seed * 1000003u + static_cast<uint64_t>(lease.data_epoch()) * 7919u + unit.id;
  o.epochs = 1;
  o.skip_corrupt_records = spec.data.skip_corrupt;
  o.skip_bad_examples = spec.data.skip_corrupt;
  ASSIGN_OR_RETURN(auto pipeline, input::Pipeline::Create(spec.features, o));
  // What the reader skipped that no accepted commit has reported yet.
  SkippedData skip_reported;
  auto skipped_since = [&] {
    const input::PipelineStats p = pipeline->stats();
    return SkippedData{.corrupt_regions = p.corrupt_regions - skip_reported.corrupt_regions,
                       .corrupt_bytes = p.corrupt_bytes - skip_reported.corrupt_bytes,
                       .bad_examples = p.bad_examples - skip_reported.bad_examples};
  };
  auto skip_accepted = [&](const SkippedData& d) {
    skip_reported.corrupt_regions += d.corrupt_regions;
    skip_reported.corrupt_bytes += d.corrupt_bytes;
    skip_reported.bad_examples += d.bad_examples;
  };
  input::UnitProgress progress(pipeline->units(), 0);
  if (in_stream && !shuffled) progress.AddSteps(resume_step);
  if (in_stream && shuffled && resume_step > 0) {
    // Skip the committed steps: the same batches as their holders formed.
    RETURN_IF_ERROR(trainer::SkipSteps(pipeline.get(), &progress, resume_step,
                                       spec.training.accumulation_steps));
  }

  // Commits on a timer while the unit trains.
  uint64_t reported = lease.resume_offset();
  absl::Status lease_status;
  std::mutex commit_mu;
  std::condition_variable commit_cv;
  bool training = true;
  std::thread committer([&] {
    std::unique_lock<std::mutex> lock(commit_mu);
    absl::Time next_metrics = absl::Now() + options_.metrics_interval;
    while (training) {
      commit_cv.wait_for(lock, absl::ToChronoMilliseconds(options_.commit_interval));
      if (!training) break;
      const auto [committed, steps] = progress.CommittedSteps(unit.id);
      if (committed > reported && lease_status.ok()) {
        const SkippedData skipped = skipped_since();
        absl::Status s = Commit(lease, committed, committed - reported, false,
                                stream.id != 0 ? std::optional<uint64_t>(steps) : std::nullopt,
                                &job_step_base, skipped);
        if (s.ok()) {
          skip_accepted(skipped);
          std::lock_guard<std::mutex> l(mu_);
          stats_.examples += committed - reported;
          reported = committed;
        } else if (!absl::IsUnavailable(s) && !absl::IsDeadlineExceeded(s)) {
          // The lease is gone (re-leased after we were presumed dead, or the
          // job ended): stop; what we trained past `reported` is someone
          // else's to redo, and the PS's dedup drops our duplicate pushes.
          lease_status = s;
          job->trainer->Stop();
        }
      }
      if (absl::Now() >= next_metrics) {
        next_metrics = absl::Now() + options_.metrics_interval;
        ReportMetrics(*job);  // best effort: the next one replaces it
      }
    }
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = job->trainer.get();
    if (stopping_.load() || must_register_.load() || serving_job_ != job->id) job->trainer->Stop();
  }
  absl::Status trained = job->trainer->Train(pipeline.get(), &progress, stream);
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(commit_mu);
    training = false;
  }
  commit_cv.notify_all();
  committer.join();
  if (absl::IsCancelled(trained) && stopping_.load()) {
    // Stop() cancelled a PS call: stopped, not failed.
    job->trainer->Stop();
    trained = absl::OkStatus();
  }
  if (!trained.ok() && !spec.data.skip_corrupt && absl::StrContains(trained.message(), unit.path)) {
    // The data's fault (the pipeline's errors name the file), not the PS's.
    return absl::Status(trained.code(), absl::StrCat(trained.message(), " (", kOnCorruptHint, ")"));
  }
  if (!trained.ok()) return trained;
  if (!lease_status.ok()) {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.units_dropped;
    return absl::OkStatus();
  }

  const auto [committed, steps] = progress.CommittedSteps(unit.id);
  if (job->trainer->stopped()) {
    // Stopped mid-unit: commit what the PS acknowledged, leave the rest to
    // whoever gets the unit next.
    if (committed > reported) {
      Commit(lease, committed, committed - reported, false,
             stream.id != 0 ? std::optional<uint64_t>(steps) : std::nullopt, nullptr,
             skipped_since())
          .IgnoreError();
    }
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.units_dropped;
    return absl::OkStatus();
  }
  uint64_t end = 0;
  for (const input::UnitOffset& u : progress.Offsets()) {
    if (u.unit_id == unit.id && u.complete) end = u.end;
  }
  if (end == 0) {
    // Nothing left to read from resume_offset (the pipeline saw no record
    // and so no end): the file's record count is the end.
    if (unit.end != 0) {
      end = unit.end;
    } else {
      ASSIGN_OR_RETURN(
          end, storage::CountTFRecords(unit.path, spec.data.compression.value_or(
                                                      storage::CompressionFromPath(unit.path))));
    }
  }
  ReportMetrics(*job);  // the job's last metrics before the unit that may end it
  absl::Status done = Commit(lease, end, end - reported, true,
                             stream.id != 0 ? std::optional<uint64_t>(steps) : std::nullopt,
                             nullptr, skipped_since());
  std::lock_guard<std::mutex> l(mu_);
  if (done.ok()) {
    stats_.examples += end - reported;
    ++stats_.units_completed;
  } else {
    ++stats_.units_dropped;
    std::cerr << "brook trainer " << node_id_ << ": unit " << unit.id
              << " not completed: " << done.message() << "\n";
  }
  return absl::OkStatus();
}

absl::Status TrainerWorker::Run() {
  RETURN_IF_ERROR(Register());
  std::thread heartbeat([this] { HeartbeatLoop(); });
  absl::Status result;
  while (!stopping_.load()) {
    if (must_register_.load()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        job_.reset();
      }
      if (absl::Status s = Register(); !s.ok()) {
        if (!stopping_.load()) result = s;
        break;
      }
    }
    v1::AcquireWorkRequest req;
    req.set_node_id(node_id_);
    absl::StatusOr<v1::AcquireWorkResponse> work =
        RetryUnavailable(stopping_, [&] { return chief_->AcquireWork(req); });
    if (stopping_.load()) break;
    if (absl::IsNotFound(work.status())) {
      must_register_.store(true);
      continue;
    }
    if (!work.ok()) {
      std::cerr << "brook trainer " << node_id_ << ": " << work.status().message() << "\n";
      Sleep(absl::Seconds(1));
      continue;
    }
    if (work->job_id().empty()) {
      Sleep(absl::Milliseconds(std::max<int64_t>(work->retry_after_ms(), 50)));
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      serving_job_ = work->job_id();
    }
    absl::StatusOr<Job*> job = JobFor(work->job_id(), work->spec_json(), work->table_prefix());
    absl::Status s = job.ok() ? TrainUnit(*job, *work) : job.status();
    if (s.ok() && job_ != nullptr && job_->trainer->stopped()) {
      // Stop is sticky: the next unit of this job gets a fresh Trainer.
      std::lock_guard<std::mutex> lock(mu_);
      job_.reset();
    }
    if (absl::IsAborted(s) && !stopping_.load()) {
      // The PS refused our pushes as fenced: we were presumed dead and our
      // data went to others. Not the job's fault: register again.
      std::cerr << "brook trainer " << node_id_ << ": " << s.message() << "\n";
      must_register_.store(true);
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.units_dropped;
      continue;
    }
    if (!s.ok() && !stopping_.load()) {
      // This job cannot be trained here (bad data, a spec the backend cannot
      // run): tell the chief, which fails the job, and go on with the next.
      std::cerr << "brook trainer " << node_id_ << ": job " << work->job_id() << ": " << s.message()
                << "\n";
      v1::ReportMetricsRequest m;
      m.set_node_id(node_id_);
      m.set_job_id(work->job_id());
      m.set_error(std::string(s.message()));
      chief_->ReportMetrics(m).IgnoreError();
      std::lock_guard<std::mutex> lock(mu_);
      job_.reset();
      stats_.job_id.clear();
    }
  }
  stopping_.store(true);
  heartbeat.join();
  return result;
}

}  // namespace brook::worker
