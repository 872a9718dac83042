// Shared machinery of the models: Step's checks, uploads and downloads, the
// per-step backend buffers, and an MLP. A model subclass declares its dense
// variables in its constructor and implements Forward (write logits) and
// Backward (from d_logits, accumulate into the zeroed gradient buffers).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/backend/backend.h"
#include "trainer/model/model.h"

namespace brook::trainer::internal {

class ModelBase : public Model {
 public:
  absl::Status Step(const ModelBatch& batch, absl::Span<const absl::Span<const float>> rows,
                    absl::Span<const absl::Span<const float>> params, bool train,
                    StepResult* out) final;

  // ---- For the model graphs and Mlp, valid inside Forward/Backward.
  Backend* backend() const { return backend_; }
  int64_t batch() const { return batch_; }
  // Seed of this step's dropout masks: Mix64(spec.seed, batch.step).
  uint64_t step_seed() const { return step_seed_; }
  const Buffer& dense() const { return *dense_; }  // batch x dense_width
  const Buffer& labels() const { return *labels_; }
  const Buffer& offsets(int input) const { return *offsets_[input]; }
  const Buffer& indices(int input) const { return *indices_[input]; }
  const Buffer& rows(int table) const { return *rows_[table]; }
  Buffer* row_grad(int table) { return row_grads_[table].get(); }
  int64_t num_rows(int table) const { return num_rows_[table]; }
  const Buffer& param(int v) const { return *params_[v]; }
  Buffer* param_grad(int v) { return param_grads_[v].get(); }
  Buffer* logits() { return logits_.get(); }
  const Buffer& d_logits() const { return *d_logits_; }

  // Declares a dense variable; returns its index.
  int AddVariable(std::string name, std::vector<int64_t> shape, ps::InitializerOptions init);
  // Makes *b a float (or uint32) buffer of at least n elements. Contents are
  // unspecified after growth: callers overwrite or Fill.
  absl::Status Reserve(std::unique_ptr<Buffer>* b, size_t n, DType dtype = DType::kFloat32);

 protected:
  ModelBase(const ModelSpec& spec, Backend* backend) : Model(spec), backend_(backend) {}

  // Writes batch() logits into logits().
  virtual absl::Status Forward(bool train) = 0;
  // Reads d_logits(); adds d(mean loss)/d(.) into row_grad(t) and
  // param_grad(v), which Step zeroed.
  virtual absl::Status Backward() = 0;

 private:
  absl::Status CheckStep(const ModelBatch& batch, absl::Span<const absl::Span<const float>> rows,
                         absl::Span<const absl::Span<const float>> params) const;

  Backend* const backend_;  // borrowed
  // Per step (buffers reused across steps).
  int64_t batch_ = 0;
  uint64_t step_seed_ = 0;
  std::unique_ptr<Buffer> dense_, labels_, logits_, d_logits_, predictions_;
  std::vector<std::unique_ptr<Buffer>> offsets_, indices_;     // per input
  std::vector<std::unique_ptr<Buffer>> rows_, row_grads_;      // per table
  std::vector<int64_t> num_rows_;                              // per table
  std::vector<std::unique_ptr<Buffer>> params_, param_grads_;  // per variable
};

// Glorot/Xavier uniform: U(-l, l), l = sqrt(6 / (fan_in + fan_out)).
ps::InitializerOptions GlorotUniform(int64_t fan_in, int64_t fan_out);
ps::InitializerOptions Zeros();

// A stack of dense layers: h_l = dropout(act_l(h_{l-1} W_l + b_l)), with
// variables "<prefix>/w<l>" (in x out) and "<prefix>/b<l>" (out). Every
// layer uses `act`, except that the last is linear (and never dropped) when
// last_linear. Dropout (training only) follows each activated layer.
class Mlp {
 public:
  Mlp(ModelBase* model, const std::string& prefix, int64_t in, const std::vector<int>& widths,
      Activation act, bool last_linear, float dropout);

  int64_t in() const { return in_; }
  int64_t out() const { return layers_.back().out; }

  // x: batch x in, kept alive and unchanged until Backward.
  absl::Status Forward(const Buffer& x, bool train, uint64_t seed);
  const Buffer& output() const;  // batch x out
  // Where the caller writes d(loss)/d(output) before Backward (batch x out).
  Buffer* output_grad() { return layers_.back().grad.get(); }
  // Adds the weight gradients; writes d(loss)/dx (batch x in) unless dx is null.
  absl::Status Backward(const Buffer& x, Buffer* dx);

 private:
  struct Layer {
    int64_t in = 0, out = 0;
    int w = 0, b = 0;  // variable indices
    Activation act = Activation::kNone;
    bool dropout = false;
    std::unique_ptr<Buffer> a;     // act(x W + b)
    std::unique_ptr<Buffer> h;     // a after dropout (when dropout)
    std::unique_ptr<Buffer> mask;  // dropout mask
    std::unique_ptr<Buffer> grad;  // d(loss)/d(layer output)
    bool dropped = false;          // dropout ran in the last Forward
    const Buffer& output() const { return dropped ? *h : *a; }
  };
  ModelBase* const model_;
  const int64_t in_;
  const float dropout_;
  std::vector<Layer> layers_;
};

// Factories of the four models (one file each).
absl::StatusOr<std::unique_ptr<Model>> CreateLr(const ModelSpec& spec, Backend* backend);
absl::StatusOr<std::unique_ptr<Model>> CreateWideDeep(const ModelSpec& spec, Backend* backend);
absl::StatusOr<std::unique_ptr<Model>> CreateDeepFm(const ModelSpec& spec, Backend* backend);
absl::StatusOr<std::unique_ptr<Model>> CreateDlrm(const ModelSpec& spec, Backend* backend);

// The linear ("wide") part shared by lr, wide_deep and deepfm:
//   logits += dense . w + sum over inputs i of pool_i(rows of table_of(i))
// where table_of is the input's table (lr) or its wide table. dense_w is the
// variable index of w (nd x 1), or -1 when there are no dense columns.
absl::Status WideForward(ModelBase* m, int dense_w, bool use_wide_tables, Buffer* logits);
absl::Status WideBackward(ModelBase* m, int dense_w, bool use_wide_tables);

}  // namespace brook::trainer::internal
