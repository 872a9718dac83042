#include "trainer/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"

namespace brook::trainer {

absl::Status LrSchedule::Validate() const {
  if (warmup_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("lr schedule: warmup_steps ", warmup_steps, " must be >= 0"));
  }
  if (decay == LrDecay::kConstant) return absl::OkStatus();
  if (decay_steps <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("lr schedule: decay_steps ", decay_steps,
                                                   " must be > 0 for the ",
                                                   std::string(LrDecayName(decay)), " decay"));
  }
  if (!(min_scale >= 0.0 && min_scale <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lr schedule: min_scale ", min_scale, " must be in [0, 1]"));
  }
  if (decay == LrDecay::kExponential && !(decay_rate > 0.0 && decay_rate <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lr schedule: decay_rate ", decay_rate, " must be in (0, 1]"));
  }
  return absl::OkStatus();
}

float LrSchedule::Scale(int64_t step) const {
  step = std::max<int64_t>(step, 0);
  double scale = 1.0;
  if (step < warmup_steps)
    scale = static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const double t = static_cast<double>(std::max<int64_t>(step - warmup_steps, 0));
  const double span = static_cast<double>(decay_steps);
  switch (decay) {
    case LrDecay::kConstant:
      break;
    case LrDecay::kLinear:
      scale *= t >= span ? min_scale : 1.0 - (1.0 - min_scale) * t / span;
      break;
    case LrDecay::kCosine:
      scale *= t >= span ? min_scale
                         : min_scale + (1.0 - min_scale) * 0.5 *
                                           (1.0 + std::cos(std::numbers::pi * t / span));
      break;
    case LrDecay::kExponential:
      scale *= std::max(min_scale, std::pow(decay_rate, t / span));
      break;
  }
  return std::max(static_cast<float>(scale), kMinScale);
}

absl::StatusOr<LrDecay> ParseLrDecay(std::string_view name) {
  for (LrDecay d :
       {LrDecay::kConstant, LrDecay::kLinear, LrDecay::kCosine, LrDecay::kExponential}) {
    if (name == LrDecayName(d)) return d;
  }
  return absl::InvalidArgumentError(absl::StrCat("lr schedule: unknown decay '", std::string(name),
                                                 "' (constant, linear, cosine or exponential)"));
}

std::string_view LrDecayName(LrDecay decay) {
  switch (decay) {
    case LrDecay::kConstant:
      return "constant";
    case LrDecay::kLinear:
      return "linear";
    case LrDecay::kCosine:
      return "cosine";
    case LrDecay::kExponential:
      return "exponential";
  }
  return "unknown";
}

}  // namespace brook::trainer
