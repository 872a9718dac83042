// `brook bench ps`: pull and push rows/s of the parameter server for batches
// of distinct random keys, (a) in process on the core ParameterServer and
// (b) over gRPC on 127.0.0.1 through GrpcPsClient, each printed beside the
// ceiling measured in the same run: a random gather (scatter for pushes)
// over a plain array of the same rows for (a), a bare generic-gRPC call
// moving the same payload bytes for (b); and Redis MGET/MSET of the same rows
// as the baseline when redis-server is installed; (d) a whole training step's
// tables over gRPC, per-table calls vs the batch RPCs; then (c),
// bench/ps_tier_bench.h.
//
// With `targets` it measures (b) across processes instead
// (bench/ps_target_bench.h): running `brook ps` shards beside a bare gRPC
// ceiling that is a process of its own.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "absl/status/status.h"
#include "bench/ps_tier_bench.h"
#include "ps/options.h"
#include "security/bearer_token.h"
#include "security/tls.h"

namespace brook::bench {

struct PsBenchOptions {
  // Table rows per dim, capped at 512 MiB of weights per table (a plain-array
  // copy and Redis hold the same rows again).
  int64_t rows = 1000000;
  std::vector<int> dims = {16, 64};
  std::vector<int> threads = {1, 2, 4};
  double seconds = 1.0;  // per measurement
  // Each figure and its ceiling run in this many alternating slice pairs
  // (bench/paired_rate.h); the verdict is the median pair's ratio.
  int slices = 8;
  int batch = 4096;  // distinct keys per pull / push
  // (b): PsServerOptions::helpers of the PS under test (-1: its default).
  int helpers = -1;
  // (b) and --target: the table's wire precision (rows and gradients in
  // bf16 / fp16 halve their bytes); the bare ceiling still moves the fp32
  // bytes, so a ratio past 100% is what the halving bought.
  ps::WirePrecision wire = ps::WirePrecision::kFp32;
  uint64_t seed = 1;
  bool redis = true;  // run the Redis baseline when redis-server is on PATH
  // (d) one training step over gRPC: step_tables tables of step_keys keys
  // each (duplicates allowed, uniform over step_rows rows), as one Pull /
  // Push per table in sequence vs one PullBatch / PushBatch, on step_shards
  // PS shards in this process; step_tables == 0 skips it. Defaults: a
  // Criteo-shaped model (26 categorical features).
  int step_tables = 26;
  int step_keys = 256;
  int step_dim = 8;
  int step_shards = 2;
  int64_t step_rows = 20000;
  // (c) the RocksDB tier, WAL cost, checkpoint/restore; rows == 0 skips it.
  PsTierBenchOptions tier;

  // Two processes (or machines): host:port of running `brook ps` shards
  // 0..N-1. Set, only (b) runs, against them, beside the bare gRPC ceiling
  // at ceiling_targets (`brook bench grpc-ceiling`: one for all shards, or
  // one per shard; required then); (a), (c), (d), Redis and `helpers` are
  // in-process matters and do not apply.
  std::vector<std::string> targets;
  std::vector<std::string> ceiling_targets;
  // How the client reaches the targets (brook ps --auth-token-file, TLS).
  security::TlsOptions tls;
  security::ClientToken token;
};

// Runs the benchmark, prints the table to `out`, fills `result` (JSON).
absl::Status RunPsBench(const PsBenchOptions& options, std::ostream& out, nlohmann::json* result);

}  // namespace brook::bench
