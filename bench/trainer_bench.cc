#include "bench/trainer_bench.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/status_macros.h"
#include "datatools/synthetic.h"
#include "ps/client/grpc_ps_client.h"
#include "ps/client/local_ps_client.h"
#include "ps/parameter_server.h"
#include "ps/rpc/ps_server.h"
#include "trainer/backend/backend_loader.h"
#include "trainer/input/pipeline.h"
#include "trainer/model/model.h"
#include "trainer/model/model_batch.h"
#include "trainer/model/model_spec.h"
#include "trainer/trainer.h"

namespace brook::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr int kNumDense = 13;
constexpr int kNumCategorical = 26;
// Batches the compute-alone figure cycles through (rows pulled once).
constexpr int kComputeBatches = 16;

struct Setup {
  input::FeatureSpec features;
  trainer::ModelSpec spec;
  std::vector<std::string> files;
};

input::PipelineOptions TrainPipeline(const TrainerBenchOptions& o, const Setup& s) {
  input::PipelineOptions p;
  p.files = s.files;
  p.batch_size = o.batch_size;
  p.shuffle_buffer = 10000;
  p.seed = o.seed;
  p.epochs = 1;
  return p;
}

// Examples/s of the input side alone: everything the trainer's pull thread
// does before it talks to the PS.
absl::StatusOr<double> InputAlone(const TrainerBenchOptions& o, const Setup& s) {
  ASSIGN_OR_RETURN(auto pipeline, input::Pipeline::Create(s.features, TrainPipeline(o, s)));
  ASSIGN_OR_RETURN(trainer::ModelBatchBuilder builder,
                   trainer::ModelBatchBuilder::Create(s.spec, s.features));
  trainer::ModelBatch batch;
  int64_t examples = 0;
  const auto t0 = Clock::now();
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<input::Batch> next, pipeline->Next());
    if (!next.has_value()) break;
    if (next->data.num_rows == 0) continue;
    RETURN_IF_ERROR(builder.Build(next->data, &batch));
    examples += batch.batch_size;
  }
  return examples / Since(t0);
}

// Examples/s of forward + backward alone, on batches whose rows and dense
// variables were pulled once beforehand.
absl::StatusOr<double> ComputeAlone(const TrainerBenchOptions& o, const Setup& s,
                                    trainer::Backend* backend, int64_t examples) {
  ps::LocalPsCluster cluster(o.ps_shards);
  ps::LocalPsClient& client = *cluster.client;
  ASSIGN_OR_RETURN(auto t, trainer::Trainer::Create(&client, s.spec, s.features,
                                                    trainer::TrainerOptions{}, backend));
  RETURN_IF_ERROR(t->Setup());
  ASSIGN_OR_RETURN(auto pipeline, input::Pipeline::Create(s.features, TrainPipeline(o, s)));
  ASSIGN_OR_RETURN(trainer::ModelBatchBuilder builder,
                   trainer::ModelBatchBuilder::Create(s.spec, s.features));
  ASSIGN_OR_RETURN(std::unique_ptr<trainer::Model> model, trainer::Model::Create(s.spec, backend));
  struct Pulled {
    trainer::ModelBatch batch;
    std::vector<std::vector<float>> rows;
  };
  std::vector<Pulled> pulled;
  std::vector<std::vector<float>> params;
  for (const trainer::DenseVariableSpec& v : model->dense_variables()) {
    params.emplace_back(static_cast<size_t>(v.num_floats()));
    RETURN_IF_ERROR(client.PullDense(v.name, absl::MakeSpan(params.back())));
  }
  while (pulled.size() < kComputeBatches) {
    ASSIGN_OR_RETURN(std::optional<input::Batch> next, pipeline->Next());
    if (!next.has_value()) break;
    if (next->data.num_rows == 0) continue;
    Pulled p;
    RETURN_IF_ERROR(builder.Build(next->data, &p.batch));
    for (size_t i = 0; i < p.batch.tables.size(); ++i) {
      const trainer::TableKeys& keys = p.batch.tables[i];
      p.rows.emplace_back(keys.unique_keys.size() * static_cast<size_t>(keys.dim));
      RETURN_IF_ERROR(client.Pull(model->layout().tables[i].name, keys.unique_keys,
                                  absl::MakeSpan(p.rows.back())));
    }
    pulled.push_back(std::move(p));
  }
  pipeline->Cancel();
  if (pulled.empty()) return absl::InvalidArgumentError("no training data");
  const std::vector<absl::Span<const float>> param_views(params.begin(), params.end());
  std::vector<absl::Span<const float>> row_views;
  trainer::StepResult result;
  int64_t done = 0;
  Clock::time_point t0;
  for (size_t i = 0; done < examples; ++i) {
    if (i == 1) t0 = Clock::now();  // the first step allocates the backend's buffers
    Pulled& p = pulled[i % pulled.size()];
    p.batch.step = i;
    row_views.assign(p.rows.begin(), p.rows.end());
    RETURN_IF_ERROR(model->Step(p.batch, row_views, param_views, /*train=*/true, &result));
    if (i >= 1) done += p.batch.batch_size;
  }
  return done / Since(t0);
}

struct TrainRun {
  double examples_per_second = 0;
  trainer::TrainerStats stats;
  // Device time of the run's steps (CUDA events); nullopt on the CPU.
  std::optional<double> device_busy_seconds;
};

std::optional<double> DeviceBusySeconds(const trainer::Backend& backend) {
  const std::optional<trainer::DeviceStats> d = backend.device_stats();
  if (!d.has_value()) return std::nullopt;
  return d->busy_seconds;
}

absl::StatusOr<TrainRun> TrainOnce(const TrainerBenchOptions& o, const Setup& s,
                                   trainer::Backend* backend, ps::PsClient* client) {
  trainer::TrainerOptions to;
  to.staleness = o.staleness;
  to.seed = o.seed;
  ASSIGN_OR_RETURN(auto t, trainer::Trainer::Create(client, s.spec, s.features, to, backend));
  RETURN_IF_ERROR(t->Setup());
  ASSIGN_OR_RETURN(auto pipeline, input::Pipeline::Create(s.features, TrainPipeline(o, s)));
  const std::optional<double> busy_before = DeviceBusySeconds(*backend);
  RETURN_IF_ERROR(t->Train(pipeline.get()));
  const std::optional<double> busy_after = DeviceBusySeconds(*backend);
  TrainRun run;
  run.stats = t->stats();
  run.examples_per_second =
      run.stats.wall_seconds > 0 ? run.stats.examples / run.stats.wall_seconds : 0;
  if (busy_before.has_value() && busy_after.has_value()) {
    run.device_busy_seconds = *busy_after - *busy_before;
  }
  return run;
}

absl::StatusOr<TrainRun> TrainInProcess(const TrainerBenchOptions& o, const Setup& s,
                                        trainer::Backend* backend) {
  ps::LocalPsCluster cluster(o.ps_shards);
  return TrainOnce(o, s, backend, cluster.client.get());
}

absl::StatusOr<TrainRun> TrainOverGrpc(const TrainerBenchOptions& o, const Setup& s,
                                       trainer::Backend* backend) {
  std::vector<std::unique_ptr<ps::rpc::PsServer>> servers;
  ps::GrpcPsClientOptions co;
  for (int i = 0; i < o.ps_shards; ++i) {
    ps::rpc::PsServerOptions so;
    so.listen = "127.0.0.1:0";
    so.metrics_listen = "";
    so.ps.shard_index = i;
    so.ps.num_shards = o.ps_shards;
    ASSIGN_OR_RETURN(auto server, ps::rpc::PsServer::Start(so));
    co.addresses.push_back(server->address());
    servers.push_back(std::move(server));
  }
  ASSIGN_OR_RETURN(auto client, ps::GrpcPsClient::Create(co));
  RETURN_IF_ERROR(client->WaitForReady(absl::Seconds(10)));
  return TrainOnce(o, s, backend, client.get());
}

nlohmann::json RunJson(const TrainRun& r, double ceiling) {
  const trainer::TrainerStats& st = r.stats;
  const double wall = std::max(st.wall_seconds, 1e-9);
  nlohmann::json j = {{"examples_per_second", r.examples_per_second},
                      {"of_ceiling", r.examples_per_second / ceiling},
                      {"input_wait_share", st.input_wait_seconds / wall},
                      {"ps_wait_share", st.ps_wait_seconds / wall},
                      {"compute_share", st.compute_seconds / wall},
                      {"ps_pull_bytes_per_second", static_cast<double>(st.ps_pull_bytes) / wall},
                      {"ps_push_bytes_per_second", static_cast<double>(st.ps_push_bytes) / wall},
                      {"gpu_idle_share", nullptr},
                      {"steps", st.steps},
                      {"examples", st.examples}};
  if (r.device_busy_seconds.has_value()) {
    j["gpu_idle_share"] = std::clamp(1.0 - *r.device_busy_seconds / wall, 0.0, 1.0);
  }
  return j;
}

// The backends of --device, split at commas, each checked (spelling, and
// --gemm-math on the cpu) and named once: "cuda" and "cuda:0" are one GPU.
absl::StatusOr<std::vector<std::string>> Devices(const std::string& list,
                                                 trainer::CudaGemmMath gemm_math) {
  std::vector<std::string> devices, canonical;
  for (const std::string& d : std::vector<std::string>(absl::StrSplit(list, ','))) {
    if (d.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device: an empty entry in '", list.substr(0, 64), "'"));
    }
    const absl::StatusOr<trainer::DeviceName> parsed = trainer::ParseDevice(d, gemm_math);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--device: ", parsed.status().message()));
    }
    const trainer::DeviceName& name = *parsed;
    if (std::find(canonical.begin(), canonical.end(), name.Canonical()) != canonical.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device names ", name.Canonical(), " twice ('", d, "')"));
    }
    canonical.push_back(name.Canonical());
    devices.push_back(d);
  }
  return devices;
}

std::string Percent(const nlohmann::json& v) {
  return v.is_null() ? std::string("-") : absl::StrFormat("%.1f%%", 100 * v.get<double>());
}

}  // namespace

absl::StatusOr<std::string> CriteoModelYaml(const std::string& model) {
  std::string head;
  if (model == "wide_deep") {
    head = "model: {type: wide_deep, embedding_dim: 16, hidden: [256, 128], activation: relu}\n";
  } else if (model == "deepfm") {
    head = "model: {type: deepfm, embedding_dim: 8, hidden: [128, 64], activation: relu}\n";
  } else if (model == "dlrm") {
    head =
        "model: {type: dlrm, embedding_dim: 16, bottom: [64], top: [256, 128], activation: relu}\n";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown model '", model, "' (wide_deep, deepfm or dlrm)"));
  }
  std::string yaml = head + "sparse:\n";
  for (int i = 1; i <= kNumCategorical; ++i) absl::StrAppend(&yaml, "  - {feature: C", i, "}\n");
  yaml += "dense:\n";
  for (int i = 1; i <= kNumDense; ++i) {
    absl::StrAppend(&yaml, "  - {feature: I", i, ", transform: log1p}\n");
  }
  return yaml;
}

absl::Status RunTrainerBench(const TrainerBenchOptions& o, std::ostream& out,
                             nlohmann::json* result) {
  if (o.examples < o.batch_size || o.batch_size <= 0 || o.ps_shards <= 0 || o.staleness < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("need --examples >= --batch-size > 0, --ps-shards > 0, --staleness >= 0 (",
                     o.examples, ", ", o.batch_size, ", ", o.ps_shards, ", ", o.staleness, ")"));
  }
  for (const std::string& m : o.models) RETURN_IF_ERROR(CriteoModelYaml(m).status());
  ASSIGN_OR_RETURN(const trainer::CudaGemmMath gemm_math, trainer::ParseGemmMath(o.gemm_math));
  ASSIGN_OR_RETURN(const std::vector<std::string> devices, Devices(o.device, gemm_math));
  // Every backend before the data: a missing GPU fails in a second.
  trainer::CpuBackendOptions cpu;
  cpu.num_threads = o.backend_threads;
  std::vector<std::unique_ptr<trainer::Backend>> backends;
  for (const std::string& d : devices) {
    ASSIGN_OR_RETURN(std::unique_ptr<trainer::Backend> backend,
                     trainer::CreateBackend(d, cpu, gemm_math));
    backends.push_back(std::move(backend));
  }
  ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::Make(o.work_dir, "brook-bench-trainer"));
  datatools::SyntheticOptions gen;
  gen.seed = o.seed;
  gen.train_examples = o.examples;
  gen.test_examples = 1000;
  gen.shards = 4;
  gen.test_shards = 1;
  gen.max_cardinality = o.cardinality_max;
  gen.output_dir = work.path() + "/data";
  gen.threads = 2;
  ASSIGN_OR_RETURN(datatools::SyntheticResult data, datatools::GenerateSynthetic(gen));

  out << absl::StrFormat(
      "brook bench trainer: %d Criteo-shaped examples (13 counts, 26 ids, largest cardinality "
      "%d), batch %d, %d PS shards, staleness %d, device %s%s; one epoch per figure\n",
      o.examples, o.cardinality_max, o.batch_size, o.ps_shards, o.staleness,
      absl::StrJoin(devices, ", "),
      absl::StrContains(o.device, "cuda") ? absl::StrCat(" (cuda GEMMs ", o.gemm_math, ")") : "");
  out << absl::StrFormat("%-10s %-7s %-28s %11s %8s %7s %7s %7s %8s %9s %9s\n", "model", "device",
                         "figure", "examples/s", "of ceil", "input", "PS", "compute", "GPU idle",
                         "from PS", "to PS");
  out << absl::StrFormat("%-10s %-7s %-28s %11s %8s %7s %7s %7s %8s %9s %9s\n", "", "", "", "", "",
                         "wait", "wait", "", "", "MB/s", "MB/s");
  nlohmann::json models = nlohmann::json::object();
  for (const std::string& m : o.models) {
    Setup s;
    s.files = data.train.files;
    ASSIGN_OR_RETURN(s.features, input::FeatureSpec::FromYamlFile(data.feature_spec_path));
    ASSIGN_OR_RETURN(std::string yaml, CriteoModelYaml(m));
    ASSIGN_OR_RETURN(s.spec, trainer::ModelSpec::FromYaml(yaml, s.features));

    ASSIGN_OR_RETURN(const double input_alone, InputAlone(o, s));
    out << absl::StrFormat("%-10s %-7s %-28s %11.0f\n", m, "", "input alone (ceiling)",
                           input_alone);
    nlohmann::json mj = {{"input_alone_examples_per_second", input_alone},
                         {"devices", nlohmann::json::object()}};
    for (size_t d = 0; d < devices.size(); ++d) {
      trainer::Backend* backend = backends[d].get();
      const std::string& device = devices[d];
      ASSIGN_OR_RETURN(const double compute_alone,
                       ComputeAlone(o, s, backend, std::min<int64_t>(o.examples, 50000)));
      const double ceiling = std::min(input_alone, compute_alone);
      const char* bottleneck = input_alone < compute_alone ? "input" : "compute";
      out << absl::StrFormat("%-10s %-7s %-28s %11.0f\n", m, device, "compute alone (ceiling)",
                             compute_alone);
      nlohmann::json dj = {{"compute_alone_examples_per_second", compute_alone},
                           {"ceiling_bottleneck", bottleneck}};
      struct Path {
        const char* key;
        const char* label;
        absl::StatusOr<TrainRun> (*run)(const TrainerBenchOptions&, const Setup&,
                                        trainer::Backend*);
      };
      for (const Path& p : {Path{"in_process", "(a) trainer, PS in process", &TrainInProcess},
                            Path{"grpc", "(b) trainer, PS over gRPC", &TrainOverGrpc}}) {
        ASSIGN_OR_RETURN(TrainRun r, p.run(o, s, backend));
        const nlohmann::json j = RunJson(r, ceiling);
        out << absl::StrFormat("%-10s %-7s %-28s %11.0f %7.0f%% %7s %7s %7s %8s %9.1f %9.1f\n", m,
                               device, p.label, r.examples_per_second,
                               100 * j["of_ceiling"].get<double>(), Percent(j["input_wait_share"]),
                               Percent(j["ps_wait_share"]), Percent(j["compute_share"]),
                               Percent(j["gpu_idle_share"]),
                               j["ps_pull_bytes_per_second"].get<double>() / 1e6,
                               j["ps_push_bytes_per_second"].get<double>() / 1e6);
        dj[p.key] = j;
      }
      out << absl::StrFormat(
          "%-10s %-7s bottleneck: %s (input alone %.0f vs compute alone %.0f "
          "examples/s); goal: input + PS wait under 10%% of step time\n",
          m, device, bottleneck, input_alone, compute_alone);
      mj["devices"][device] = std::move(dj);
    }
    models[m] = std::move(mj);
  }
  nlohmann::json backend_names = nlohmann::json::array();
  for (const auto& b : backends) backend_names.push_back(std::string(b->name()));
  *result = {{"examples", o.examples},   {"batch_size", o.batch_size},
             {"ps_shards", o.ps_shards}, {"staleness", o.staleness},
             {"devices", devices},       {"backends", std::move(backend_names)},
             {"gemm_math", o.gemm_math}, {"models", std::move(models)}};
  return absl::OkStatus();
}

}  // namespace brook::bench
