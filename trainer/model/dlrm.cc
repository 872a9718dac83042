// DLRM-style model (Naumov et al. 2019):
//   z     = bottom MLP(dense): widths model.bottom then D (the common
//           embedding dim), every layer with model.activation
//   v     = [z, e_1, ..., e_F] (z only when there are dense columns)
//   logit = top MLP([z | <v_i, v_j> for i < j]): widths model.top with
//           model.activation and dropout, then a linear layer to 1
// Variables: "bottom/w<l>", "bottom/b<l>" (when dense_width > 0), then
// "top/w<l>", "top/b<l>".
#include <memory>

#include "common/hash.h"
#include "common/status_macros.h"
#include "trainer/model/internal/model_base.h"

namespace brook::trainer::internal {
namespace {

class DlrmModel final : public ModelBase {
 public:
  DlrmModel(const ModelSpec& spec, Backend* backend) : ModelBase(spec, backend) {
    const int64_t nd = layout_.dense_width;
    fields_ = static_cast<int64_t>(layout_.inputs.size());
    // Validate: all inputs share one dim; without inputs z is embedding_dim wide.
    dim_ = fields_ > 0 ? layout_.inputs[0].dim : spec.embedding_dim;
    if (nd > 0) {
      std::vector<int> widths = spec.bottom;
      widths.push_back(static_cast<int>(dim_));
      bottom_ = std::make_unique<Mlp>(this, "bottom", nd, widths, spec.activation,
                                      /*last_linear=*/false, /*dropout=*/0.0f);
    }
    vectors_ = fields_ + (nd > 0 ? 1 : 0);
    pairs_ = vectors_ * (vectors_ - 1) / 2;
    z_width_ = nd > 0 ? dim_ : 0;
    width_ = z_width_ + pairs_;
    std::vector<int> widths = spec.top;
    widths.push_back(1);
    top_ = std::make_unique<Mlp>(this, "top", width_, widths, spec.activation,
                                 /*last_linear=*/true, spec.dropout);
  }

 private:
  absl::Status Forward(bool train) override {
    Backend* be = backend();
    const int64_t n = batch();
    const int64_t vd = vectors_ * dim_;
    const int64_t first = z_width_ > 0 ? 1 : 0;  // v index of e_1
    RETURN_IF_ERROR(Reserve(&v_, n * vd));
    if (bottom_) {
      RETURN_IF_ERROR(bottom_->Forward(dense(), train, Mix64(step_seed(), 1)));
      RETURN_IF_ERROR(be->Copy2D(n, dim_, bottom_->output(), dim_, 0, v_.get(), vd, 0, false));
    }
    for (size_t i = 0; i < layout_.inputs.size(); ++i) {
      const InputLayout& in = layout_.inputs[i];
      RETURN_IF_ERROR(be->PoolForward(in.combiner, n, dim_, offsets(i), indices(i), rows(in.table),
                                      num_rows(in.table), v_.get(), vd,
                                      (first + static_cast<int64_t>(i)) * dim_, false));
    }
    RETURN_IF_ERROR(Reserve(&inter_, n * pairs_));
    RETURN_IF_ERROR(be->InteractionForward(n, vectors_, dim_, *v_, inter_.get()));
    RETURN_IF_ERROR(Reserve(&top_in_, n * width_));
    if (bottom_) {
      RETURN_IF_ERROR(
          be->Copy2D(n, dim_, bottom_->output(), dim_, 0, top_in_.get(), width_, 0, false));
    }
    if (pairs_ > 0) {
      RETURN_IF_ERROR(
          be->Copy2D(n, pairs_, *inter_, pairs_, 0, top_in_.get(), width_, z_width_, false));
    }
    RETURN_IF_ERROR(top_->Forward(*top_in_, train, Mix64(step_seed(), 2)));
    return be->Copy2D(n, 1, top_->output(), 1, 0, logits(), 1, 0, false);
  }

  absl::Status Backward() override {
    Backend* be = backend();
    const int64_t n = batch();
    const int64_t vd = vectors_ * dim_;
    const int64_t first = z_width_ > 0 ? 1 : 0;
    RETURN_IF_ERROR(be->Copy2D(n, 1, d_logits(), 1, 0, top_->output_grad(), 1, 0, false));
    RETURN_IF_ERROR(Reserve(&d_top_in_, n * width_));
    RETURN_IF_ERROR(top_->Backward(*top_in_, d_top_in_.get()));
    RETURN_IF_ERROR(Reserve(&d_inter_, n * pairs_));
    if (pairs_ > 0) {
      RETURN_IF_ERROR(
          be->Copy2D(n, pairs_, *d_top_in_, width_, z_width_, d_inter_.get(), pairs_, 0, false));
    }
    RETURN_IF_ERROR(Reserve(&d_v_, n * vd));
    RETURN_IF_ERROR(be->InteractionBackward(n, vectors_, dim_, *v_, *d_inter_, d_v_.get()));
    for (size_t i = 0; i < layout_.inputs.size(); ++i) {
      const InputLayout& in = layout_.inputs[i];
      RETURN_IF_ERROR(be->PoolBackward(in.combiner, n, dim_, offsets(i), indices(i), *d_v_, vd,
                                       (first + static_cast<int64_t>(i)) * dim_, row_grad(in.table),
                                       num_rows(in.table)));
    }
    if (bottom_) {
      // z feeds both the interactions and the top MLP directly.
      Buffer* dz = bottom_->output_grad();
      RETURN_IF_ERROR(be->Copy2D(n, dim_, *d_v_, vd, 0, dz, dim_, 0, false));
      RETURN_IF_ERROR(be->Copy2D(n, dim_, *d_top_in_, width_, 0, dz, dim_, 0, true));
      RETURN_IF_ERROR(bottom_->Backward(dense(), nullptr));
    }
    return absl::OkStatus();
  }

  int64_t fields_ = 0, dim_ = 0, vectors_ = 0, pairs_ = 0, z_width_ = 0, width_ = 0;
  std::unique_ptr<Mlp> bottom_, top_;
  std::unique_ptr<Buffer> v_, inter_, top_in_, d_top_in_, d_inter_, d_v_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateDlrm(const ModelSpec& spec, Backend* backend) {
  return std::unique_ptr<Model>(new DlrmModel(spec, backend));
}

}  // namespace brook::trainer::internal
