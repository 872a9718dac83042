// `brook bench tfrecord`: how fast Brook reads and parses TFRecord data,
// printed beside the ceilings measured in the same run on the same machine:
// plain read() of the same file from the page cache and bare CRC32C over the
// same bytes (for read + CRC), and the generated-protobuf parser (for the
// wire parser).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>
#include "absl/status/status.h"

namespace brook::bench {

struct TfrecordBenchOptions {
  std::string dir;            // scratch directory; a temp dir when empty
  int64_t examples = 200000;  // ~120 MB of Criteo-shaped records
  int repeats = 3;            // best of N for each figure
  uint64_t seed = 1;
};

// Runs the benchmark, prints a table to `out` and fills `result` with the
// figures (for BENCHMARKS.md and for tests of the benchmark's plumbing).
absl::Status RunTfrecordBench(const TfrecordBenchOptions& options, std::ostream& out,
                              nlohmann::json* result);

}  // namespace brook::bench
