// DenseVariable: one dense tensor on a PS, pulled and pushed whole, with its
// optimizer's slots beside it. The initial value is the table initializer
// applied to the whole tensor as one row keyed by Hash64(name), so two
// variables with the same seed still start differently.
//
// Thread-safe: pulls share a reader lock; a push holds the writer lock while
// the optimizer runs over the tensor.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/internal/mutex.h"
#include "ps/optimizer.h"
#include "ps/options.h"
#include "ps/parameter_server.h"

namespace brook::ps::internal {

class DenseVariable {
 public:
  // INVALID_ARGUMENT names a bad option.
  static absl::StatusOr<std::unique_ptr<DenseVariable>> Create(const DenseOptions& options);

  const DenseOptions& options() const { return options_; }

  // INVALID_ARGUMENT unless out.size() == num_floats.
  absl::Status Pull(absl::Span<float> out) const ABSL_LOCKS_EXCLUDED(mu_);
  // Pull's one size check (a batch checks every part before it reads any).
  absl::Status CheckPullSize(size_t floats) const;

  // Stage 1: INVALID_ARGUMENT for a size mismatch or (kReject) NaN/Inf, which
  // is counted. Returns the number of non-finite values (kZero zeroes them).
  absl::StatusOr<uint64_t> Check(absl::Span<const float> grads);
  // Stage 2: applies the optimizer with its learning rate x `lr_scale`.
  // REQUIRES: Check(grads) returned `nonfinite`; lr_scale finite and > 0.
  // `logged` runs under the variable's lock after the update, so log order
  // is apply order (it must not block on I/O); returns the log position.
  uint64_t Apply(
      absl::Span<const float> grads, uint64_t nonfinite, float lr_scale = 1.0f,
      absl::FunctionRef<uint64_t()> logged = [] { return uint64_t{0}; }) ABSL_LOCKS_EXCLUDED(mu_);

  // Checkpoint and restore: the weights and the optimizer slots.
  void Export(std::vector<float>* weights, std::vector<float>* slots) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // INVALID_ARGUMENT when the sizes do not match this variable.
  absl::Status Import(absl::Span<const float> weights, absl::Span<const float> slots)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Sets the weights; the slots stay. INVALID_ARGUMENT naming the variable
  // and both sizes when values.size() != num_floats.
  absl::Status Assign(absl::Span<const float> values) ABSL_LOCKS_EXCLUDED(mu_);

  DenseStats Stats() const;

 private:
  DenseVariable(const DenseOptions& options, std::unique_ptr<Optimizer> optimizer);

  const DenseOptions options_;
  const size_t n_;
  const std::unique_ptr<Optimizer> optimizer_;

  mutable RwMutex mu_;
  std::vector<float> weights_ ABSL_GUARDED_BY(mu_);
  std::vector<float> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<float> scratch_ ABSL_GUARDED_BY(mu_);  // zeroed gradient copy

  std::atomic<uint64_t> pushes_{0};
  std::atomic<uint64_t> rejected_{0};
};

}  // namespace brook::ps::internal
