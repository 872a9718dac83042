#include "trainer/model/internal/model_base.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/status_macros.h"

namespace brook::trainer::internal {
namespace {

absl::Status StepError(absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("Model::Step: ", msg));
}

}  // namespace

ps::InitializerOptions GlorotUniform(int64_t fan_in, int64_t fan_out) {
  ps::InitializerOptions o;
  o.kind = ps::InitializerKind::kUniform;
  const float limit = static_cast<float>(std::sqrt(6.0 / static_cast<double>(fan_in + fan_out)));
  o.low = -limit;
  o.high = limit;
  return o;
}

ps::InitializerOptions Zeros() {
  ps::InitializerOptions o;
  o.kind = ps::InitializerKind::kZeros;
  return o;
}

int ModelBase::AddVariable(std::string name, std::vector<int64_t> shape,
                           ps::InitializerOptions init) {
  variables_.push_back(DenseVariableSpec{std::move(name), std::move(shape), init});
  return static_cast<int>(variables_.size()) - 1;
}

absl::Status ModelBase::Reserve(std::unique_ptr<Buffer>* b, size_t n, DType dtype) {
  if (*b != nullptr && (*b)->dtype() == dtype && (*b)->size() >= n) return absl::OkStatus();
  b->reset();  // free first: the old and new buffers need not coexist
  ASSIGN_OR_RETURN(*b, backend_->Alloc(dtype, n));
  return absl::OkStatus();
}

absl::Status ModelBase::CheckStep(const ModelBatch& batch,
                                  absl::Span<const absl::Span<const float>> rows,
                                  absl::Span<const absl::Span<const float>> params) const {
  const int64_t n = batch.batch_size;
  if (n < 0) return StepError(absl::StrCat("batch_size ", n));
  if (batch.labels.size() != static_cast<size_t>(n)) {
    return StepError(absl::StrCat(batch.labels.size(), " labels for batch_size ", n));
  }
  if (batch.dense_width != layout_.dense_width ||
      batch.dense.size() != static_cast<size_t>(n) * layout_.dense_width) {
    return StepError(absl::StrCat("dense is ", batch.dense.size(), " floats of width ",
                                  batch.dense_width, "; the model wants ", n, " x ",
                                  layout_.dense_width));
  }
  if (batch.tables.size() != layout_.tables.size()) {
    return StepError(absl::StrCat("batch has ", batch.tables.size(), " tables, the model ",
                                  layout_.tables.size()));
  }
  for (size_t t = 0; t < layout_.tables.size(); ++t) {
    const TableKeys& tk = batch.tables[t];
    const TableSpec& ts = layout_.tables[t];
    if (tk.table != ts.name || tk.dim != ts.dim) {
      return StepError(absl::StrCat("table ", t, " is \"", tk.table, "\" (dim ", tk.dim,
                                    "), the model wants \"", ts.name, "\" (dim ", ts.dim, ")"));
    }
    if (ts.shares_keys_with >= 0 &&
        tk.unique_keys.size() != batch.tables[ts.shares_keys_with].unique_keys.size()) {
      return StepError(absl::StrCat("table \"", ts.name, "\" must have the keys of table \"",
                                    layout_.tables[ts.shares_keys_with].name, "\""));
    }
  }
  if (batch.sparse.size() != layout_.inputs.size()) {
    return StepError(absl::StrCat("batch has ", batch.sparse.size(), " sparse inputs, the model ",
                                  layout_.inputs.size()));
  }
  for (size_t i = 0; i < layout_.inputs.size(); ++i) {
    const SparseInput& s = batch.sparse[i];
    const InputLayout& in = layout_.inputs[i];
    if (s.table != in.table || s.wide_table != in.wide_table || s.combiner != in.combiner) {
      return StepError(absl::StrCat("sparse input ", i, " does not match the model's layout"));
    }
    if (s.offsets.size() != static_cast<size_t>(n) + 1 || s.offsets[0] != 0) {
      return StepError(absl::StrCat("sparse input ", i, " has ", s.offsets.size(),
                                    " offsets for batch_size ", n));
    }
    for (int64_t b = 0; b < n; ++b) {
      if (s.offsets[b + 1] < s.offsets[b]) {
        return StepError(absl::StrCat("sparse input ", i, ": offsets decrease at example ", b));
      }
    }
    if (s.offsets.back() != s.rows.size()) {
      return StepError(absl::StrCat("sparse input ", i, ": offsets end at ", s.offsets.back(),
                                    " but there are ", s.rows.size(), " rows"));
    }
    const size_t unique = batch.tables[in.table].unique_keys.size();
    for (uint32_t r : s.rows) {
      if (r >= unique) {
        return StepError(absl::StrCat("sparse input ", i, ": row ", r, " >= ", unique,
                                      " unique keys of table \"", layout_.tables[in.table].name,
                                      "\""));
      }
    }
  }
  if (rows.size() != layout_.tables.size()) {
    return StepError(
        absl::StrCat(rows.size(), " row spans for ", layout_.tables.size(), " tables"));
  }
  for (size_t t = 0; t < rows.size(); ++t) {
    const size_t want = batch.tables[t].unique_keys.size() * layout_.tables[t].dim;
    if (rows[t].size() != want) {
      return StepError(absl::StrCat("rows of table \"", layout_.tables[t].name, "\" have ",
                                    rows[t].size(), " floats, want ", want, " (",
                                    batch.tables[t].unique_keys.size(), " keys x dim ",
                                    layout_.tables[t].dim, ")"));
    }
  }
  if (params.size() != variables_.size()) {
    return StepError(
        absl::StrCat(params.size(), " params for ", variables_.size(), " dense variables"));
  }
  for (size_t v = 0; v < params.size(); ++v) {
    if (static_cast<int64_t>(params[v].size()) != variables_[v].num_floats()) {
      return StepError(absl::StrCat("dense variable \"", variables_[v].name, "\" has ",
                                    params[v].size(), " floats, want ",
                                    variables_[v].num_floats()));
    }
  }
  return absl::OkStatus();
}

absl::Status ModelBase::Step(const ModelBatch& batch,
                             absl::Span<const absl::Span<const float>> rows,
                             absl::Span<const absl::Span<const float>> params, bool train,
                             StepResult* out) {
  RETURN_IF_ERROR(CheckStep(batch, rows, params));
  const int64_t n = batch.batch_size;
  out->loss_sum = 0;
  out->predictions.assign(n, 0.0f);
  out->table_grads.clear();
  out->dense_grads.clear();
  if (train) {
    out->table_grads.resize(layout_.tables.size());
    for (size_t t = 0; t < layout_.tables.size(); ++t) {
      out->table_grads[t].assign(rows[t].size(), 0.0f);
    }
    out->dense_grads.resize(variables_.size());
    for (size_t v = 0; v < variables_.size(); ++v) out->dense_grads[v].assign(params[v].size(), 0);
  }
  if (n == 0) return absl::OkStatus();

  batch_ = n;
  step_seed_ = Mix64(spec_.seed, batch.step);
  Backend* be = backend_;
  RETURN_IF_ERROR(be->BeginSpan());
  RETURN_IF_ERROR(Reserve(&dense_, batch.dense.size()));
  RETURN_IF_ERROR(be->Upload(batch.dense, dense_.get(), 0));
  RETURN_IF_ERROR(Reserve(&labels_, n));
  RETURN_IF_ERROR(be->Upload(batch.labels, labels_.get(), 0));
  RETURN_IF_ERROR(Reserve(&logits_, n));
  RETURN_IF_ERROR(Reserve(&d_logits_, n));
  RETURN_IF_ERROR(Reserve(&predictions_, n));

  const size_t inputs = layout_.inputs.size();
  offsets_.resize(inputs);
  indices_.resize(inputs);
  for (size_t i = 0; i < inputs; ++i) {
    const SparseInput& s = batch.sparse[i];
    RETURN_IF_ERROR(Reserve(&offsets_[i], s.offsets.size(), DType::kUint32));
    RETURN_IF_ERROR(be->Upload(s.offsets, offsets_[i].get(), 0));
    RETURN_IF_ERROR(Reserve(&indices_[i], s.rows.size(), DType::kUint32));
    RETURN_IF_ERROR(be->Upload(s.rows, indices_[i].get(), 0));
  }
  const size_t tables = layout_.tables.size();
  rows_.resize(tables);
  row_grads_.resize(tables);
  num_rows_.resize(tables);
  for (size_t t = 0; t < tables; ++t) {
    num_rows_[t] = static_cast<int64_t>(batch.tables[t].unique_keys.size());
    RETURN_IF_ERROR(Reserve(&rows_[t], rows[t].size()));
    RETURN_IF_ERROR(be->Upload(rows[t], rows_[t].get(), 0));
    if (train) {
      RETURN_IF_ERROR(Reserve(&row_grads_[t], rows[t].size()));
      RETURN_IF_ERROR(be->Fill(0.0f, rows[t].size(), 0, row_grads_[t].get()));
    }
  }
  params_.resize(variables_.size());
  param_grads_.resize(variables_.size());
  for (size_t v = 0; v < variables_.size(); ++v) {
    RETURN_IF_ERROR(Reserve(&params_[v], params[v].size()));
    RETURN_IF_ERROR(be->Upload(params[v], params_[v].get(), 0));
    if (train) {
      RETURN_IF_ERROR(Reserve(&param_grads_[v], params[v].size()));
      RETURN_IF_ERROR(be->Fill(0.0f, params[v].size(), 0, param_grads_[v].get()));
    }
  }

  RETURN_IF_ERROR(Forward(train));
  ASSIGN_OR_RETURN(out->loss_sum,
                   be->Loss(spec_.loss, n, *logits_, *labels_, 1.0f / static_cast<float>(n),
                            predictions_.get(), train ? d_logits_.get() : nullptr));
  if (train) {
    RETURN_IF_ERROR(Backward());
    for (size_t t = 0; t < tables; ++t) {
      RETURN_IF_ERROR(be->Download(*row_grads_[t], 0, absl::MakeSpan(out->table_grads[t])));
    }
    for (size_t v = 0; v < variables_.size(); ++v) {
      RETURN_IF_ERROR(be->Download(*param_grads_[v], 0, absl::MakeSpan(out->dense_grads[v])));
    }
  }
  RETURN_IF_ERROR(be->Download(*predictions_, 0, absl::MakeSpan(out->predictions)));
  return be->EndSpan();
}

// ---- Mlp.

Mlp::Mlp(ModelBase* model, const std::string& prefix, int64_t in, const std::vector<int>& widths,
         Activation act, bool last_linear, float dropout)
    : model_(model), in_(in), dropout_(dropout) {
  int64_t prev = in;
  for (size_t l = 0; l < widths.size(); ++l) {
    Layer layer;
    layer.in = prev;
    layer.out = widths[l];
    const bool last = l + 1 == widths.size();
    layer.act = (last && last_linear) ? Activation::kNone : act;
    layer.dropout = dropout > 0 && !(last && last_linear);
    layer.w = model->AddVariable(absl::StrCat(prefix, "/w", l), {layer.in, layer.out},
                                 GlorotUniform(layer.in, layer.out));
    layer.b = model->AddVariable(absl::StrCat(prefix, "/b", l), {layer.out}, Zeros());
    prev = layer.out;
    layers_.push_back(std::move(layer));
  }
}

const Buffer& Mlp::output() const { return layers_.back().output(); }

absl::Status Mlp::Forward(const Buffer& x, bool train, uint64_t seed) {
  Backend* be = model_->backend();
  const int64_t n = model_->batch();
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& layer = layers_[l];
    const Buffer& input = l == 0 ? x : layers_[l - 1].output();
    const size_t size = static_cast<size_t>(n * layer.out);
    RETURN_IF_ERROR(model_->Reserve(&layer.a, size));
    RETURN_IF_ERROR(model_->Reserve(&layer.grad, size));
    RETURN_IF_ERROR(be->Gemm(false, false, n, layer.out, layer.in, 1.0f, input,
                             model_->param(layer.w), 0.0f, layer.a.get()));
    RETURN_IF_ERROR(
        be->BiasActivation(layer.act, n, layer.out, model_->param(layer.b), layer.a.get()));
    layer.dropped = train && layer.dropout;
    if (layer.dropped) {
      RETURN_IF_ERROR(model_->Reserve(&layer.h, size));
      RETURN_IF_ERROR(model_->Reserve(&layer.mask, size));
      RETURN_IF_ERROR(
          be->Copy2D(1, static_cast<int64_t>(size), *layer.a, 0, 0, layer.h.get(), 0, 0, false));
      RETURN_IF_ERROR(be->Dropout(static_cast<int64_t>(size), dropout_, Mix64(seed, l),
                                  layer.h.get(), layer.mask.get()));
    }
  }
  return absl::OkStatus();
}

absl::Status Mlp::Backward(const Buffer& x, Buffer* dx) {
  Backend* be = model_->backend();
  const int64_t n = model_->batch();
  for (size_t l = layers_.size(); l-- > 0;) {
    Layer& layer = layers_[l];
    Buffer* g = layer.grad.get();  // d(loss)/d(output of layer l)
    if (layer.dropped) RETURN_IF_ERROR(be->Mul(n * layer.out, *layer.mask, g));
    RETURN_IF_ERROR(be->ActivationBackward(layer.act, n * layer.out, *layer.a, g));
    const Buffer& input = l == 0 ? x : layers_[l - 1].output();
    RETURN_IF_ERROR(be->Gemm(true, false, layer.in, layer.out, n, 1.0f, input, *g, 1.0f,
                             model_->param_grad(layer.w)));
    RETURN_IF_ERROR(be->BiasBackward(n, layer.out, *g, true, model_->param_grad(layer.b)));
    Buffer* d_input = l == 0 ? dx : layers_[l - 1].grad.get();
    if (d_input != nullptr) {
      RETURN_IF_ERROR(be->Gemm(false, true, n, layer.in, layer.out, 1.0f, *g,
                               model_->param(layer.w), 0.0f, d_input));
    }
  }
  return absl::OkStatus();
}

// ---- The wide (linear) part.

absl::Status WideForward(ModelBase* m, int dense_w, bool use_wide_tables, Buffer* logits) {
  Backend* be = m->backend();
  const int64_t n = m->batch();
  const int64_t nd = m->layout().dense_width;
  if (dense_w >= 0) {
    RETURN_IF_ERROR(
        be->Gemm(false, false, n, 1, nd, 1.0f, m->dense(), m->param(dense_w), 1.0f, logits));
  }
  for (size_t i = 0; i < m->layout().inputs.size(); ++i) {
    const InputLayout& in = m->layout().inputs[i];
    const int t = use_wide_tables ? in.wide_table : in.table;
    RETURN_IF_ERROR(be->PoolForward(in.combiner, n, 1, m->offsets(i), m->indices(i), m->rows(t),
                                    m->num_rows(t), logits, 1, 0, true));
  }
  return absl::OkStatus();
}

absl::Status WideBackward(ModelBase* m, int dense_w, bool use_wide_tables) {
  Backend* be = m->backend();
  const int64_t n = m->batch();
  const int64_t nd = m->layout().dense_width;
  if (dense_w >= 0) {
    RETURN_IF_ERROR(be->Gemm(true, false, nd, 1, n, 1.0f, m->dense(), m->d_logits(), 1.0f,
                             m->param_grad(dense_w)));
  }
  for (size_t i = 0; i < m->layout().inputs.size(); ++i) {
    const InputLayout& in = m->layout().inputs[i];
    const int t = use_wide_tables ? in.wide_table : in.table;
    RETURN_IF_ERROR(be->PoolBackward(in.combiner, n, 1, m->offsets(i), m->indices(i), m->d_logits(),
                                     1, 0, m->row_grad(t), m->num_rows(t)));
  }
  return absl::OkStatus();
}

}  // namespace brook::trainer::internal
