#include <algorithm>
#include <cmath>

#include "ps/optimizers/optimizers.h"

namespace brook::ps::optimizers {

// Slot layout: accum[dim] | linear[dim].

void Ftrl::InitSlots(absl::Span<float> slots) const {
  const size_t n = slots.size() / 2;
  std::fill(slots.begin(), slots.begin() + n, init_);
  std::fill(slots.begin() + n, slots.end(), 0.0f);
}

void Ftrl::Apply(absl::Span<float> w, absl::Span<float> slots, absl::Span<const float> g,
                 float lr_scale) const {
  const float lr = lr_ * lr_scale;
  const size_t n = w.size();
  float* __restrict wp = w.data();
  float* __restrict accum = slots.data();
  float* __restrict linear = slots.data() + n;
  const float* __restrict gp = g.data();
  const float two_l2 = 2.0f * l2_;
  const float two_shrink = 2.0f * l2_shrinkage_;
  const bool sqrt_case = lr_power_ == -0.5f;  // TF's special case
  const float p = -lr_power_;
  for (size_t i = 0; i < n; ++i) {
    const float gs = gp[i] + two_shrink * wp[i];
    const float new_accum = accum[i] + gp[i] * gp[i];
    const float new_pow = sqrt_case ? std::sqrt(new_accum) : std::pow(new_accum, p);
    const float old_pow = sqrt_case ? std::sqrt(accum[i]) : std::pow(accum[i], p);
    linear[i] += gs - (new_pow - old_pow) / lr * wp[i];
    const float l = linear[i];
    const float y = new_pow / lr + two_l2;
    // TF selects 0 when |linear| <= l1; y > 0 also guards a zero accumulator
    // with l2 = 0 (TF would compute x / 0 there).
    if (std::abs(l) > l1_ && y > 0) {
      const float x = (l > 0 ? l1_ : -l1_) - l;
      wp[i] = x / y;
    } else {
      wp[i] = 0.0f;
    }
    accum[i] = new_accum;
  }
}

}  // namespace brook::ps::optimizers
