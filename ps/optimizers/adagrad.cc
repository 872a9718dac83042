#include <algorithm>
#include <cmath>

#include "ps/optimizers/optimizers.h"

namespace brook::ps::optimizers {

void Adagrad::InitSlots(absl::Span<float> slots) const {
  std::fill(slots.begin(), slots.end(), init_);
}

void Adagrad::Apply(absl::Span<float> w, absl::Span<float> slots, absl::Span<const float> g,
                    float lr_scale) const {
  const float lr = lr_ * lr_scale;
  float* __restrict wp = w.data();
  float* __restrict acc = slots.data();
  const float* __restrict gp = g.data();
  const size_t n = w.size();
  for (size_t i = 0; i < n; ++i) {
    acc[i] += gp[i] * gp[i];
    wp[i] -= lr * gp[i] / (std::sqrt(acc[i]) + eps_);
  }
}

}  // namespace brook::ps::optimizers
