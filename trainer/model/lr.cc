// Logistic regression (or linear regression with loss: mse):
//   logit = bias + dense . w + sum over inputs i of pool_i(dim-1 rows)
// Each id's weight is a dim-1 row of its table; inputs sharing a table share
// weights. Variables: "wide/dense_w" (dense_width x 1, when there are dense
// columns) and "bias" (1), both starting at zero.
#include "common/status_macros.h"
#include "trainer/model/internal/model_base.h"

namespace brook::trainer::internal {
namespace {

class LrModel final : public ModelBase {
 public:
  LrModel(const ModelSpec& spec, Backend* backend) : ModelBase(spec, backend) {
    if (layout_.dense_width > 0) {
      dense_w_ = AddVariable("wide/dense_w", {layout_.dense_width, 1}, Zeros());
    }
    bias_ = AddVariable("bias", {1}, Zeros());
  }

 private:
  absl::Status Forward(bool train) override {
    RETURN_IF_ERROR(backend()->Fill(0.0f, batch(), 0, logits()));
    RETURN_IF_ERROR(WideForward(this, dense_w_, /*use_wide_tables=*/false, logits()));
    return backend()->BiasActivation(Activation::kNone, batch(), 1, param(bias_), logits());
  }

  absl::Status Backward() override {
    RETURN_IF_ERROR(WideBackward(this, dense_w_, /*use_wide_tables=*/false));
    return backend()->BiasBackward(batch(), 1, d_logits(), true, param_grad(bias_));
  }

  int dense_w_ = -1;
  int bias_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateLr(const ModelSpec& spec, Backend* backend) {
  return std::unique_ptr<Model>(new LrModel(spec, backend));
}

}  // namespace brook::trainer::internal
