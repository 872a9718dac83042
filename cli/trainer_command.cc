// `brook trainer`: trains a model on TFRecord files against PS shards given
// with --ps (or, with --local-ps N, against N in-process shards: a whole
// training run in one process, for tests and quick experiments), then
// evaluates on --eval-data. Standalone (no chief): for tests and debugging.
// Prints "brook trainer metrics on HOST:PORT" when --metrics-listen is set,
// progress on stderr (a live line on a terminal, a log line every 5 s
// otherwise: cli/progress.h), and the evaluation as one JSON object
// on stdout.
//
// `--job JOB.yaml` takes the feature and model specs, data, optimizers,
// schedule and training settings from a job spec (chief/job/job_spec.h)
// instead; flags given explicitly still override the job's values.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "chief/client/cluster_spec.h"
#include "chief/core/job_queue.h"
#include "chief/export/model_export.h"
#include "chief/job/job_spec.h"
#include "cli/address_flags.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/security_flags.h"
#include "common/random_id.h"
#include "common/status_macros.h"
#include "metrics/collector.h"
#include "metrics/exposer.h"
#include "ps/client/grpc_ps_client.h"
#include "ps/client/local_ps_client.h"
#include "ps/parameter_server.h"
#include "storage/atomic_file.h"
#include "trainer/backend/backend_loader.h"
#include "trainer/input/data_check.h"
#include "trainer/input/pipeline.h"
#include "trainer/input/sources.h"
#include "trainer/model/model_spec.h"
#include "trainer/trainer.h"
#include "worker/trainer_worker.h"

namespace brook::cli {
namespace {

struct TrainerFlags {
  std::string chief, node_id;
  int cpu_threads = 0;
  std::string ps;  // comma-separated host:port
  int local_ps = 0;
  std::string data, eval_data, feature_spec, model_spec;
  int batch_size = 256;
  int epochs = 1;
  size_t shuffle_buffer = 10000;
  int parse_threads = 0;
  int cycle_length = 4;
  uint64_t seed = 1;
  int64_t max_steps = 0;
  int64_t retry_seconds = 300;  // the job spec's training.retry_seconds default
  std::string metrics_listen;
  std::string device = "cpu";  // cpu | cuda | cuda:N
  std::string gemm_math = "fp32";
  security::TlsOptions tls;  // towards the PS nodes and the chief
  TokenFlags token;          // the chief's bearer token
  TokenFlags ps_token;       // the PS nodes' (default: `token`)
  trainer::TrainerOptions options;
  float embedding_lr = 0.05f;
  float dense_lr = 0.001f;
  std::string lr_decay = "constant";
  float embedding_init_range = 0.05f;
  std::string embedding_optimizer = "adagrad";
  std::string wire = "fp32";  // tables.default.wire
  bool eval_only = false;
  std::string on_corrupt = "fail";  // fail | skip (data.on_corrupt)
  std::string compression;          // "": the job's data.compression, else auto
  std::string export_dir;           // parent of the export; with --job, its export.dir
  // --job: the spec, the files its globs match (used instead of --data /
  // --eval-data unless those are given) and the flags given explicitly.
  std::string job;
  std::optional<chief::JobSpec> job_spec;
  std::vector<std::string> data_files, eval_files;
  std::set<std::string> given;
};

// Whether a flag's value applies: always without --job; with it, only when
// the flag was given (otherwise the job spec's value stands).
bool Use(const TrainerFlags& f, const std::string& flag) {
  return !f.job_spec.has_value() || f.given.count(flag) > 0;
}

// --compression's value; nullopt for auto (from each file's name).
std::optional<storage::Compression> CompressionOfFlag(const std::string& name) {
  if (name == "none") return storage::Compression::kNone;
  if (name == "gzip") return storage::Compression::kGzip;
  if (name == "zlib") return storage::Compression::kZlib;
  return std::nullopt;
}

// The compression the data is read with: the job's data.compression
// (--compression already folded in) or --compression.
std::optional<storage::Compression> DataCompression(const TrainerFlags& f) {
  return f.job_spec.has_value() ? f.job_spec->data.compression : CompressionOfFlag(f.compression);
}

// Loads --job and writes its values into every flag not given explicitly.
absl::Status ApplyJob(TrainerFlags* f) {
  ASSIGN_OR_RETURN(chief::JobSpec job, chief::JobSpec::FromYamlFile(f->job));
  ASSIGN_OR_RETURN(std::vector<chief::JobSpec::GlobMatches> matches, job.CheckData());
  for (const chief::JobSpec::GlobMatches& m : matches) {
    auto* files = m.field.rfind("data.train", 0) == 0 ? &f->data_files : &f->eval_files;
    files->insert(files->end(), m.files.begin(), m.files.end());
  }
  auto keep = [&](const char* flag) { return f->given.count(flag) > 0; };
  if (keep("--data")) f->data_files.clear();
  if (keep("--eval-data")) f->eval_files.clear();
  if (!keep("--batch-size")) f->batch_size = job.training.batch_size;
  if (!keep("--epochs")) f->epochs = job.training.epochs;  // 0 in steps mode: max_steps stops
  if (!keep("--shuffle-buffer")) {
    f->shuffle_buffer = static_cast<size_t>(job.training.shuffle_buffer);
  }
  if (!keep("--seed")) f->seed = job.training.seed;
  if (!keep("--max-steps")) f->max_steps = job.training.steps;
  if (!keep("--retry-seconds")) f->retry_seconds = job.training.retry_seconds;
  if (!keep("--on-corrupt")) f->on_corrupt = job.data.skip_corrupt ? "skip" : "fail";
  if (keep("--compression")) {
    job.data.compression = CompressionOfFlag(f->compression);
    f->compression.clear();
  }
  if (!keep("--export-dir")) f->export_dir = job.export_dir;
  trainer::TrainerOptions o = job.ToTrainerOptions();
  if (keep("--staleness")) o.staleness = f->options.staleness;
  if (keep("--dense-refresh-steps")) o.dense_refresh_steps = f->options.dense_refresh_steps;
  if (keep("--accumulation-steps")) o.accumulation_steps = f->options.accumulation_steps;
  if (keep("--lr-warmup-steps")) o.lr_schedule.warmup_steps = f->options.lr_schedule.warmup_steps;
  if (keep("--lr-decay-steps")) o.lr_schedule.decay_steps = f->options.lr_schedule.decay_steps;
  if (keep("--lr-decay-rate")) o.lr_schedule.decay_rate = f->options.lr_schedule.decay_rate;
  if (keep("--lr-min-scale")) o.lr_schedule.min_scale = f->options.lr_schedule.min_scale;
  if (keep("--cache-rows")) o.cache.rows = f->options.cache.rows;
  if (keep("--cache-refresh-steps")) o.cache.refresh_steps = f->options.cache.refresh_steps;
  f->options = o;
  f->job_spec = std::move(job);
  return absl::OkStatus();
}

// The trainer's families from `stats`; `extra` adds more (the worker's).
std::shared_ptr<prometheus::Collectable> TrainerCollector(
    std::function<trainer::TrainerStats()> stats,
    std::function<void(metrics::FamilySet*)> extra = nullptr) {
  return std::make_shared<metrics::FunctionCollector>([stats, extra] {
    const trainer::TrainerStats s = stats();
    metrics::FamilySet set;
    if (extra) extra(&set);
    set.Add(set.Counter("brook_trainer_steps_total", "Training steps completed"), {},
            static_cast<double>(s.steps));
    set.Add(set.Counter("brook_trainer_examples_total", "Examples trained on"), {},
            static_cast<double>(s.examples));
    set.Add(set.Counter("brook_trainer_micro_batches_total",
                        "Batches computed (steps x accumulation steps)"),
            {}, static_cast<double>(s.micro_batches));
    set.Add(set.Counter("brook_trainer_tables_redeclared_total",
                        "Times a PS answered that it lost the job's tables (restarted without "
                        "its WAL) and the trainer declared them again"),
            {}, static_cast<double>(s.tables_redeclared));
    set.Add(
        set.Gauge("brook_trainer_in_flight_steps",
                  "Steps pulled whose pushes are not all acknowledged (bounded by staleness + 1)"),
        {}, static_cast<double>(s.in_flight_steps));
    if (s.device.has_value()) {
      set.Add(set.Gauge("brook_trainer_gpu_memory_used_bytes",
                        "Memory in use on the trainer's GPU (every process on it)"),
              {}, static_cast<double>(s.device->memory_used_bytes));
      set.Add(set.Gauge("brook_trainer_gpu_memory_total_bytes", "Memory of the trainer's GPU"), {},
              static_cast<double>(s.device->memory_total_bytes));
      set.Add(set.Counter("brook_trainer_gpu_busy_seconds_total",
                          "GPU time from each step's first to its last op (CUDA events); "
                          "1 - its rate is the GPU's idle share"),
              {}, s.device->busy_seconds);
      if (s.device->utilization.has_value()) {
        set.Add(set.Gauge("brook_trainer_gpu_utilization_ratio",
                          "Share of the last sample period a kernel ran on the trainer's GPU "
                          "(NVML)"),
                {}, *s.device->utilization);
      }
    }
    set.Add(set.Gauge("brook_trainer_learning_rate_scale",
                      "Multiplier of the base learning rates sent with the last push"),
            {}, s.learning_rate_scale);
    auto* seconds = set.Counter("brook_trainer_seconds_total",
                                "Where the trainer's time went, by phase: input_wait (pipeline), "
                                "ps_wait (compute waiting for pulled rows), compute, pull, push");
    set.Add(seconds, {{"phase", "input_wait"}}, s.input_wait_seconds);
    set.Add(seconds, {{"phase", "ps_wait"}}, s.ps_wait_seconds);
    set.Add(seconds, {{"phase", "compute"}}, s.compute_seconds);
    set.Add(seconds, {{"phase", "pull"}}, s.pull_seconds);
    set.Add(seconds, {{"phase", "push"}}, s.push_seconds);
    auto* lookups = set.Counter("brook_trainer_cache_lookups_total",
                                "Unique rows of training pulls served by the row cache (hit) or "
                                "pulled from the PS (miss); with a job's cache only");
    if (s.cache_hits + s.cache_misses > 0) {
      set.Add(lookups, {{"result", "hit"}}, static_cast<double>(s.cache_hits));
      set.Add(lookups, {{"result", "miss"}}, static_cast<double>(s.cache_misses));
    }
    auto* payload = set.Counter("brook_trainer_ps_payload_bytes_total",
                                "Payload bytes of embedding pulls (keys + rows) and pushes (keys "
                                "+ gradients) in the tables' wire precision, by call");
    set.Add(payload, {{"call", "pull"}}, static_cast<double>(s.ps_pull_bytes));
    set.Add(payload, {{"call", "push"}}, static_cast<double>(s.ps_push_bytes));
    set.Add(set.Gauge("brook_trainer_loss", "Mean loss of the last batch"), {}, s.last_loss);
    if (!std::isnan(s.train_auc)) {
      set.Add(set.Gauge("brook_trainer_train_auc",
                        "Progressive AUC of the last 64K-128K training examples (each predicted "
                        "before its update)"),
              {}, s.train_auc);
    }
    if (!std::isnan(s.eval_auc)) {
      set.Add(set.Gauge("brook_trainer_eval_auc", "Exact AUC of the last evaluation"), {},
              s.eval_auc);
    }
    set.Add(set.Gauge("brook_trainer_examples_per_second", "Examples per second so far"), {},
            s.wall_seconds > 0 ? s.examples / s.wall_seconds : 0.0);
    return set.Take();
  });
}

absl::StatusOr<std::unique_ptr<input::Pipeline>> MakePipeline(const input::FeatureSpec& spec,
                                                              const TrainerFlags& f,
                                                              const std::string& glob, bool train) {
  input::PipelineOptions o;
  const std::vector<std::string>& files = train ? f.data_files : f.eval_files;
  if (files.empty()) o.glob = glob;
  o.files = files;
  o.compression = DataCompression(f);
  o.batch_size = f.batch_size;
  o.cycle_length = f.cycle_length;
  o.parse_threads = f.parse_threads;
  o.seed = f.seed;
  o.shuffle_buffer = train ? f.shuffle_buffer : 0;
  o.epochs = train ? f.epochs : 1;
  o.skip_corrupt_records = o.skip_bad_examples = f.on_corrupt == "skip";
  return input::Pipeline::Create(spec, o);
}

// The files --data / --eval-data (or the job's globs) name.
absl::StatusOr<std::vector<std::string>> FilesOf(const TrainerFlags& f, bool train) {
  const std::vector<std::string>& files = train ? f.data_files : f.eval_files;
  if (!files.empty()) return files;
  const std::string& glob = train ? f.data : f.eval_data;
  if (glob.empty()) return std::vector<std::string>();
  return input::internal::ExpandGlob(glob);
}

// Every data file opens as TFRecord and the first records fit the feature
// spec, before any PS is touched (input::CheckData); warnings on stderr.
absl::Status CheckTrainerData(const TrainerFlags& f, const input::FeatureSpec& features) {
  std::vector<input::DataCheckList> lists;
  for (const bool train : {true, false}) {
    if (train && f.eval_only) continue;
    ASSIGN_OR_RETURN(std::vector<std::string> files, FilesOf(f, train));
    const std::string& glob = train ? f.data : f.eval_data;
    std::string what = train ? "--data" : "--eval-data";
    if (!glob.empty()) {
      absl::StrAppend(&what, " \"", glob, "\"");
    } else if (f.job_spec.has_value()) {
      what = train ? "the job's data.train" : "the job's data.eval";
    }
    lists.push_back({what, std::move(files)});
  }
  input::DataCheckOptions o;
  o.compression = DataCompression(f);
  o.skip_corrupt = f.on_corrupt == "skip";
  ASSIGN_OR_RETURN(input::DataCheckResult r, input::CheckData(features, lists, o));
  for (const std::string& w : r.warnings) std::cerr << "brook trainer: warning: " << w << "\n";
  return absl::OkStatus();
}

// What a standalone run exports and checkpoints as: the --job spec with the
// flags that overrode it, or one made of the flags. Its canonical JSON is
// recorded in the export, so `brook predict` scores with exactly this.
chief::JobSpec StandaloneSpec(const TrainerFlags& f, const input::FeatureSpec& features,
                              const trainer::ModelSpec& model,
                              const trainer::TrainerOptions& options) {
  chief::JobSpec js = f.job_spec.value_or(chief::JobSpec{});
  if (!f.job_spec.has_value()) js.name = "trainer";
  if (!f.data.empty()) js.data.train = {f.data};
  if (!f.eval_data.empty()) js.data.eval = {f.eval_data};
  js.data.skip_corrupt = f.on_corrupt == "skip";
  js.data.compression = DataCompression(f);
  js.features = features;
  js.model = model;  // with the standardize moments it trained with
  js.embedding_optimizer = options.embedding_optimizer;
  js.dense_optimizer = options.dense_optimizer;
  js.table_optimizers = options.table_optimizers;
  js.lr_schedule = options.lr_schedule;
  js.embedding_init = options.embedding_init;
  js.table_defaults = options.table_defaults;
  js.cache = options.cache;
  js.training.batch_size = f.batch_size;
  js.training.epochs = f.max_steps > 0 ? 0 : f.epochs;
  js.training.steps = f.max_steps;
  js.training.staleness = options.staleness;
  js.training.accumulation_steps = options.accumulation_steps;
  js.training.dense_refresh_steps = options.dense_refresh_steps;
  js.training.seed = f.seed;
  js.training.shuffle_buffer = static_cast<int64_t>(f.shuffle_buffer);
  js.training.retry_seconds = f.retry_seconds;
  js.export_dir = f.export_dir;
  return js;
}

// The job spec's checkpoint section for a run without a chief: a PS
// checkpoint of the run's tables every interval_seconds / interval_steps
// (newest `keep` kept) and one at the end, under <dir>/<run id>/.
class StandaloneCheckpoints {
 public:
  StandaloneCheckpoints(ps::PsClient* ps, const chief::JobCheckpointSpec& spec, std::string run_id)
      : ps_(ps), spec_(spec), run_dir_(absl::StrCat(spec.dir, "/", std::move(run_id))) {}
  ~StandaloneCheckpoints() { Stop(); }

  // Checkpoints on the spec's schedule while `steps` moves on.
  void Start(std::function<int64_t()> steps) {
    if (spec_.interval_seconds == 0 && spec_.interval_steps == 0) return;
    thread_ = std::thread([this, steps = std::move(steps)] {
      absl::Time last = absl::Now();
      // By steps: at the first poll past each multiple of the interval, as
      // the chief does, so a run's checkpoints fall near 1000, 2000, ...
      const int64_t every = spec_.interval_steps;
      auto next_multiple = [every](int64_t step) { return (step / every + 1) * every; };
      int64_t due = every > 0 ? next_multiple(steps()) : 0;
      std::unique_lock<std::mutex> lock(mu_);
      while (!stop_) {
        cv_.wait_for(lock, std::chrono::milliseconds(20));
        if (stop_) break;
        const int64_t step = steps();
        const bool by_time = spec_.interval_seconds > 0 &&
                             absl::Now() - last >= absl::Seconds(spec_.interval_seconds);
        const bool by_steps = every > 0 && step >= due;
        if (!by_time && !by_steps) continue;
        lock.unlock();
        absl::Status s = Take(absl::StrCat("step-", step), step);
        if (!s.ok()) std::cerr << "brook trainer: " << s.message() << " (training goes on)\n";
        lock.lock();
        last = absl::Now();
        if (every > 0) due = next_multiple(step);
      }
    });
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  absl::Status Take(const std::string& name, int64_t step) {
    ps::CheckpointOptions o;
    o.dir = absl::StrCat(run_dir_, "/", name);
    o.step = step;
    absl::StatusOr<std::vector<ps::CheckpointInfo>> done = ps_->Checkpoint(o);
    if (!done.ok()) {
      return absl::Status(done.status().code(), absl::StrCat("checkpoint to ", o.dir,
                                                             " failed: ", done.status().message()));
    }
    std::cerr << "brook trainer: checkpoint at step " << step << " in " << o.dir << "\n";
    std::lock_guard<std::mutex> lock(taken_mu_);
    taken_.push_back(o.dir);
    while (static_cast<int>(taken_.size()) > spec_.keep) {
      std::error_code ec;
      std::filesystem::remove_all(taken_.front(), ec);
      taken_.erase(taken_.begin());
    }
    return absl::OkStatus();
  }
  std::vector<std::string> taken() const {
    std::lock_guard<std::mutex> lock(taken_mu_);
    return taken_;
  }

 private:
  ps::PsClient* const ps_;
  const chief::JobCheckpointSpec spec_;
  const std::string run_dir_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  mutable std::mutex taken_mu_;
  std::vector<std::string> taken_;  // guarded by taken_mu_, oldest first
};

// The feature and model specs a standalone trainer runs: --spec/--model, else
// the --job's. Errors name the file.
absl::StatusOr<std::pair<input::FeatureSpec, trainer::ModelSpec>> LoadSpecs(const TrainerFlags& f) {
  if (!f.job_spec.has_value() && (f.feature_spec.empty() || f.model_spec.empty())) {
    return absl::InvalidArgumentError("--spec and --model (or --job) are required");
  }
  input::FeatureSpec features;
  if (!f.feature_spec.empty()) {
    ASSIGN_OR_RETURN(features, input::FeatureSpec::FromYamlFile(f.feature_spec));
  } else {
    features = f.job_spec->features;
  }
  trainer::ModelSpec spec;
  if (!f.model_spec.empty()) {
    ASSIGN_OR_RETURN(std::string model_yaml, storage::ReadFileToString(f.model_spec));
    absl::StatusOr<trainer::ModelSpec> parsed = trainer::ModelSpec::FromYaml(model_yaml, features);
    if (!parsed.ok()) {
      return absl::Status(parsed.status().code(),
                          absl::StrCat(f.model_spec, ": ", parsed.status().message()));
    }
    spec = *std::move(parsed);
  } else {
    spec = f.job_spec->model;
  }
  return std::make_pair(std::move(features), std::move(spec));
}

absl::Status RunTrainer(const TrainerFlags& f) {
  ASSIGN_OR_RETURN(auto specs, LoadSpecs(f));
  input::FeatureSpec features = std::move(specs.first);
  trainer::ModelSpec spec = std::move(specs.second);
  const bool has_data = !f.data.empty() || !f.data_files.empty();
  const bool needs_moments =
      std::any_of(spec.dense.begin(), spec.dense.end(), [](const trainer::DenseInputSpec& d) {
        return d.transform == trainer::DenseTransform::kStandardize && !d.has_moments;
      });
  if (!has_data && !f.eval_only) return absl::InvalidArgumentError("--data is required");
  if (f.eval_only && f.eval_data.empty() && f.eval_files.empty()) {
    return absl::InvalidArgumentError("--eval-only needs --eval-data");
  }
  if (needs_moments && !has_data) {
    return absl::InvalidArgumentError(
        "the model's standardize inputs have no mean/stddev: give them in the model spec or "
        "pass --data to compute them");
  }
  RETURN_IF_ERROR(CheckTrainerData(f, features));
  if (needs_moments) {
    // One pass over the training data for the standardize transforms.
    input::PipelineOptions o;
    o.glob = f.data_files.empty() ? f.data : "";
    o.files = f.data_files;
    o.compression = DataCompression(f);
    o.batch_size = 4096;
    o.skip_corrupt_records = o.skip_bad_examples = f.on_corrupt == "skip";
    ASSIGN_OR_RETURN(auto scan, input::Pipeline::Create(features, o));
    trainer::MomentsAccumulator moments(spec, features);
    for (;;) {
      ASSIGN_OR_RETURN(std::optional<input::Batch> b, scan->Next());
      if (!b.has_value()) break;
      RETURN_IF_ERROR(moments.Add(b->data));
    }
    RETURN_IF_ERROR(moments.Apply(&spec));
  }

  std::optional<ps::LocalPsCluster> local;
  std::unique_ptr<ps::PsClient> client;
  if (f.local_ps > 0) {
    local.emplace(f.local_ps);
    client = std::move(local->client);
  } else {
    ps::GrpcPsClientOptions o;
    o.addresses = absl::StrSplit(f.ps, ',', absl::SkipEmpty());
    o.tls = f.tls;
    ASSIGN_OR_RETURN(o.token, ResolvePsClientToken(f.ps_token, f.token, "the chief token"));
    // Every call rides out a PS that is unreachable or out of space this long.
    o.deadline = absl::Seconds(f.retry_seconds);
    o.on_retry = [](const ps::PsRetryEpisode& e) {
      std::cerr << "brook trainer: " << e.error << "; retrying (--retry-seconds)\n";
    };
    if (o.addresses.empty()) return absl::InvalidArgumentError("--ps or --local-ps is required");
    ASSIGN_OR_RETURN(auto grpc, ps::GrpcPsClient::Create(o));
    RETURN_IF_ERROR(grpc->WaitForReady(absl::Seconds(f.retry_seconds)));
    client = std::move(grpc);
  }

  trainer::TrainerOptions options = f.options;
  if (Use(f, "--embedding-lr")) options.embedding_optimizer.learning_rate = f.embedding_lr;
  if (Use(f, "--dense-lr")) options.dense_optimizer.learning_rate = f.dense_lr;
  if (Use(f, "--embedding-optimizer")) {
    // The name was checked by CLI11 (IsMember below).
    options.embedding_optimizer.kind = *ps::OptimizerKindFromName(f.embedding_optimizer);
  }
  if (Use(f, "--wire")) options.table_defaults.wire = *ps::WirePrecisionFromName(f.wire);
  if (Use(f, "--embedding-init-range")) {
    options.embedding_init.kind = ps::InitializerKind::kUniform;
    options.embedding_init.low = -f.embedding_init_range;
    options.embedding_init.high = f.embedding_init_range;
  }
  options.max_steps = f.max_steps;
  options.seed = f.seed;
  if (Use(f, "--lr-decay")) {
    ASSIGN_OR_RETURN(options.lr_schedule.decay, trainer::ParseLrDecay(f.lr_decay));
  }
  ASSIGN_OR_RETURN(const trainer::CudaGemmMath gemm_math, trainer::ParseGemmMath(f.gemm_math));
  ASSIGN_OR_RETURN(
      std::unique_ptr<trainer::Backend> backend,
      trainer::CreateBackend(f.device, trainer::CpuBackendOptions{.num_threads = f.cpu_threads},
                             gemm_math));
  ASSIGN_OR_RETURN(std::unique_ptr<trainer::Trainer> t,
                   trainer::Trainer::Create(client.get(), spec, features, options, backend.get()));
  std::unique_ptr<metrics::MetricsExposer> exposer;
  std::shared_ptr<prometheus::Collectable> collector =
      TrainerCollector([t = t.get()] { return t->stats(); });
  if (!f.metrics_listen.empty()) {
    ASSIGN_OR_RETURN(exposer, metrics::MetricsExposer::Start(f.metrics_listen));
    exposer->RegisterCollectable(collector);
    std::cout << "brook trainer metrics on " << exposer->address() << std::endl;
  }
  RETURN_IF_ERROR(t->Setup());
  const chief::JobSpec run_spec = StandaloneSpec(f, features, spec, options);
  const std::string run_id =
      chief::NewJobId(run_spec.name, absl::Now(), static_cast<uint32_t>(RandomNonZeroId()));
  std::optional<StandaloneCheckpoints> checkpoints;
  if (!run_spec.checkpoint.dir.empty() && !f.eval_only) {
    checkpoints.emplace(client.get(), run_spec.checkpoint, run_id);
  }
  input::PipelineStats train_stats;
  if (!f.eval_only) {
    ASSIGN_OR_RETURN(auto train, MakePipeline(features, f, f.data, /*train=*/true));
    if (checkpoints.has_value()) checkpoints->Start([t = t.get()] { return t->stats().steps; });
    absl::Status trained;
    {
      // Progress by examples, with percent and ETA from the bytes read of
      // the data's size times the epochs (uncompressed: compressed files
      // count decompressed bytes, so only the count and rate are shown).
      ProgressOptions po{.label = "brook trainer", .unit = "examples"};
      if (f.max_steps > 0) po.total = f.max_steps * f.batch_size * f.options.accumulation_steps;
      absl::StatusOr<std::vector<std::string>> files = FilesOf(f, /*train=*/true);
      bool compressed = false;
      for (const std::string& file : files.ok() ? *files : std::vector<std::string>()) {
        std::error_code ec;
        po.bytes_total += static_cast<int64_t>(std::filesystem::file_size(file, ec));
        compressed =
            compressed || storage::CompressionFromPath(file) != storage::Compression::kNone;
      }
      po.bytes_total = compressed || f.max_steps > 0 ? 0 : po.bytes_total * f.epochs;
      ProgressPrinter progress(po);
      std::atomic<bool> training{true};
      std::thread feed([&] {
        while (training.load()) {
          progress.items()->store(t->stats().examples, std::memory_order_relaxed);
          progress.bytes()->store(static_cast<int64_t>(train->stats().bytes_read),
                                  std::memory_order_relaxed);
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      });
      progress.Start();
      trained = t->Train(train.get());
      training.store(false);
      feed.join();
      progress.items()->store(t->stats().examples);
      progress.Finish();
    }
    if (checkpoints.has_value()) checkpoints->Stop();
    train_stats = train->stats();
    RETURN_IF_ERROR(trained);
    if (checkpoints.has_value()) {
      RETURN_IF_ERROR(checkpoints->Take("final", t->stats().steps));
    }
  }
  const trainer::TrainerStats s = t->stats();
  std::cerr << absl::StrFormat(
      "brook trainer: %d steps, %d examples in %.1f s (%.0f examples/s); input wait %.1f s, PS "
      "wait %.1f s, compute %.1f s; pull %.1f s, push %.1f s (other threads)\n",
      s.steps, s.examples, s.wall_seconds, s.wall_seconds > 0 ? s.examples / s.wall_seconds : 0,
      s.input_wait_seconds, s.ps_wait_seconds, s.compute_seconds, s.pull_seconds, s.push_seconds);
  nlohmann::json out = {{"steps", s.steps},
                        {"examples", s.examples},
                        {"train_mean_loss", s.examples > 0 ? s.loss_sum / s.examples : 0},
                        {"train_auc", std::isnan(s.train_auc) ? nlohmann::json(nullptr)
                                                              : nlohmann::json(s.train_auc)},
                        {"wall_seconds", s.wall_seconds},
                        {"input_wait_seconds", s.input_wait_seconds},
                        {"ps_wait_seconds", s.ps_wait_seconds},
                        {"compute_seconds", s.compute_seconds}};
  // What training moved to and from the PS per example (evaluation excluded).
  const double per_example = s.examples > 0 ? 1.0 / static_cast<double>(s.examples) : 0.0;
  if (s.cache_hits + s.cache_misses > 0) {
    out["cache"] = {{"hits", s.cache_hits},
                    {"misses", s.cache_misses},
                    {"hit_ratio", static_cast<double>(s.cache_hits) /
                                      static_cast<double>(s.cache_hits + s.cache_misses)}};
  }
  out["ps_payload_bytes_per_example"] = {
      {"pull", static_cast<double>(s.ps_pull_bytes) * per_example},
      {"push", static_cast<double>(s.ps_push_bytes) * per_example}};
  if (train_stats.corrupt_regions + train_stats.bad_examples > 0) {
    std::cerr << absl::StrFormat(
        "brook trainer: skipped %d corrupt regions (%d bytes) and %d records that do not parse "
        "(--on-corrupt skip)\n",
        train_stats.corrupt_regions, train_stats.corrupt_bytes, train_stats.bad_examples);
  }
  out["skipped"] = {{"corrupt_regions", train_stats.corrupt_regions},
                    {"corrupt_bytes", train_stats.corrupt_bytes},
                    {"bad_examples", train_stats.bad_examples}};
  std::optional<trainer::EvalResult> eval_result;
  if (!f.eval_data.empty() || !f.eval_files.empty()) {
    ASSIGN_OR_RETURN(auto eval, MakePipeline(features, f, f.eval_data, /*train=*/false));
    ASSIGN_OR_RETURN(trainer::EvalResult r, t->Evaluate(eval.get()));
    out["eval"] = {{"examples", r.examples},       {"auc", r.auc},
                   {"logloss", r.logloss},         {"accuracy", r.accuracy},
                   {"calibration", r.calibration}, {"mean_loss", r.mean_loss}};
    eval_result = r;
  }
  if (checkpoints.has_value()) out["checkpoints"] = checkpoints->taken();
  if (!run_spec.export_dir.empty() && !f.eval_only) {
    chief::ExportRequest req;
    req.dir = absl::StrCat(run_spec.export_dir, "/", run_id);
    req.job_id = run_id;
    req.step = s.steps;
    req.eval = eval_result;
    ASSIGN_OR_RETURN(req.train_files, FilesOf(f, /*train=*/true));
    ASSIGN_OR_RETURN(req.eval_files, FilesOf(f, /*train=*/false));
    if (!eval_result.has_value()) req.eval_files.clear();
    absl::StatusOr<chief::ExportManifest> exported =
        chief::WriteExport(client.get(), run_spec, req);
    if (!exported.ok()) {
      return absl::Status(
          exported.status().code(),
          absl::StrCat("export to ", req.dir, " failed: ", exported.status().message()));
    }
    std::cerr << "brook trainer: exported to " << req.dir << "\n";
    out["export_dir"] = req.dir;
  }
  std::cout << out.dump() << std::endl;
  return absl::OkStatus();
}

}  // namespace

// --chief: train whatever the chief assigns until SIGTERM/SIGINT.
absl::Status RunTrainerWorker(const TrainerFlags& f) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  worker::TrainerWorkerOptions o;
  o.chief = f.chief;
  o.node_id = f.node_id;
  o.device = f.device;
  o.parse_threads = f.parse_threads;
  o.cpu_threads = f.cpu_threads;
  o.tls = f.tls;
  ASSIGN_OR_RETURN(o.chief_token, f.token.Resolve());
  ASSIGN_OR_RETURN(o.ps_token, ResolvePsClientToken(f.ps_token, f.token, "the chief token"));
  if (!f.ps.empty()) o.ps_addresses = absl::StrSplit(f.ps, ',', absl::SkipEmpty());
  std::unique_ptr<metrics::MetricsExposer> exposer;
  if (!f.metrics_listen.empty()) {
    ASSIGN_OR_RETURN(exposer, metrics::MetricsExposer::Start(f.metrics_listen));
    o.address = exposer->address();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<worker::TrainerWorker> worker, worker::TrainerWorker::Create(o));
  std::shared_ptr<prometheus::Collectable> collector = TrainerCollector(
      [w = worker.get()] { return w->stats().trainer; },
      [w = worker.get()](metrics::FamilySet* set) {
        const worker::TrainerWorkerStats ws = w->stats();
        auto* units = set->Counter("brook_trainer_work_units_total",
                                   "Work units this trainer finished or dropped (lease lost, job "
                                   "cancelled)");
        set->Add(units, {{"outcome", "completed"}}, static_cast<double>(ws.units_completed));
        set->Add(units, {{"outcome", "dropped"}}, static_cast<double>(ws.units_dropped));
        set->Add(set->Counter("brook_trainer_committed_examples_total",
                              "Examples committed to the chief (pushes acknowledged)"),
                 {}, static_cast<double>(ws.examples));
      });
  if (exposer) {
    exposer->RegisterCollectable(collector);
    std::cout << "brook trainer metrics on " << exposer->address() << std::endl;
  }
  std::cout << "brook trainer " << worker->node_id() << " working for the chief at " << f.chief
            << std::endl;
  std::thread signal_waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    worker->Stop();
  });
  absl::Status s = worker->Run();
  if (!s.ok()) {
    // Run ended on its own: wake the signal thread.
    pthread_kill(signal_waiter.native_handle(), SIGTERM);
  }
  signal_waiter.join();
  return s;
}

void RegisterTrainer(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<TrainerFlags>();
  CLI::App* cmd = app.add_subcommand("trainer", "Train a model on TFRecord data against PS shards");
  cmd->add_option("--ps", f->ps, "PS addresses host:port,... (shard order)")
      ->envname("BROOK_TRAINER_PS");
  cmd->add_option("--chief", f->chief,
                  "Work for the chief at host:port: train the work units of the jobs it assigns "
                  "until SIGTERM (the job spec then comes from the chief; data/model flags are "
                  "not used)")
      ->envname("BROOK_TRAINER_CHIEF");
  cmd->add_option("--node-id", f->node_id,
                  "With --chief: this trainer's id (default trainer-<host>-<pid>)")
      ->envname("BROOK_TRAINER_NODE_ID");
  cmd->add_option("--cpu-threads", f->cpu_threads, "CPU backend threads (0 = every core)")
      ->envname("BROOK_TRAINER_CPU_THREADS")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--local-ps", f->local_ps, "Use N in-process PS shards instead of --ps")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--data", f->data,
                  "Training TFRecord files (glob); also what standardize moments are computed on")
      ->envname("BROOK_TRAINER_DATA");
  cmd->add_option("--eval-data", f->eval_data, "Evaluation TFRecord files (glob)")
      ->envname("BROOK_TRAINER_EVAL_DATA");
  cmd->add_option("--on-corrupt", f->on_corrupt,
                  "fail: a corrupt TFRecord frame or a record that does not parse stops training, "
                  "naming file and offset; skip: skip and count them (with --job, its "
                  "data.on_corrupt)")
      ->check(CLI::IsMember({"fail", "skip"}))
      ->capture_default_str();
  cmd->add_option("--compression", f->compression,
                  "Compression of the data files: auto (from each file's name: .gz GZIP, .zlib "
                  "ZLIB), none, gzip, zlib (with --job, overrides its data.compression)")
      ->check(CLI::IsMember({"auto", "none", "gzip", "zlib"}));
  cmd->add_option("--export-dir", f->export_dir,
                  "After training, export the model (as a chief's job does) to DIR/<run id>, "
                  "for `brook predict` and init_from (with --job, its export.dir)");
  cmd->add_flag("--eval-only", f->eval_only,
                "Only evaluate --eval-data with the weights on the PS (no training)");
  cmd->add_option("--spec", f->feature_spec, "Feature spec YAML (required without --job)");
  cmd->add_option("--model", f->model_spec, "Model spec YAML (required without --job)");
  cmd->add_option("--job", f->job,
                  "Job spec YAML: specs, data, optimizers and training settings (flags given "
                  "explicitly override it)");
  cmd->add_option("--batch-size", f->batch_size, "Examples per step")->capture_default_str();
  cmd->add_option("--epochs", f->epochs, "Passes over --data")->capture_default_str();
  cmd->add_option("--shuffle-buffer", f->shuffle_buffer, "Records in the shuffle buffer")
      ->capture_default_str();
  cmd->add_option("--parse-threads", f->parse_threads, "Parse workers; 0 autotunes")
      ->capture_default_str();
  cmd->add_option("--staleness", f->options.staleness,
                  "Batches whose pushes may be outstanding; 0 = synchronous")
      ->capture_default_str();
  cmd->add_option("--dense-refresh-steps", f->options.dense_refresh_steps,
                  "Pull dense variables every N steps")
      ->capture_default_str();
  cmd->add_option("--max-steps", f->max_steps, "Stop after N steps; 0 = end of data")
      ->capture_default_str();
  cmd->add_option("--retry-seconds", f->retry_seconds,
                  "How long a PS that is unreachable, timing out or out of disk space is retried "
                  "(capped exponential backoff) before training fails naming it; with --job, "
                  "its training.retry_seconds")
      ->check(CLI::Range(int64_t{1}, int64_t{7} * 24 * 3600))
      ->capture_default_str();
  cmd->add_option("--embedding-lr", f->embedding_lr, "Learning rate of the embedding tables")
      ->capture_default_str();
  cmd->add_option("--embedding-optimizer", f->embedding_optimizer,
                  "Optimizer of the embedding tables (applied on the PS)")
      ->check(CLI::IsMember({"sgd", "adagrad", "adam", "ftrl"}))
      ->capture_default_str();
  cmd->add_option("--cache-rows", f->options.cache.rows,
                  "Rows per embedding table the trainer keeps between pulls (a job's cache.rows; 0 "
                  "= no cache)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 32))
      ->capture_default_str();
  cmd->add_option("--cache-refresh-steps", f->options.cache.refresh_steps,
                  "A cached row is pulled again this many steps after its pull (a job's "
                  "cache.refresh_steps)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--wire", f->wire,
                  "Wire precision of every embedding table's pulls and pushes (a job's "
                  "tables.default.wire); the PS keeps fp32 weights either way")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  cmd->add_option("--embedding-init-range", f->embedding_init_range,
                  "Deep embedding rows start uniform in [-R, R) (wide weights start at 0)")
      ->check(CLI::Range(0.0f, 10.0f))
      ->capture_default_str();
  cmd->add_option("--dense-lr", f->dense_lr, "Learning rate of the dense variables (Adam)")
      ->capture_default_str();
  cmd->add_option("--accumulation-steps", f->options.accumulation_steps,
                  "Micro-batches whose gradients make one push (gradient accumulation)")
      ->capture_default_str();
  cmd->add_option("--lr-warmup-steps", f->options.lr_schedule.warmup_steps,
                  "Steps of linear learning-rate warmup")
      ->capture_default_str();
  cmd->add_option("--lr-decay", f->lr_decay, "Learning-rate decay after warmup")
      ->check(CLI::IsMember({"constant", "linear", "cosine", "exponential"}))
      ->capture_default_str();
  cmd->add_option("--lr-decay-steps", f->options.lr_schedule.decay_steps,
                  "Steps of the decay (linear, cosine: to the floor; exponential: per decay-rate)")
      ->capture_default_str();
  cmd->add_option("--lr-decay-rate", f->options.lr_schedule.decay_rate,
                  "Exponential decay factor per decay-steps")
      ->capture_default_str();
  cmd->add_option("--lr-min-scale", f->options.lr_schedule.min_scale,
                  "Floor of the decayed learning-rate multiplier")
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "Seed (shuffle, dropout, initial values)")
      ->capture_default_str();
  cmd->add_option("--device", f->device, "Compute device: cpu, cuda or cuda:N (CUDA plugin)")
      ->capture_default_str()
      ->envname("BROOK_TRAINER_DEVICE");
  cmd->add_option("--gemm-math", f->gemm_math,
                  "CUDA GEMM precision: fp32 (IEEE), tf32 or bf16 (tensor cores round the "
                  "inputs to 10 or 7 mantissa bits; weights stay fp32)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16"}))
      ->capture_default_str()
      ->envname("BROOK_TRAINER_GEMM_MATH");
  cmd->add_option("--metrics-listen", f->metrics_listen, "Prometheus /metrics host:port")
      ->envname("BROOK_TRAINER_METRICS_LISTEN")
      ->check(ListenAddressOrEmpty());
  AddTlsFlags(cmd, &f->tls, TlsRole::kClient);
  AddClientTokenFlags(cmd, &f->token);
  AddPsClientTokenFlags(cmd, &f->ps_token);
  auto check_config = std::make_shared<bool>(false);
  cmd->add_flag("--check-config", *check_config,
                "Validate the flags as the command would, print `config ok` and exit 0 (2 on an "
                "error) without connecting or starting anything");
  cmd->callback([f, cmd, exit_code, check_config] {
    for (const CLI::Option* o : cmd->get_options()) {
      if (o->count() > 0) f->given.insert(o->get_name());
    }
    absl::Status st;
    // Under a TFJob (TF_CONFIG) or with BROOK_CHIEF set, a trainer given no
    // data of its own works for the chief.
    if (f->chief.empty() && f->data.empty() && f->job.empty() && f->local_ps == 0 &&
        (std::getenv("TF_CONFIG") != nullptr || std::getenv("BROOK_CHIEF") != nullptr)) {
      absl::StatusOr<std::string> chief = chief::ChiefAddress("");
      if (!chief.ok()) {
        std::cerr << "brook trainer: " << chief.status().message() << "\n";
        *exit_code = kExitUsage;
        return;
      }
      f->chief = *chief;
    }
    if (*check_config) {
      absl::Status s = f->tls.ValidateForClient();
      // The device as the run names it (the run opens it: a GPU is not
      // needed to check a config).
      if (s.ok()) {
        absl::StatusOr<trainer::CudaGemmMath> math = trainer::ParseGemmMath(f->gemm_math);
        s = math.ok() ? trainer::ParseDevice(f->device, *math).status() : math.status();
      }
      if (s.ok()) s = f->token.Resolve().status();
      // With --chief the PS addresses come from the chief: checked when known.
      if (s.ok()) {
        s = CheckPsClientToken(f->ps_token, f->token, "the chief token",
                               absl::StrSplit(f->ps, ',', absl::SkipEmpty()), f->tls);
      }
      // A standalone trainer's specs are read as the run would (a trainer
      // under a chief gets its job's from the chief).
      if (s.ok() && f->chief.empty() && !f->job.empty()) s = ApplyJob(f.get());
      if (s.ok() && f->chief.empty() &&
          (!f->job.empty() || !f->feature_spec.empty() || !f->model_spec.empty())) {
        s = LoadSpecs(*f).status();
      }
      if (!s.ok()) {
        std::cerr << "brook trainer: " << s.message() << "\n";
        *exit_code = kExitUsage;
        return;
      }
      std::cout << "config ok" << std::endl;
      *exit_code = kExitOk;
      return;
    }
    if (!f->chief.empty()) {
      st = RunTrainerWorker(*f);
    } else {
      st = f->job.empty() ? absl::OkStatus() : ApplyJob(f.get());
      if (st.ok()) st = RunTrainer(*f);
      // The pipeline's data errors (DATA_LOSS: broken framing or a malformed
      // record, naming file and offset) are what --on-corrupt skip skips.
      if ((absl::IsDataLoss(st) ||
           absl::StrContains(st.message(), "bad tf.train.Example at record index")) &&
          f->on_corrupt != "skip") {
        st = absl::Status(st.code(), absl::StrCat(st.message(), " (", chief::kOnCorruptHint, ")"));
      }
    }
    if (!st.ok()) {
      std::cerr << "brook trainer: " << st.message() << "\n";
      *exit_code = absl::IsInvalidArgument(st) || absl::IsNotFound(st) ? kExitUsage : kExitFailed;
      return;
    }
    *exit_code = kExitOk;
  });
}

}  // namespace brook::cli
