// `brook bench ...`: benchmarks that print each figure beside the ceiling it
// chases, measured in the same run (see BENCHMARKS.md).
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/ps_bench.h"
#include "bench/tfrecord_bench.h"
#include "bench/trainer_bench.h"
#include "cli/commands.h"

namespace brook::cli {

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
  CLI::App* cmd = bench.add_subcommand(
      "ps", "PS pull/push rows/s in process and over gRPC vs gather, bare gRPC and Redis");
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
  cmd->add_option("--work-dir", opts->tier.work_dir,
                  "(c) where the data dirs are made (and removed)");
  cmd->add_flag("--no-redis", *no_redis, "Skip the Redis baseline even if redis-server exists");
  cmd->add_flag("--json", *json_out, "Also print the figures as JSON");
  cmd->callback([opts, json_out, no_redis, exit_code] {
    opts->redis = !*no_redis;
    opts->tier.batch = opts->batch;
    opts->tier.seconds = opts->seconds;
    opts->tier.seed = opts->seed;
    nlohmann::json result;
    absl::Status st = bench::RunPsBench(*opts, std::cout, &result);
    if (!st.ok()) {
      std::cerr << "brook bench ps: " << st.message() << "\n";
      *exit_code = absl::IsInvalidArgument(st) ? kExitUsage : kExitFailed;
      return;
    }
    if (*json_out) std::cout << result.dump(2) << "\n";
    *exit_code = kExitOk;
  });
}

void RegisterBenchTrainer(CLI::App& bench, int* exit_code) {
  auto opts = std::make_shared<bench::TrainerBenchOptions>();
  auto json_out = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand("trainer",
                                       "Trainer examples/s (Wide & Deep, DLRM; PS in process and "
                                       "over gRPC) vs input and compute alone");
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
  cmd->add_option("--device", opts->device, "cpu | cuda | cuda:N")->capture_default_str();
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

}  // namespace brook::cli
