#include "ps/optimizer.h"

#include "absl/strings/str_cat.h"
#include "ps/optimizers/optimizers.h"

namespace brook::ps {

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerOptions& options) {
  switch (options.kind) {
    case OptimizerKind::kSgd:
      return std::make_unique<optimizers::Sgd>(options);
    case OptimizerKind::kAdagrad:
      return std::make_unique<optimizers::Adagrad>(options);
    case OptimizerKind::kAdam:
      return std::make_unique<optimizers::Adam>(options);
    case OptimizerKind::kFtrl:
      return std::make_unique<optimizers::Ftrl>(options);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer kind ", static_cast<int>(options.kind)));
}

}  // namespace brook::ps
