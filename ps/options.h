// Options of embedding tables and dense variables on a parameter server:
// initializer, optimizer and the admission / eviction / bad-gradient policies.
// Plain structs; Validate() names the field that is wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace brook::ps {

// A stream push's part sequence is step << kStreamPartBits | part, the part's
// index among the step's parts on one shard (PushContext::stream_id).
inline constexpr int kStreamPartBits = 12;
inline constexpr uint64_t kMaxStreamParts = uint64_t{1} << kStreamPartBits;

// Largest embedding dim a table accepts (a row must fit in the arena's blocks).
inline constexpr int kMaxDim = 1 << 16;
// admission_min_count is kept in a 16-bit counter per pending key.
inline constexpr uint32_t kMaxAdmissionMinCount = 65535;
// Upper bound on a dense variable's elements (1 GiB of floats); the server's
// max_keys_per_request usually bounds it further.
inline constexpr uint64_t kMaxDenseFloats = 1ull << 28;

enum class InitializerKind { kZeros, kConstant, kUniform, kTruncatedNormal };

struct InitializerOptions {
  InitializerKind kind = InitializerKind::kUniform;
  float value = 0.0f;  // kConstant
  float low = -0.05f;  // kUniform: [low, high)
  float high = 0.05f;
  float mean = 0.0f;  // kTruncatedNormal: redraw beyond 2 stddev, as TF
  float stddev = 0.01f;

  friend bool operator==(const InitializerOptions&, const InitializerOptions&) = default;
};

enum class OptimizerKind { kSgd, kAdagrad, kAdam, kFtrl };

// The spelling in job specs and flags: "sgd" | "adagrad" | "adam" | "ftrl".
std::string_view OptimizerKindName(OptimizerKind kind);
// nullopt for any other name.
std::optional<OptimizerKind> OptimizerKindFromName(std::string_view name);

// Hyper-parameters follow TensorFlow's raw ops (ApplyGradientDescent,
// ApplyAdagrad, ApplyAdam, ApplyFtrlV2) so a user can carry settings over.
struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  float learning_rate = 0.01f;
  float initial_accumulator = 0.1f;  // Adagrad, FTRL
  float beta1 = 0.9f;                // Adam
  float beta2 = 0.999f;              // Adam
  float epsilon = 1e-7f;             // Adam (Keras default), Adagrad (0 = TF1 raw op)
  float l1 = 0.0f;                   // FTRL
  float l2 = 0.0f;                   // FTRL
  float l2_shrinkage = 0.0f;         // FTRL (V2)
  float lr_power = -0.5f;            // FTRL

  friend bool operator==(const OptimizerOptions&, const OptimizerOptions&) = default;
};

// What a push with a NaN or Inf gradient value does. Either way it is counted.
enum class BadGradientPolicy {
  kReject,  // the whole push is refused (INVALID_ARGUMENT), nothing applied
  kZero,    // non-finite values are replaced by 0 and the rest applied
};

// How a table's pulled rows and pushed gradients travel between a PsClient
// and the PS (ps/wire/precision.h): float32, or half the bytes as bfloat16
// or float16 (fp16 with a per-request power-of-two scale, so small
// gradients do not underflow). Rounding is to nearest even. The PS keeps
// float32 weights and optimizer state whatever this is.
enum class WirePrecision { kFp32, kBf16, kFp16 };

// The spelling in job specs and flags: "fp32" | "bf16" | "fp16".
std::string_view WirePrecisionName(WirePrecision precision);
// nullopt for any other name.
std::optional<WirePrecision> WirePrecisionFromName(std::string_view name);

struct TableOptions {
  std::string name;
  int dim = 0;
  uint64_t seed = 0;  // initial row = f(seed, key), same on every PS
  InitializerOptions initializer;
  OptimizerOptions optimizer;
  // Bytes of rows (weights + optimizer slots) this table may keep in memory.
  // The RocksDB tier (next issue) moves cold rows out past it; until then a
  // push that would create a row past the budget is RESOURCE_EXHAUSTED.
  uint64_t memory_budget_bytes = 1ull << 30;
  // A key becomes a trained row after it has been pushed this many times;
  // before that pulls return the initial value and pushes only count. The
  // admitting (min_count-th) push creates the row and applies its gradient.
  // 0 or 1: every key is admitted on its first push.
  uint32_t admission_min_count = 0;
  // Bound on keys counted but not yet admitted (~20-30 bytes each). Past
  // it, the counts of the affected stripe of the table are halved and keys
  // whose count drops to 0 are forgotten (TableStats.pending_forgotten):
  // frequent keys keep progressing, the one-off tail is dropped. A forgotten
  // key simply starts counting again.
  uint64_t max_pending_keys = 1u << 22;
  // Rows not updated for this many steps (push step numbers) / seconds are
  // dropped by Evict(); 0 disables that criterion.
  int64_t ttl_steps = 0;
  double ttl_seconds = 0;
  BadGradientPolicy bad_gradient = BadGradientPolicy::kReject;
  // Gradients are clipped to [-clip, clip] per value when > 0.
  float gradient_clip = 0.0f;
  // A client's choice for its own requests (PsClient remembers it per table
  // from CreateTable), not part of the table the PS holds: the PS neither
  // stores nor compares it, and each request says its precision.
  WirePrecision wire = WirePrecision::kFp32;

  absl::Status Validate() const;
  // Field-wise; CreateTable uses it to make re-declaration idempotent.
  friend bool operator==(const TableOptions&, const TableOptions&) = default;
};

struct DenseOptions {
  std::string name;
  std::vector<int64_t> shape;  // num_floats = product
  uint64_t seed = 0;
  InitializerOptions initializer;
  OptimizerOptions optimizer;
  BadGradientPolicy bad_gradient = BadGradientPolicy::kReject;

  absl::Status Validate() const;
  uint64_t num_floats() const;  // 0 if the shape is empty, non-positive or overflows
  friend bool operator==(const DenseOptions&, const DenseOptions&) = default;
};

// A size in bytes as job specs and flags spell it: a number with an
// optional unit, e.g. "1073741824", "512MiB", "2GiB", "1.5GB". Binary units
// KiB MiB GiB TiB (also Ki Mi Gi Ti, as Kubernetes writes them), decimal KB
// MB GB TB (also K M G T), and B; a fraction is rounded down to whole bytes.
// INVALID_ARGUMENT saying what is allowed for anything else, a negative
// number or a size past 2^64.
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

// Floats of optimizer state kept beside each row of `dim` weights.
int OptimizerSlotFloats(const OptimizerOptions& o, int dim);

// A push's learning_rate_scale (PushContext): INVALID_ARGUMENT unless
// finite and > 0. The PS core and every client check it with this.
absl::Status CheckLearningRateScale(float scale);

}  // namespace brook::ps
