#include "ps/options.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace brook::ps {
namespace {

// Each check returns an INVALID_ARGUMENT that names `what` (e.g. "table
// 'user_emb'") and the field, so a user can fix the job spec without reading
// code.
absl::Status Bad(absl::string_view what, absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", field, " ", why));
}

bool Finite(float v) { return std::isfinite(v); }

absl::Status ValidateInitializer(absl::string_view what, const InitializerOptions& o) {
  switch (o.kind) {
    case InitializerKind::kZeros:
      return absl::OkStatus();
    case InitializerKind::kConstant:
      if (!Finite(o.value)) return Bad(what, "initializer.value", "must be finite");
      return absl::OkStatus();
    case InitializerKind::kUniform:
      if (!Finite(o.low)) return Bad(what, "initializer.low", "must be finite");
      if (!Finite(o.high)) return Bad(what, "initializer.high", "must be finite");
      if (!(o.low < o.high)) {
        return Bad(what, "initializer.high",
                   absl::StrCat("must be > initializer.low (low=", o.low, ", high=", o.high, ")"));
      }
      return absl::OkStatus();
    case InitializerKind::kTruncatedNormal:
      if (!Finite(o.mean)) return Bad(what, "initializer.mean", "must be finite");
      if (!Finite(o.stddev) || !(o.stddev > 0)) {
        return Bad(what, "initializer.stddev",
                   absl::StrCat("must be finite and > 0, got ", o.stddev));
      }
      return absl::OkStatus();
  }
  return Bad(what, "initializer.kind", "is not a known initializer");
}

absl::Status ValidateOptimizer(absl::string_view what, const OptimizerOptions& o) {
  if (!Finite(o.learning_rate) || !(o.learning_rate > 0)) {
    return Bad(what, "optimizer.learning_rate",
               absl::StrCat("must be finite and > 0, got ", o.learning_rate));
  }
  switch (o.kind) {
    case OptimizerKind::kSgd:
      return absl::OkStatus();
    case OptimizerKind::kAdagrad:
      if (!Finite(o.initial_accumulator) || o.initial_accumulator < 0) {
        return Bad(what, "optimizer.initial_accumulator",
                   absl::StrCat("must be finite and >= 0, got ", o.initial_accumulator));
      }
      if (!Finite(o.epsilon) || o.epsilon < 0) {
        return Bad(what, "optimizer.epsilon",
                   absl::StrCat("must be finite and >= 0, got ", o.epsilon));
      }
      // sqrt(accum) + epsilon is a divisor: both zero would divide by zero on
      // the first zero gradient (TF1's ApplyAdagrad has the same trap).
      if (o.initial_accumulator == 0 && o.epsilon == 0) {
        return Bad(what, "optimizer.initial_accumulator",
                   "must be > 0 when optimizer.epsilon is 0 (division by zero)");
      }
      return absl::OkStatus();
    case OptimizerKind::kAdam:
      if (!Finite(o.beta1) || o.beta1 < 0 || o.beta1 >= 1) {
        return Bad(what, "optimizer.beta1", absl::StrCat("must be in [0, 1), got ", o.beta1));
      }
      if (!Finite(o.beta2) || o.beta2 < 0 || o.beta2 >= 1) {
        return Bad(what, "optimizer.beta2", absl::StrCat("must be in [0, 1), got ", o.beta2));
      }
      if (!Finite(o.epsilon) || !(o.epsilon > 0)) {
        return Bad(what, "optimizer.epsilon",
                   absl::StrCat("must be finite and > 0, got ", o.epsilon));
      }
      return absl::OkStatus();
    case OptimizerKind::kFtrl:
      if (!Finite(o.initial_accumulator) || o.initial_accumulator < 0) {
        return Bad(what, "optimizer.initial_accumulator",
                   absl::StrCat("must be finite and >= 0, got ", o.initial_accumulator));
      }
      if (!Finite(o.l1) || o.l1 < 0) {
        return Bad(what, "optimizer.l1", absl::StrCat("must be finite and >= 0, got ", o.l1));
      }
      if (!Finite(o.l2) || o.l2 < 0) {
        return Bad(what, "optimizer.l2", absl::StrCat("must be finite and >= 0, got ", o.l2));
      }
      if (!Finite(o.l2_shrinkage) || o.l2_shrinkage < 0) {
        return Bad(what, "optimizer.l2_shrinkage",
                   absl::StrCat("must be finite and >= 0, got ", o.l2_shrinkage));
      }
      if (!Finite(o.lr_power) || o.lr_power > 0) {
        return Bad(what, "optimizer.lr_power",
                   absl::StrCat("must be finite and <= 0, got ", o.lr_power));
      }
      return absl::OkStatus();
  }
  return Bad(what, "optimizer.kind", "is not a known optimizer");
}

absl::Status ValidateBadGradient(absl::string_view what, BadGradientPolicy p) {
  if (p != BadGradientPolicy::kReject && p != BadGradientPolicy::kZero) {
    return Bad(what, "bad_gradient", "is not a known policy");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TableOptions::Validate() const {
  const std::string what = absl::StrCat("table '", name, "'");
  if (name.empty()) return Bad("table", "name", "must not be empty");
  if (dim <= 0 || dim > kMaxDim) {
    return Bad(what, "dim", absl::StrCat("must be in [1, ", kMaxDim, "], got ", dim));
  }
  RETURN_IF_ERROR(ValidateInitializer(what, initializer));
  RETURN_IF_ERROR(ValidateOptimizer(what, optimizer));
  const uint64_t row_bytes = static_cast<uint64_t>(dim + OptimizerSlotFloats(optimizer, dim)) * 4;
  if (memory_budget_bytes < row_bytes) {
    return Bad(what, "memory_budget_bytes",
               absl::StrCat("must hold at least one row (", row_bytes, " bytes), got ",
                            memory_budget_bytes));
  }
  if (admission_min_count > kMaxAdmissionMinCount) {
    return Bad(what, "admission_min_count",
               absl::StrCat("must be <= ", kMaxAdmissionMinCount, ", got ", admission_min_count));
  }
  if (max_pending_keys == 0) return Bad(what, "max_pending_keys", "must be > 0");
  if (ttl_steps < 0) return Bad(what, "ttl_steps", absl::StrCat("must be >= 0, got ", ttl_steps));
  if (!std::isfinite(ttl_seconds) || ttl_seconds < 0) {
    return Bad(what, "ttl_seconds", absl::StrCat("must be finite and >= 0, got ", ttl_seconds));
  }
  RETURN_IF_ERROR(ValidateBadGradient(what, bad_gradient));
  if (!Finite(gradient_clip) || gradient_clip < 0) {
    return Bad(what, "gradient_clip", absl::StrCat("must be finite and >= 0, got ", gradient_clip));
  }
  if (WirePrecisionName(wire) == "unknown") {
    return Bad(what, "wire",
               absl::StrCat("must be fp32, bf16 or fp16, got ", static_cast<int>(wire)));
  }
  return absl::OkStatus();
}

uint64_t DenseOptions::num_floats() const {
  if (shape.empty()) return 0;
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) return 0;
    if (n > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) return 0;
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

absl::Status DenseOptions::Validate() const {
  const std::string what = absl::StrCat("dense variable '", name, "'");
  if (name.empty()) return Bad("dense variable", "name", "must not be empty");
  if (shape.empty()) return Bad(what, "shape", "must have at least one dimension");
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] <= 0) {
      return Bad(what, "shape", absl::StrCat("dimension ", i, " must be > 0, got ", shape[i]));
    }
  }
  const uint64_t n = num_floats();
  if (n == 0 || n > kMaxDenseFloats) {
    return Bad(what, "shape", absl::StrCat("must have at most ", kMaxDenseFloats, " elements"));
  }
  RETURN_IF_ERROR(ValidateInitializer(what, initializer));
  RETURN_IF_ERROR(ValidateOptimizer(what, optimizer));
  RETURN_IF_ERROR(ValidateBadGradient(what, bad_gradient));
  return absl::OkStatus();
}

int OptimizerSlotFloats(const OptimizerOptions& o, int dim) {
  switch (o.kind) {
    case OptimizerKind::kSgd:
      return 0;
    case OptimizerKind::kAdagrad:
      return dim;  // accumulator
    case OptimizerKind::kAdam:
      return 2 * dim + 1;  // m, v, and the row's update count t
    case OptimizerKind::kFtrl:
      return 2 * dim;  // accumulator, linear
  }
  return 0;
}

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  const absl::string_view t =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  size_t digits = 0;
  while (digits < t.size() && (absl::ascii_isdigit(t[digits]) || t[digits] == '.')) ++digits;
  const absl::string_view number = t.substr(0, digits);
  const absl::string_view unit = absl::StripLeadingAsciiWhitespace(t.substr(digits));
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", absl::string_view(text.data(), text.size()),
        "\" is not a size: a number of bytes with an optional unit B, KiB, MiB, GiB, TiB (or Ki, "
        "Mi, Gi, Ti), KB, MB, GB, TB (or K, M, G, T), e.g. 512MiB"));
  };
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value) || !std::isfinite(value) || value < 0) {
    return bad();
  }
  static constexpr std::pair<absl::string_view, double> kUnits[] = {
      {"", 1},         {"B", 1},       {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30},
      {"TiB", 0x1p40}, {"Ki", 0x1p10}, {"Mi", 0x1p20},  {"Gi", 0x1p30},  {"Ti", 0x1p40},
      {"KB", 1e3},     {"MB", 1e6},    {"GB", 1e9},     {"TB", 1e12},    {"K", 1e3},
      {"M", 1e6},      {"G", 1e9},     {"T", 1e12}};
  for (const auto& [name, scale] : kUnits) {
    if (unit != name) continue;
    const double bytes = std::floor(value * scale);
    if (!(bytes < 0x1p64)) return bad();
    return static_cast<uint64_t>(bytes);
  }
  return bad();
}

std::string_view OptimizerKindName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdagrad:
      return "adagrad";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kFtrl:
      return "ftrl";
  }
  return "unknown";
}

std::optional<OptimizerKind> OptimizerKindFromName(std::string_view name) {
  for (OptimizerKind k :
       {OptimizerKind::kSgd, OptimizerKind::kAdagrad, OptimizerKind::kAdam, OptimizerKind::kFtrl}) {
    if (name == OptimizerKindName(k)) return k;
  }
  return std::nullopt;
}

std::string_view WirePrecisionName(WirePrecision precision) {
  switch (precision) {
    case WirePrecision::kFp32:
      return "fp32";
    case WirePrecision::kBf16:
      return "bf16";
    case WirePrecision::kFp16:
      return "fp16";
  }
  return "unknown";
}

std::optional<WirePrecision> WirePrecisionFromName(std::string_view name) {
  for (WirePrecision p : {WirePrecision::kFp32, WirePrecision::kBf16, WirePrecision::kFp16}) {
    if (name == WirePrecisionName(p)) return p;
  }
  return std::nullopt;
}

absl::Status CheckLearningRateScale(float scale) {
  if (std::isfinite(scale) && scale > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("learning_rate_scale ", scale, " must be finite and > 0"));
}

}  // namespace brook::ps
