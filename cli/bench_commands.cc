// `brook bench ...`: benchmarks that print each figure beside the ceiling it
// chases, measured in the same run (see BENCHMARKS.md).
#include <pthread.h>
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/bare_grpc.h"
#include "bench/bench_util.h"
#include "bench/interrupt_cleanup.h"
#include "bench/ps_bench.h"
#include "bench/serve_bench.h"
#include "bench/tfrecord_bench.h"
#include "bench/trainer_bench.h"
#include "cli/address_flags.h"
#include "cli/child_process.h"
#include "cli/commands.h"
#include "cli/security_flags.h"

namespace brook::cli {
namespace {

constexpr char kCeilingListening[] = "brook bench grpc-ceiling listening on ";

// `brook bench grpc-ceiling`: the bare gRPC ceiling (bench/bare_grpc.h) as a
// process of its own, for `brook bench ps --target`. Prints its address,
// serves until SIGTERM or SIGINT.
int RunGrpcCeiling(const std::string& listen) {
  // Blocked before gRPC starts its threads, so only sigwait() sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  absl::StatusOr<std::unique_ptr<bench::BareGrpcServer>> server =
      bench::BareGrpcServer::Start(listen);
  if (!server.ok()) {
    std::cerr << "brook bench grpc-ceiling: " << server.status().message() << "\n";
    return kExitFailed;
  }
  std::cout << kCeilingListening << (*server)->address() << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  server->reset();
  return kExitOk;
}

void RegisterBenchGrpcCeiling(CLI::App& bench, int* exit_code) {
  auto listen = std::make_shared<std::string>("127.0.0.1:0");
  CLI::App* cmd = bench.add_subcommand(
      "grpc-ceiling",
      "The bare gRPC ceiling of `brook bench ps --target` as a process of its own (serves until "
      "SIGTERM)");
  cmd->add_option("--listen", *listen,
                  "HOST:PORT to serve on (port 0 picks one); printed as \"brook bench "
                  "grpc-ceiling listening on HOST:PORT\". No authentication: it answers "
                  "filler bytes of the size asked, nothing else")
      ->check(ListenAddress())
      ->capture_default_str();
  cmd->callback([listen, exit_code] { *exit_code = RunGrpcCeiling(*listen); });
}

// A `brook bench grpc-ceiling` child on 127.0.0.1:0 (this binary), for a
// `brook bench ps --target` given no --ceiling-target. Its logs go to a
// scratch dir that lives as long as it does.
struct CeilingChild {
  explicit CeilingChild(bench::ScratchDir dir) : logs(std::move(dir)) {}
  bench::ScratchDir logs;
  std::unique_ptr<ChildProcess> process;
  std::string address;
  ~CeilingChild() {
    if (process) process->Stop(absl::Seconds(2));
  }
};

absl::StatusOr<std::unique_ptr<CeilingChild>> SpawnCeiling() {
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return absl::InternalError(absl::StrCat("cannot read /proc/self/exe: ", ec.message()));
  absl::StatusOr<bench::ScratchDir> logs = bench::ScratchDir::Make("", "brook-bench-ceiling");
  if (!logs.ok()) return logs.status();
  auto child = std::make_unique<CeilingChild>(std::move(*logs));
  absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(
      "grpc-ceiling", {self, "bench", "grpc-ceiling", "--listen", "127.0.0.1:0"},
      child->logs.path() + "/grpc-ceiling");
  if (!process.ok()) return process.status();
  child->process = std::move(*process);
  absl::StatusOr<std::string> line =
      child->process->WaitForLine(kCeilingListening, absl::Seconds(10));
  if (!line.ok()) {
    return absl::Status(line.status().code(), absl::StrCat("starting brook bench grpc-ceiling: ",
                                                           line.status().message()));
  }
  child->address = line->substr(sizeof(kCeilingListening) - 1);
  return child;
}

}  // namespace

void RegisterBenchTfrecord(CLI::App& bench, int* exit_code) {
  auto opts = std::make_shared<bench::TfrecordBenchOptions>();
  auto json_out = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand(
      "tfrecord", "TFRecord read+CRC MB/s and Example parse rate vs plain read, CRC32C, protobuf");
  cmd->add_option("--examples", opts->examples, "Criteo-shaped examples to write and read")
      ->envname("BROOK_BENCH_EXAMPLES");
  cmd->add_option("--repeats", opts->repeats, "Best of N per figure")
      ->envname("BROOK_BENCH_REPEATS");
  cmd->add_option("--dir", opts->dir, "Scratch directory (default: a temp dir)");
  cmd->add_flag("--json", *json_out, "Also print the figures as JSON");
  cmd->callback([opts, json_out, exit_code] {
    nlohmann::json result;
    absl::Status st = bench::RunTfrecordBench(*opts, std::cout, &result);
    if (!st.ok()) {
      std::cerr << "brook bench tfrecord: " << st.message() << "\n";
      *exit_code = kExitFailed;
      return;
    }
    if (*json_out) std::cout << result.dump(2) << "\n";
    *exit_code = kExitOk;
  });
}

void RegisterBenchPs(CLI::App& bench, int* exit_code) {
  auto opts = std::make_shared<bench::PsBenchOptions>();
  auto json_out = std::make_shared<bool>(false);
  auto no_redis = std::make_shared<bool>(false);
  auto ps_token = std::make_shared<TokenFlags>();
  auto wire = std::make_shared<std::string>("fp32");
  CLI::App* cmd = bench.add_subcommand(
      "ps",
      "PS pull/push rows/s in process and over gRPC vs gather, bare gRPC and Redis; "
      "--target: running brook ps shards vs a bare gRPC process");
  cmd->add_option("--rows", opts->rows,
                  "Table rows (capped at 512 MiB of weights per dim), all pushed once first")
      ->envname("BROOK_BENCH_ROWS");
  cmd->add_option("--dims", opts->dims, "Embedding dims, comma-separated")->delimiter(',');
  cmd->add_option("--threads", opts->threads, "Client thread counts, comma-separated")
      ->delimiter(',');
  cmd->add_option("--seconds", opts->seconds, "Seconds per figure")->envname("BROOK_BENCH_SECONDS");
  cmd->add_option("--batch", opts->batch, "Distinct keys per pull / push");
  cmd->add_option("--slices", opts->slices,
                  "Alternating slice pairs per figure and its ceiling (the ratio is their "
                  "median)");
  cmd->add_option("--seed", opts->seed, "Seed of the key draws");
  cmd->add_option("--helpers", opts->helpers,
                  "(b) the PS's helper threads (brook ps --helpers); -1: its default")
      ->check(CLI::Range(-1, 64));
  cmd->add_option("--tier-rows", opts->tier.rows,
                  "(c) RocksDB tier: table rows (the memory budget holds a tenth); 0 skips (c)")
      ->envname("BROOK_BENCH_TIER_ROWS");
  cmd->add_option("--tier-dim", opts->tier.dim, "(c) RocksDB tier: embedding dim");
  cmd->add_option("--tier-wal-threads", opts->tier.wal_threads,
                  "(c) pushing threads of the WAL's group-commit figures")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--work-dir", opts->tier.work_dir,
                  "(c) where the data dirs are made (and removed)");
  cmd->add_flag("--no-redis", *no_redis, "Skip the Redis baseline even if redis-server exists");
  cmd->add_option("--wire", *wire,
                  "(b) and --target: the table's wire precision; the bare ceiling still moves "
                  "fp32 bytes, so past 100% is what the halved payload bought")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  cmd->add_option("--target", opts->targets,
                  "Two processes: running `brook ps` shards, HOST:PORT comma-separated in shard "
                  "order; only (b) runs, against them, on a table bench-<pid>-<dim> it drops at "
                  "the end")
      ->delimiter(',');
  cmd->add_option("--ceiling-target", opts->ceiling_targets,
                  "With --target: running `brook bench grpc-ceiling` processes, HOST:PORT, one "
                  "for all shards or one per shard (comma-separated); default: one per shard "
                  "started here on 127.0.0.1")
      ->delimiter(',');
  AddTlsFlags(cmd, &opts->tls, TlsRole::kClient);
  ps_token->env_var = "BROOK_PS_TOKEN";
  ps_token->flag = "--ps-token-file";
  cmd->add_option("--ps-token-file", ps_token->file,
                  "With --target: file holding the PS nodes' bearer token (or set "
                  "$BROOK_PS_TOKEN)")
      ->envname("BROOK_PS_TOKEN_FILE");
  cmd->add_flag("--json", *json_out, "Also print the figures as JSON");
  cmd->callback([opts, json_out, no_redis, ps_token, wire, exit_code] {
    opts->redis = !*no_redis;
    opts->wire = *ps::WirePrecisionFromName(*wire);
    opts->tier.batch = opts->batch;
    opts->tier.slices = opts->slices;
    opts->tier.seconds = opts->seconds;
    opts->tier.seed = opts->seed;
    auto fail = [&](const absl::Status& st) {
      std::cerr << "brook bench ps: " << st.message() << "\n";
      *exit_code = absl::IsInvalidArgument(st) ? kExitUsage : kExitFailed;
    };
    std::vector<std::unique_ptr<CeilingChild>> ceilings;  // outlive the run
    if (!opts->targets.empty()) {
      // Before any thread starts: a Ctrl-C then drops the bench's table.
      bench::InterruptCleanup::Install();
      absl::StatusOr<std::string> token = ps_token->Resolve();
      if (!token.ok()) return fail(token.status());
      opts->token = {};
      if (!token->empty()) {
        opts->token.token = *token;
        opts->token.source = ps_token->Source();
      }
      // One ceiling process per PS shard, as the shards are a process each.
      for (size_t s = 0; opts->ceiling_targets.empty() && s < opts->targets.size(); ++s) {
        absl::StatusOr<std::unique_ptr<CeilingChild>> child = SpawnCeiling();
        if (!child.ok()) return fail(child.status());
        ceilings.push_back(std::move(*child));
      }
      for (const auto& child : ceilings) opts->ceiling_targets.push_back(child->address);
    } else if (!opts->ceiling_targets.empty()) {
      return fail(absl::InvalidArgumentError("--ceiling-target goes with --target"));
    }
    nlohmann::json result;
    absl::Status st = bench::RunPsBench(*opts, std::cout, &result);
    if (!st.ok()) return fail(st);
    if (!opts->targets.empty()) result["ceilings_started_here"] = ceilings.size();
    if (*json_out) std::cout << result.dump(2) << "\n";
    *exit_code = kExitOk;
  });
  // The ceiling process of `bench ps --target` is registered with it.
  RegisterBenchGrpcCeiling(bench, exit_code);
}

void RegisterBenchTrainer(CLI::App& bench, int* exit_code) {
  auto opts = std::make_shared<bench::TrainerBenchOptions>();
  auto json_out = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand("trainer",
                                       "Trainer examples/s (Wide & Deep, DLRM; PS in process and "
                                       "over gRPC) vs input and compute alone, with PS bytes/s "
                                       "and the GPU idle share");
  cmd->add_option("--examples", opts->examples, "Criteo-shaped training examples to generate")
      ->envname("BROOK_BENCH_EXAMPLES")
      ->capture_default_str();
  cmd->add_option("--models", opts->models, "Models, comma-separated: wide_deep, deepfm, dlrm")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--batch-size", opts->batch_size, "Examples per step")->capture_default_str();
  cmd->add_option("--ps-shards", opts->ps_shards, "PS shards")->capture_default_str();
  cmd->add_option("--staleness", opts->staleness, "Batches in flight")->capture_default_str();
  cmd->add_option("--cardinality-max", opts->cardinality_max, "Largest id feature cardinality")
      ->capture_default_str();
  cmd->add_option("--backend-threads", opts->backend_threads, "CPU backend threads; 0 = all cores")
      ->capture_default_str();
  cmd->add_option("--device", opts->device,
                  "Backends, comma-separated, each run on the same data: cpu, cuda, cuda:N "
                  "(e.g. cpu,cuda)")
      ->capture_default_str();
  cmd->add_option("--gemm-math", opts->gemm_math, "CUDA GEMM precision: fp32, tf32 or bf16")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--work-dir", opts->work_dir, "Where the data is generated (and removed)");
  cmd->add_option("--seed", opts->seed, "Seed of the data and the model")->capture_default_str();
  cmd->add_flag("--json", *json_out, "Also print the figures as JSON");
  cmd->callback([opts, json_out, exit_code] {
    nlohmann::json result;
    absl::Status st = bench::RunTrainerBench(*opts, std::cout, &result);
    if (!st.ok()) {
      std::cerr << "brook bench trainer: " << st.message() << "\n";
      *exit_code = absl::IsInvalidArgument(st) ? kExitUsage : kExitFailed;
      return;
    }
    if (*json_out) std::cout << result.dump(2) << "\n";
    *exit_code = kExitOk;
  });
}

void RegisterBenchServe(CLI::App& bench, int* exit_code) {
  auto opts = std::make_shared<bench::ServeBenchOptions>();
  auto output = std::make_shared<std::string>("table");
  CLI::App* cmd = bench.add_subcommand(
      "serve",
      "brook serve under closed-loop load: p50/p99 and requests/s over HTTP and gRPC, batched "
      "examples/s vs brook predict offline, scores vs brook predict, version swaps under load");
  cmd->add_option("--model", opts->model,
                  "Export directory (`brook local --demo-train 200000 --demo-test 20000` writes "
                  "one under WORK_DIR/export/)")
      ->required();
  cmd->add_option("--data", opts->data,
                  "TFRecord files or globs of the model's data (default: the eval files the "
                  "export recorded)");
  cmd->add_option("--max-examples", opts->max_examples,
                  "Records of --data the requests carry in turn (and the equality check scores)")
      ->capture_default_str();
  cmd->add_option("--target", opts->target,
                  "HTTP HOST:PORT of a running `brook serve` to load instead of one started in "
                  "this process (it must serve --model)");
  cmd->add_option("--grpc-target", opts->grpc_target,
                  "With --target: its gRPC HOST:PORT (without: no gRPC phases)");
  cmd->add_option("--swap-dir", opts->swap_dir,
                  "With --target: the directory it watches (its --model), where the swaps place "
                  "new versions (without: no swaps)");
  cmd->add_option("--model-name", opts->model_name, "The NAME in /v1/models/NAME")
      ->capture_default_str();
  cmd->add_option("--workers", opts->workers,
                  "Server threads scoring batches; also the offline ceiling's threads")
      ->capture_default_str();
  cmd->add_option("--http-threads", opts->http_threads, "Server threads reading and writing HTTP")
      ->capture_default_str();
  cmd->add_option("--max-batch", opts->max_batch, "Server: examples per model step at most")
      ->capture_default_str();
  cmd->add_option("--batch-timeout-micros", opts->batch_timeout_micros,
                  "Server: how long a batch taken under load waits for more")
      ->capture_default_str();
  cmd->add_flag("--fill-missing", opts->fill_missing,
                "Server: fill features an example lacks with the spec's defaults");
  cmd->add_option("--seconds", opts->seconds, "Seconds per phase")
      ->envname("BROOK_BENCH_SECONDS")
      ->capture_default_str();
  cmd->add_option("--slices", opts->slices,
                  "Slice pairs in which each batched phase alternates with the offline ceiling "
                  "(the ratio is the median pair's)")
      ->capture_default_str();
  cmd->add_option("--concurrency", opts->concurrency,
                  "Client counts of the one-example phases, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--batch", opts->batch, "Examples a request in the batched phases")
      ->capture_default_str();
  cmd->add_option("--batch-clients", opts->batch_clients, "Clients of the batched phases")
      ->capture_default_str();
  cmd->add_option("--swaps", opts->swaps, "New versions placed while clients load the server")
      ->capture_default_str();
  cmd->add_option("--swap-clients", opts->swap_clients,
                  "Clients during the swaps (and the same load without), alternately HTTP and gRPC")
      ->capture_default_str();
  cmd->add_option("--poll-seconds", opts->poll_seconds,
                  "Server in this process: how often it looks for new versions")
      ->capture_default_str();
  cmd->add_option("--offline-batch", opts->offline_batch,
                  "The offline ceiling's batch (brook predict's)")
      ->capture_default_str();
  cmd->add_option("--work-dir", opts->work_dir, "Where the versions' copies go (and are removed)");
  cmd->add_option("--output", *output,
                  "table, or json: every figure as one JSON object on stdout (the table then "
                  "goes to stderr)")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  cmd->callback([opts, output, exit_code] {
    const bool json_out = *output == "json";
    nlohmann::json result;
    absl::Status st = bench::RunServeBench(*opts, json_out ? std::cerr : std::cout, &result);
    if (!st.ok()) {
      std::cerr << "brook bench serve: " << st.message() << "\n";
      *exit_code = absl::IsInvalidArgument(st) || absl::IsNotFound(st) ? kExitUsage : kExitFailed;
      return;
    }
    if (json_out) std::cout << result.dump(2) << std::endl;
    // Wrong answers fail the bench; a missed speed goal does not.
    const int64_t failed = result["failed_requests"].get<int64_t>();
    const bool equal = result["equality"]["pass"].get<bool>();
    if (failed > 0 || !equal) {
      std::cerr << "brook bench serve: FAILED: " << failed << " failed request(s)"
                << (equal ? "" : "; served scores differ from brook predict's by more than 1e-6")
                << "\n";
      *exit_code = kExitFailed;
      return;
    }
    *exit_code = kExitOk;
  });
}

}  // namespace brook::cli
