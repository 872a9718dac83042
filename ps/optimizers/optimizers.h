// The built-in optimizers. Each follows the TensorFlow raw op named on it, so
// hyper-parameters carry over; see ps/optimizer.h for the contract. "lr"
// below is the effective rate learning_rate * lr_scale, rounded to float.
// Arithmetic is in float, as TF's CPU kernels for float variables.
#pragma once

#include "ps/optimizer.h"

namespace brook::ps::optimizers {

// ApplyGradientDescent: w -= lr * g. No slots.
class Sgd final : public Optimizer {
 public:
  explicit Sgd(const OptimizerOptions& o) : lr_(o.learning_rate) {}
  const char* Name() const override { return "sgd"; }
  int SlotFloats(int) const override { return 0; }
  void InitSlots(absl::Span<float>) const override {}
  void Apply(absl::Span<float> w, absl::Span<float> slots, absl::Span<const float> g,
             float lr_scale) const override;

 private:
  const float lr_;
};

// ApplyAdagradV2 (update_slots = true): accum += g^2;
// w -= lr * g / (sqrt(accum) + epsilon). epsilon = 0 is TF1's ApplyAdagrad.
// Slots: accum[dim], starting at initial_accumulator.
class Adagrad final : public Optimizer {
 public:
  explicit Adagrad(const OptimizerOptions& o)
      : lr_(o.learning_rate), init_(o.initial_accumulator), eps_(o.epsilon) {}
  const char* Name() const override { return "adagrad"; }
  int SlotFloats(int dim) const override { return dim; }
  void InitSlots(absl::Span<float> slots) const override;
  void Apply(absl::Span<float> w, absl::Span<float> slots, absl::Span<const float> g,
             float lr_scale) const override;

 private:
  const float lr_, init_, eps_;
};

// ApplyAdam with t = this row's own update count ("lazy Adam"):
//   t += 1; lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t);
//   m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
//   w -= lr_t * m / (sqrt(v) + epsilon).
// TF's dense Adam uses one global step for beta^t; embedding rows are touched
// at different times, so as in TF's LazyAdam / Monolith / HugeCTR each row
// keeps its own t and only rows present in a push are updated (their m and v
// do not decay on steps that skip them).
// Slots: m[dim], v[dim], then t as a uint32 stored in the bits of one float.
class Adam final : public Optimizer {
 public:
  explicit Adam(const OptimizerOptions& o)
      : lr_(o.learning_rate), b1_(o.beta1), b2_(o.beta2), eps_(o.epsilon) {}
  const char* Name() const override { return "adam"; }
  int SlotFloats(int dim) const override { return 2 * dim + 1; }
  void InitSlots(absl::Span<float> slots) const override;
  void Apply(absl::Span<float> w, absl::Span<float> slots, absl::Span<const float> g,
             float lr_scale) const override;

 private:
  const float lr_, b1_, b2_, eps_;
};

// ApplyFtrlV2 (FTRL-Proximal with l2 shrinkage):
//   g_s = g + 2 * l2_shrinkage * w;  n' = n + g^2;
//   z += g_s - (n'^-p - n^-p) / lr * w            (p = lr_power)
//   w = |z| > l1 ? (sign(z) l1 - z) / (n'^-p / lr + 2 l2) : 0;  n = n'.
// lr_power = -0.5 takes TF's sqrt special case; other values use pow.
// Slots: accum n[dim] (starting at initial_accumulator), linear z[dim] (0).
class Ftrl final : public Optimizer {
 public:
  explicit Ftrl(const OptimizerOptions& o)
      : lr_(o.learning_rate),
        init_(o.initial_accumulator),
        l1_(o.l1),
        l2_(o.l2),
        l2_shrinkage_(o.l2_shrinkage),
        lr_power_(o.lr_power) {}
  const char* Name() const override { return "ftrl"; }
  int SlotFloats(int dim) const override { return 2 * dim; }
  void InitSlots(absl::Span<float> slots) const override;
  void Apply(absl::Span<float> w, absl::Span<float> slots, absl::Span<const float> g,
             float lr_scale) const override;

 private:
  const float lr_, init_, l1_, l2_, l2_shrinkage_, lr_power_;
};

}  // namespace brook::ps::optimizers
