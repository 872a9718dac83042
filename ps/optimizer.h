// The optimizer plug-in interface, in the style of rocksdb's MergeOperator:
// the Table decides *when* (under the row's stripe lock, once per row of an
// accepted push), the Optimizer decides *what* (the new weights and slots).
//
// An Optimizer is immutable after creation and its Apply is stateless between
// calls, so one instance serves every row of a table from any number of
// threads at once (different rows concurrently; the caller serializes updates
// of the same row). Apply never allocates, never blocks, and
// EXCEPTIONS MUST NOT BE THROWN ACROSS Apply: Brook builds and calls it as
// noexcept code on the PS hot path.
//
// Row layout: `weights` (dim floats) and `slots` (SlotFloats(dim) floats)
// live side by side in the row arena; slots start as InitSlots left them.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/options.h"

namespace brook::ps {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // A short name for logs and errors ("sgd", "adagrad", "adam", "ftrl").
  virtual const char* Name() const = 0;

  // Floats of slot state kept per row of `dim` weights.
  virtual int SlotFloats(int dim) const = 0;

  // Writes the slot state of a fresh row (e.g. Adagrad's initial
  // accumulator). slots.size() == SlotFloats(dim).
  virtual void InitSlots(absl::Span<float> slots) const = 0;

  // Updates one row in place from its gradient, with the learning rate
  // multiplied by `lr_scale` (the push's schedule factor): the result equals
  // an optimizer configured with learning_rate = lr * lr_scale (one float
  // multiply), so a scale of 1 changes nothing.
  // REQUIRES: grad.size() == weights.size(); slots.size() ==
  //   SlotFloats(weights.size()); grad values finite (the Table filters them);
  //   lr_scale finite and > 0 (the ParameterServer checks it).
  virtual void Apply(absl::Span<float> weights, absl::Span<float> slots,
                     absl::Span<const float> grad, float lr_scale) const = 0;
};

// Builds the optimizer `options` describes. INVALID_ARGUMENT for an unknown
// kind. Hyper-parameters are assumed validated (TableOptions::Validate).
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerOptions& options);

}  // namespace brook::ps
