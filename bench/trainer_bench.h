// `brook bench trainer`: examples/s of whole training steps (input pipeline,
// PS pulls and pushes, forward + backward) for Wide & Deep and DLRM on
// Criteo-shaped data from `brook data gen`, with the PS (a) in process
// (LocalPsClient) and (b) over gRPC on 127.0.0.1 (PsServers in this process,
// GrpcPsClient), each beside its ceiling measured in the same run: the
// slower of the input pipeline alone (read, parse, shuffle, batch, build
// model batches) and the compute alone (Model::Step on pre-pulled batches).
// The trainer's own clock says where a step's time went: the shares of
// input wait and PS wait (goal: under 10% together) name the bottleneck.
// Beside them: bytes/s pulled from and pushed to the PS, and on a GPU the
// share of wall time the device sat outside every step (CUDA events). Several
// devices ("cpu,cuda") run in turn on the same generated data.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace brook::bench {

struct TrainerBenchOptions {
  int64_t examples = 200000;  // generated training examples (one epoch is trained)
  std::vector<std::string> models = {"wide_deep", "dlrm"};
  int batch_size = 512;
  int ps_shards = 2;
  int staleness = 2;
  uint64_t cardinality_max = 100000;  // largest of the 26 id features
  int backend_threads = 0;            // CPU backend threads; 0 = all cores
  std::string device = "cpu";         // comma-separated: "cpu", "cuda", "cuda:N"
  std::string gemm_math = "fp32";     // "fp32" | "tf32" | "bf16" (cuda)
  std::string work_dir;               // where the data is generated; empty = temp dir
  uint64_t seed = 1;
};

// The model spec YAML `brook bench trainer` trains (also usable on
// `brook data gen` output): "wide_deep" | "deepfm" | "dlrm" over I1..I13
// (log1p) and C1..C26. InvalidArgument for another name.
absl::StatusOr<std::string> CriteoModelYaml(const std::string& model);

absl::Status RunTrainerBench(const TrainerBenchOptions& options, std::ostream& out,
                             nlohmann::json* result);

}  // namespace brook::bench
