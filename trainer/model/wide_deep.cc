// Wide & Deep (Cheng et al. 2016):
//   logit = wide + deep
//   wide  = dense . w + sum over inputs i of pool_i(rows of "<table>_wide")
//   deep  = MLP([dense | pool_1(emb) | ... | pool_F(emb)]), hidden widths
//           model.hidden with model.activation and dropout, then a linear
//           layer to one output.
// Variables: "wide/dense_w" (dense_width x 1, zeros; when dense_width > 0),
// then "deep/w<l>", "deep/b<l>" per layer.
#include <memory>

#include "common/hash.h"
#include "common/status_macros.h"
#include "trainer/model/internal/model_base.h"

namespace brook::trainer::internal {
namespace {

class WideDeepModel final : public ModelBase {
 public:
  WideDeepModel(const ModelSpec& spec, Backend* backend) : ModelBase(spec, backend) {
    const int64_t nd = layout_.dense_width;
    if (nd > 0) dense_w_ = AddVariable("wide/dense_w", {nd, 1}, Zeros());
    width_ = nd;
    for (const InputLayout& in : layout_.inputs) {
      columns_.push_back(width_);
      width_ += in.dim;
    }
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
    RETURN_IF_ERROR(Reserve(&deep_in_, n * width_));
    if (nd > 0)
      RETURN_IF_ERROR(be->Copy2D(n, nd, dense(), nd, 0, deep_in_.get(), width_, 0, false));
    for (size_t i = 0; i < layout_.inputs.size(); ++i) {
      const InputLayout& in = layout_.inputs[i];
      RETURN_IF_ERROR(be->PoolForward(in.combiner, n, in.dim, offsets(i), indices(i),
                                      rows(in.table), num_rows(in.table), deep_in_.get(), width_,
                                      columns_[i], false));
    }
    RETURN_IF_ERROR(deep_->Forward(*deep_in_, train, Mix64(step_seed(), 1)));
    RETURN_IF_ERROR(be->Copy2D(n, 1, deep_->output(), 1, 0, logits(), 1, 0, false));
    return WideForward(this, dense_w_, /*use_wide_tables=*/true, logits());
  }

  absl::Status Backward() override {
    Backend* be = backend();
    const int64_t n = batch();
    RETURN_IF_ERROR(be->Copy2D(n, 1, d_logits(), 1, 0, deep_->output_grad(), 1, 0, false));
    RETURN_IF_ERROR(Reserve(&d_deep_in_, n * width_));
    RETURN_IF_ERROR(deep_->Backward(*deep_in_, d_deep_in_.get()));
    for (size_t i = 0; i < layout_.inputs.size(); ++i) {
      const InputLayout& in = layout_.inputs[i];
      RETURN_IF_ERROR(be->PoolBackward(in.combiner, n, in.dim, offsets(i), indices(i), *d_deep_in_,
                                       width_, columns_[i], row_grad(in.table),
                                       num_rows(in.table)));
    }
    return WideBackward(this, dense_w_, /*use_wide_tables=*/true);
  }

  int dense_w_ = -1;
  int64_t width_ = 0;             // deep input width
  std::vector<int64_t> columns_;  // per input: first column in the deep input
  std::unique_ptr<Mlp> deep_;
  std::unique_ptr<Buffer> deep_in_, d_deep_in_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateWideDeep(const ModelSpec& spec, Backend* backend) {
  return std::unique_ptr<Model>(new WideDeepModel(spec, backend));
}

}  // namespace brook::trainer::internal
