// DeepFM (Guo et al. 2017):
//   logit = first order + second order + deep
//   first order  = dense . w + sum over inputs i of pool_i(rows of "<table>_wide")
//   second order = FM over the F pooled embeddings e_1..e_F (all of dim D):
//                  sum over i < j of <e_i, e_j>
//   deep         = MLP([dense | e_1 | ... | e_F]), as in wide_deep
// The embeddings are shared by the FM and the deep part, as in the paper.
// Dense columns enter the first-order and deep parts, not the FM.
// Variables: "wide/dense_w" (when dense_width > 0), "deep/w<l>", "deep/b<l>".
#include <memory>

#include "common/hash.h"
#include "common/status_macros.h"
#include "trainer/model/internal/model_base.h"

namespace brook::trainer::internal {
namespace {

class DeepFmModel final : public ModelBase {
 public:
  DeepFmModel(const ModelSpec& spec, Backend* backend) : ModelBase(spec, backend) {
    const int64_t nd = layout_.dense_width;
    if (nd > 0) dense_w_ = AddVariable("wide/dense_w", {nd, 1}, Zeros());
    fields_ = static_cast<int64_t>(layout_.inputs.size());
    dim_ = fields_ > 0 ? layout_.inputs[0].dim : 0;  // Validate: all equal
    width_ = nd + fields_ * dim_;
    std::vector<int> widths = spec.hidden;
    widths.push_back(1);
    deep_ = std::make_unique<Mlp>(this, "deep", width_, widths, spec.activation,
                                  /*last_linear=*/true, spec.dropout);
  }

 private:
  absl::Status Forward(bool train) override {
    Backend* be = backend();
    const int64_t n = batch();
    const int64_t nd = layout_.dense_width;
    const int64_t fd = fields_ * dim_;
    // e: n x F x D, the pooled embeddings side by side.
    RETURN_IF_ERROR(Reserve(&e_, n * fd));
    for (size_t i = 0; i < layout_.inputs.size(); ++i) {
      const InputLayout& in = layout_.inputs[i];
      RETURN_IF_ERROR(be->PoolForward(in.combiner, n, dim_, offsets(i), indices(i), rows(in.table),
                                      num_rows(in.table), e_.get(), fd,
                                      static_cast<int64_t>(i) * dim_, false));
    }
    RETURN_IF_ERROR(Reserve(&deep_in_, n * width_));
    if (nd > 0)
      RETURN_IF_ERROR(be->Copy2D(n, nd, dense(), nd, 0, deep_in_.get(), width_, 0, false));
    if (fd > 0) RETURN_IF_ERROR(be->Copy2D(n, fd, *e_, fd, 0, deep_in_.get(), width_, nd, false));
    RETURN_IF_ERROR(deep_->Forward(*deep_in_, train, Mix64(step_seed(), 1)));
    RETURN_IF_ERROR(be->Copy2D(n, 1, deep_->output(), 1, 0, logits(), 1, 0, false));
    if (fd > 0) RETURN_IF_ERROR(be->FmForward(n, fields_, dim_, *e_, true, logits()));
    return WideForward(this, dense_w_, /*use_wide_tables=*/true, logits());
  }

  absl::Status Backward() override {
    Backend* be = backend();
    const int64_t n = batch();
    const int64_t nd = layout_.dense_width;
    const int64_t fd = fields_ * dim_;
    RETURN_IF_ERROR(be->Copy2D(n, 1, d_logits(), 1, 0, deep_->output_grad(), 1, 0, false));
    RETURN_IF_ERROR(Reserve(&d_deep_in_, n * width_));
    RETURN_IF_ERROR(deep_->Backward(*deep_in_, d_deep_in_.get()));
    if (fd > 0) {
      // d e = FM part + the embedding columns of the deep input's gradient.
      RETURN_IF_ERROR(Reserve(&d_e_, n * fd));
      RETURN_IF_ERROR(be->FmBackward(n, fields_, dim_, *e_, d_logits(), d_e_.get()));
      RETURN_IF_ERROR(be->Copy2D(n, fd, *d_deep_in_, width_, nd, d_e_.get(), fd, 0, true));
      for (size_t i = 0; i < layout_.inputs.size(); ++i) {
        const InputLayout& in = layout_.inputs[i];
        RETURN_IF_ERROR(be->PoolBackward(in.combiner, n, dim_, offsets(i), indices(i), *d_e_, fd,
                                         static_cast<int64_t>(i) * dim_, row_grad(in.table),
                                         num_rows(in.table)));
      }
    }
    return WideBackward(this, dense_w_, /*use_wide_tables=*/true);
  }

  int dense_w_ = -1;
  int64_t fields_ = 0, dim_ = 0, width_ = 0;
  std::unique_ptr<Mlp> deep_;
  std::unique_ptr<Buffer> e_, d_e_, deep_in_, d_deep_in_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateDeepFm(const ModelSpec& spec, Backend* backend) {
  return std::unique_ptr<Model>(new DeepFmModel(spec, backend));
}

}  // namespace brook::trainer::internal
