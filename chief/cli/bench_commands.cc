// `brook bench ...`: benchmarks that print each figure beside the ceiling it
// chases, measured in the same run (see BENCHMARKS.md).
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/tfrecord_bench.h"
#include "chief/cli/commands.h"

namespace brook::cli {

void RegisterBenchTfrecord(CLI::App& bench, int* exit_code) {
  auto opts = std::make_shared<bench::TfrecordBenchOptions>();
  auto json_out = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand(
      "tfrecord", "TFRecord read+CRC MB/s and Example parse rate vs plain read, CRC32C, protobuf");
  cmd->add_option("--examples", opts->examples, "Criteo-shaped examples to write and read")
      ->envname("BROOK_BENCH_EXAMPLES");
  cmd->add_option("--repeats", opts->repeats, "Best of N per figure")->envname("BROOK_BENCH_REPEATS");
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

}  // namespace brook::cli
