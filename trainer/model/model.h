// Recommender models -- logistic regression, Wide & Deep, DeepFM and a
// DLRM-style model -- as functions of parameters handed in each step. A Model
// owns no persistent weights, which is what lets them live on parameter
// servers: the trainer creates the tables of layout() and the
// dense_variables() on the PS, and per step pulls the rows of
// ModelBatch::tables[t].unique_keys and every dense variable, calls Step, and
// pushes StepResult's gradients for the same keys and variables.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(spec, backend));
//   // rows[t]: unique_keys(t) x dim floats; params[v]: dense_variables()[v].num_floats()
//   StepResult r;
//   RETURN_IF_ERROR(model->Step(batch, rows, params, /*train=*/true, &r));
//
// The models (one file each, see the .cc files for the exact graphs):
//   lr:        logit = bias + dense . w + sum over inputs of pool(dim-1 rows)
//   wide_deep: logit = wide (lr without bias, on the "_wide" tables)
//                      + MLP([dense | pooled embeddings])
//   deepfm:    logit = wide + FM second-order term over the pooled embeddings
//                      + MLP([dense | pooled embeddings])
//   dlrm:      z = bottom MLP(dense) (width = embedding dim); logit = top
//              MLP([z | pairwise dots of {z, pooled embeddings}])
// Hidden layers use ModelSpec::activation and (except dlrm's bottom MLP)
// dropout; output layers are linear. loss: logloss on sigmoid(logit), or mse
// on the logit itself.
//
// Thread-compatible: Step reuses backend buffers between calls, so use one
// Model per compute thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/options.h"
#include "trainer/backend/backend.h"
#include "trainer/model/model_batch.h"
#include "trainer/model/model_spec.h"

namespace brook::trainer {

// A dense variable the trainer creates on the PS. Weights start
// Glorot-uniform (uniform in +-sqrt(6 / (fan_in + fan_out))), biases and the
// linear weights of the wide part at zero.
struct DenseVariableSpec {
  std::string name;  // e.g. "deep/w0", "deep/b0", "wide/dense_w", "bias"
  std::vector<int64_t> shape;
  ps::InitializerOptions init;

  int64_t num_floats() const;
};

struct StepResult {
  // Sum over the batch of the per-example loss (the mean is loss_sum / batch).
  double loss_sum = 0;
  // batch_size values: probabilities (logloss) or raw outputs (mse).
  std::vector<float> predictions;
  // train only. Per table t: unique_keys(t) x dim, d(mean loss)/d(row),
  // summed over every occurrence of the key in the batch. Empty when !train.
  std::vector<std::vector<float>> table_grads;
  // train only. Per dense variable: d(mean loss)/d(value).
  std::vector<std::vector<float>> dense_grads;
};

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // InvalidArgument if `spec` does not Validate(). `backend` must outlive the
  // Model.
  static absl::StatusOr<std::unique_ptr<Model>> Create(const ModelSpec& spec, Backend* backend);

  const ModelSpec& spec() const { return spec_; }
  // The tables (names, dims) a ModelBatch for this model carries, in order.
  const ModelLayout& layout() const { return layout_; }
  const std::vector<DenseVariableSpec>& dense_variables() const { return variables_; }

  // One step on `batch` (built by ModelBatchBuilder from the same spec).
  // rows[t]: the pulled rows of batch.tables[t].unique_keys, in that order
  // (unique x dim floats); params[v]: the values of dense_variables()[v].
  // train=false: forward only (loss and predictions). InvalidArgument,
  // before any compute, if the batch does not fit the layout or a span has
  // the wrong size; a backend error is returned as is. *out is overwritten.
  virtual absl::Status Step(const ModelBatch& batch, absl::Span<const absl::Span<const float>> rows,
                            absl::Span<const absl::Span<const float>> params, bool train,
                            StepResult* out) = 0;

 protected:
  explicit Model(const ModelSpec& spec) : spec_(spec), layout_(spec.Layout()) {}

  // Constant after construction (subclasses fill variables_ in theirs).
  const ModelSpec spec_;
  const ModelLayout layout_;
  std::vector<DenseVariableSpec> variables_;
};

}  // namespace brook::trainer
