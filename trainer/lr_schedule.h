// Learning-rate schedules for server-side optimizers. The optimizers run on
// the PS with each table's (and the dense variables') base learning rate;
// the trainer sends with every push a multiplier of those rates
// (PsClient::PushBatch's learning_rate_scale), computed here from the
// optimizer step. One schedule scales every table and dense variable alike,
// as a Keras LearningRateSchedule scales one optimizer.
//
//   scale(step) = warmup(step) * decay(step - warmup_steps)
//   warmup:      (step + 1) / warmup_steps while step < warmup_steps, else 1
//   constant:    1
//   linear:      1 - (1 - min_scale) * t / decay_steps, then min_scale
//   cosine:      min_scale + (1 - min_scale) * (1 + cos(pi * t / decay_steps)) / 2,
//                then min_scale (Loshchilov & Hutter's SGDR without restarts)
//   exponential: max(min_scale, decay_rate ^ (t / decay_steps))
//                (tf.compat.v1.train.exponential_decay, staircase=false)
// with t = max(0, step - warmup_steps). `step` counts optimizer steps (one
// per push; with gradient accumulation, one per k micro-batches), from 0.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace brook::trainer {

enum class LrDecay { kConstant, kLinear, kCosine, kExponential };

struct LrSchedule {
  int64_t warmup_steps = 0;
  LrDecay decay = LrDecay::kConstant;
  int64_t decay_steps = 0;  // linear, cosine, exponential: > 0
  double decay_rate = 0.5;  // exponential: in (0, 1]
  double min_scale = 0.0;   // linear, cosine, exponential: in [0, 1]

  // InvalidArgument naming the field and what is allowed.
  absl::Status Validate() const;
  // The multiplier at optimizer step `step` (>= 0): in (0, 1] after the
  // first step for every valid schedule, except that min_scale 0 lets a
  // linear or cosine decay reach 0 -- the PS refuses a scale of 0, so
  // Scale() never returns less than kMinScale.
  float Scale(int64_t step) const;

  // The smallest multiplier Scale() returns (a finite, positive scale is
  // what the PS accepts).
  static constexpr float kMinScale = 1e-6f;
};

// "constant" | "linear" | "cosine" | "exponential".
absl::StatusOr<LrDecay> ParseLrDecay(std::string_view name);
std::string_view LrDecayName(LrDecay decay);

}  // namespace brook::trainer
