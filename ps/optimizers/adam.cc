#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ps/optimizers/optimizers.h"

namespace brook::ps::optimizers {

// Slot layout: m[dim] | v[dim] | t (uint32 bits in one float).

void Adam::InitSlots(absl::Span<float> slots) const {
  std::fill(slots.begin(), slots.end(), 0.0f);  // m = v = 0; t = 0 (all-zero bits)
}

void Adam::Apply(absl::Span<float> w, absl::Span<float> slots, absl::Span<const float> g,
                 float lr_scale) const {
  const float lr = lr_ * lr_scale;
  const size_t n = w.size();
  float* __restrict wp = w.data();
  float* __restrict m = slots.data();
  float* __restrict v = slots.data() + n;
  const float* __restrict gp = g.data();

  uint32_t t;
  std::memcpy(&t, slots.data() + 2 * n, sizeof(t));
  if (t != UINT32_MAX) ++t;  // saturates; beta^t is 0 in float long before
  std::memcpy(slots.data() + 2 * n, &t, sizeof(t));

  // Bias correction in double (pow of a float beta to a large t loses bits in
  // float), then rounded once, as TF feeds lr_t into its float kernel.
  const double b1t = std::pow(static_cast<double>(b1_), static_cast<double>(t));
  const double b2t = std::pow(static_cast<double>(b2_), static_cast<double>(t));
  const float lr_t = static_cast<float>(lr * std::sqrt(1.0 - b2t) / (1.0 - b1t));
  const float one_minus_b1 = 1.0f - b1_;
  const float one_minus_b2 = 1.0f - b2_;
  for (size_t i = 0; i < n; ++i) {
    // TF's form: m += (g - m) * (1 - beta1), algebraically b1 m + (1-b1) g.
    m[i] += (gp[i] - m[i]) * one_minus_b1;
    v[i] += (gp[i] * gp[i] - v[i]) * one_minus_b2;
    wp[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps_);
  }
}

}  // namespace brook::ps::optimizers
