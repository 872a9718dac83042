#include "ps/internal/dense_variable.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/initializer.h"

namespace brook::ps::internal {

absl::StatusOr<std::unique_ptr<DenseVariable>> DenseVariable::Create(const DenseOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, CreateOptimizer(options.optimizer));
  return std::unique_ptr<DenseVariable>(new DenseVariable(options, std::move(optimizer)));
}

DenseVariable::DenseVariable(const DenseOptions& options, std::unique_ptr<Optimizer> optimizer)
    : options_(options), n_(options.num_floats()), optimizer_(std::move(optimizer)) {
  WriterLock lock(&mu_);
  weights_.resize(n_);
  slots_.resize(optimizer_->SlotFloats(static_cast<int>(n_)));
  // A function of the seed alone (the trainer derives it from the job's seed
  // and the variable's name in the model), never of the name on the PS: that
  // holds the job id, and a job's model must not depend on its id.
  Initializer(options.initializer, options.seed).Fill(0, absl::MakeSpan(weights_));
  optimizer_->InitSlots(absl::MakeSpan(slots_));
}

absl::Status DenseVariable::CheckPullSize(size_t floats) const {
  if (floats == n_) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("dense variable '", options_.name, "' has ", n_,
                                                 " floats; pull buffer has ", floats));
}

absl::Status DenseVariable::Pull(absl::Span<float> out) const {
  if (absl::Status s = CheckPullSize(out.size()); !s.ok()) return s;
  ReaderLock lock(&mu_);
  std::memcpy(out.data(), weights_.data(), n_ * sizeof(float));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> DenseVariable::Check(absl::Span<const float> grads) {
  if (grads.size() != n_) {
    return absl::InvalidArgumentError(absl::StrCat("dense variable '", options_.name, "' has ", n_,
                                                   " floats; push has ", grads.size()));
  }
  uint64_t nonfinite = 0;
  for (float g : grads) nonfinite += std::isfinite(g) ? 0 : 1;
  if (nonfinite > 0 && options_.bad_gradient == BadGradientPolicy::kReject) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return absl::InvalidArgumentError(absl::StrCat("dense variable '", options_.name,
                                                   "': push has ", nonfinite,
                                                   " NaN/Inf gradient values; rejected"));
  }
  return nonfinite;
}

uint64_t DenseVariable::Apply(absl::Span<const float> grads, uint64_t nonfinite, float lr_scale,
                              absl::FunctionRef<uint64_t()> logged) {
  WriterLock lock(&mu_);
  absl::Span<const float> g = grads;
  if (nonfinite > 0) {
    scratch_.resize(n_);
    for (size_t i = 0; i < n_; ++i) scratch_[i] = std::isfinite(grads[i]) ? grads[i] : 0.0f;
    g = scratch_;
    rejected_.fetch_add(nonfinite, std::memory_order_relaxed);
  }
  optimizer_->Apply(absl::MakeSpan(weights_), absl::MakeSpan(slots_), g, lr_scale);
  pushes_.fetch_add(1, std::memory_order_relaxed);
  return logged();
}

void DenseVariable::Export(std::vector<float>* weights, std::vector<float>* slots) const {
  ReaderLock lock(&mu_);
  *weights = weights_;
  *slots = slots_;
}

absl::Status DenseVariable::Import(absl::Span<const float> weights, absl::Span<const float> slots) {
  WriterLock lock(&mu_);
  if (weights.size() != weights_.size() || slots.size() != slots_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dense variable '", options_.name, "': checkpoint holds ", weights.size(), " values and ",
        slots.size(), " slot floats, the variable has ", weights_.size(), " and ", slots_.size()));
  }
  std::copy(weights.begin(), weights.end(), weights_.begin());
  std::copy(slots.begin(), slots.end(), slots_.begin());
  return absl::OkStatus();
}

absl::Status DenseVariable::Assign(absl::Span<const float> values) {
  if (values.size() != n_) {
    return absl::InvalidArgumentError(absl::StrCat("dense variable '", options_.name,
                                                   "': assign of ", values.size(),
                                                   " values, the variable has ", n_));
  }
  WriterLock lock(&mu_);
  std::copy(values.begin(), values.end(), weights_.begin());
  return absl::OkStatus();
}

DenseStats DenseVariable::Stats() const {
  DenseStats s;
  s.name = options_.name;
  s.num_floats = n_;
  s.pushes = pushes_.load(std::memory_order_relaxed);
  s.rejected_gradients = rejected_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace brook::ps::internal
