// `brook bench ps --target HOST:PORT[,...]`: (b) across processes. Pull and
// push rows/s of GrpcPsClient against running `brook ps` shards (another
// process, or another machine or network namespace), each beside a bare
// gRPC ceiling that is also a process of its own (`brook bench
// grpc-ceiling`: bench/bare_grpc.h) moving the same payload bytes over the
// same number of connections, in alternating slices (bench/paired_rate.h).
//
// For each dim it creates a table "bench-<pid>-<dim>" on the shards (SGD),
// pushes every row it will pull once, measures, and drops the table again,
// also when a step in between fails.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>
#include "absl/status/status.h"
#include "bench/ps_bench.h"

namespace brook::bench {

// REQUIRES: !options.targets.empty(). INVALID_ARGUMENT for bad options (no
// ceiling_targets among them); UNAVAILABLE naming the address when a target
// or the ceiling does not answer.
absl::Status RunPsTargetBench(const PsBenchOptions& options, std::ostream& out,
                              nlohmann::json* result);

// The table the benchmark creates on the targets for `dim`.
std::string TargetBenchTableName(int dim);

}  // namespace brook::bench
