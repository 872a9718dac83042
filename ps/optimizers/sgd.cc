#include "ps/optimizers/optimizers.h"

namespace brook::ps::optimizers {

void Sgd::Apply(absl::Span<float> w, absl::Span<float>, absl::Span<const float> g,
                float lr_scale) const {
  const float lr = lr_ * lr_scale;
  float* __restrict wp = w.data();
  const float* __restrict gp = g.data();
  const size_t n = w.size();
  for (size_t i = 0; i < n; ++i) wp[i] -= lr * gp[i];
}

}  // namespace brook::ps::optimizers
