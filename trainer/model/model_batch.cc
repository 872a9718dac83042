#include "trainer/model/model_batch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace brook::trainer {
namespace {

absl::Status ColumnError(const std::string& feature, absl::string_view msg) {
  return absl::InvalidArgumentError(
      absl::StrCat("model batch: column of feature \"", feature, "\" ", msg));
}

float Transform(const DenseInputSpec& d, double v) {
  switch (d.transform) {
    case DenseTransform::kNone:
    case DenseTransform::kBucketize:
      return static_cast<float>(v);
    case DenseTransform::kLog1p:
      return static_cast<float>(v >= 0 ? std::log1p(v) : -std::log1p(-v));
    case DenseTransform::kStandardize:
      return static_cast<float>((v - d.mean) / d.stddev);
  }
  return static_cast<float>(v);
}

// The bucket of v: the number of boundaries <= v (TensorFlow's Bucketize).
uint64_t Bucket(const std::vector<double>& boundaries, double v) {
  if (std::isnan(v)) return 0;
  return static_cast<uint64_t>(std::upper_bound(boundaries.begin(), boundaries.end(), v) -
                               boundaries.begin());
}

}  // namespace

absl::StatusOr<ModelBatchBuilder> ModelBatchBuilder::Create(const ModelSpec& spec,
                                                            const input::FeatureSpec& features) {
  RETURN_IF_ERROR(spec.ValidateAgainst(features));
  ModelBatchBuilder b;
  b.spec_ = spec;
  b.features_ = features;
  b.layout_ = spec.Layout();
  for (const DenseInputSpec& d : spec.dense)
    b.dense_columns_.push_back(features.IndexOf(d.feature));
  for (const InputLayout& in : b.layout_.inputs) {
    const std::string& name =
        in.bucketized ? spec.dense[in.source].feature : spec.sparse[in.source].feature;
    b.input_columns_.push_back(features.IndexOf(name));
  }
  b.key_index_.resize(b.layout_.tables.size());
  return b;
}

absl::Status ModelBatchBuilder::CheckBatch(const input::ColumnarBatch& batch) const {
  if (batch.columns.size() != features_.features.size()) {
    return absl::InvalidArgumentError(absl::StrCat("model batch: batch has ", batch.columns.size(),
                                                   " columns, the feature spec ",
                                                   features_.features.size()));
  }
  if (batch.labels.size() != batch.num_rows) {
    return absl::InvalidArgumentError(absl::StrCat("model batch: ", batch.labels.size(),
                                                   " labels for ", batch.num_rows, " rows"));
  }
  if (batch.num_rows > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("model batch: ", batch.num_rows, " rows"));
  }
  for (const DenseInputSpec& d : spec_.dense) {
    if (d.transform == DenseTransform::kStandardize && !d.has_moments) {
      return absl::FailedPreconditionError(
          absl::StrCat("model batch: dense input \"", d.feature,
                       "\" is standardized but has no mean/stddev; give them in the spec or run "
                       "ComputeMoments"));
    }
  }
  // Every column an input reads must hold whole rows.
  auto check = [&](int column) -> absl::Status {
    const input::FeatureSpecEntry& f = features_.features[column];
    const input::Column& c = batch.columns[column];
    if (f.kind == input::FeatureKind::kVarLen) {
      if (c.row_splits.size() != batch.num_rows + 1 || c.row_splits[0] != 0) {
        return ColumnError(f.name, absl::StrCat("has ", c.row_splits.size(), " row splits for ",
                                                batch.num_rows, " rows"));
      }
      for (size_t r = 0; r < batch.num_rows; ++r) {
        if (c.row_splits[r + 1] < c.row_splits[r]) {
          return ColumnError(f.name, absl::StrCat("row splits decrease at row ", r));
        }
      }
      if (c.row_splits.back() != c.ids.size()) {
        return ColumnError(f.name, absl::StrCat("row splits end at ", c.row_splits.back(),
                                                " but there are ", c.ids.size(), " ids"));
      }
      return absl::OkStatus();
    }
    const size_t have = f.type == input::FeatureType::kFloat ? c.floats.size() : c.int64s.size();
    if (have != batch.num_rows * f.length) {
      return ColumnError(f.name, absl::StrCat("has ", have, " values for ", batch.num_rows,
                                              " rows of length ", f.length));
    }
    return absl::OkStatus();
  };
  for (int column : dense_columns_) RETURN_IF_ERROR(check(column));
  for (int column : input_columns_) RETURN_IF_ERROR(check(column));
  // Row indices and offsets are uint32.
  uint64_t ids = 0;
  for (size_t i = 0; i < input_columns_.size(); ++i) {
    const int column = input_columns_[i];
    const input::FeatureSpecEntry& f = features_.features[column];
    const uint64_t n = f.kind == input::FeatureKind::kVarLen
                           ? batch.columns[column].ids.size()
                           : static_cast<uint64_t>(batch.num_rows) * f.length;
    ids += n;
    if (n > std::numeric_limits<uint32_t>::max() || ids > std::numeric_limits<uint32_t>::max()) {
      return ColumnError(f.name, "has more ids than a batch may hold (2^32)");
    }
  }
  return absl::OkStatus();
}

absl::Status ModelBatchBuilder::Build(const input::ColumnarBatch& batch, ModelBatch* out) {
  RETURN_IF_ERROR(CheckBatch(batch));
  const size_t rows = batch.num_rows;
  out->batch_size = static_cast<int>(rows);
  out->labels.assign(batch.labels.begin(), batch.labels.end());

  // Dense matrix.
  out->dense_width = layout_.dense_width;
  out->dense.assign(rows * layout_.dense_width, 0.0f);
  int col = 0;
  for (size_t i = 0; i < spec_.dense.size(); ++i) {
    const DenseInputSpec& d = spec_.dense[i];
    if (d.transform == DenseTransform::kBucketize) continue;
    const input::Column& c = batch.columns[dense_columns_[i]];
    const bool is_float = features_.features[dense_columns_[i]].type == input::FeatureType::kFloat;
    for (size_t r = 0; r < rows; ++r) {
      float* dst = out->dense.data() + r * layout_.dense_width + col;
      for (int j = 0; j < d.length; ++j) {
        const size_t k = r * d.length + j;
        const double v =
            is_float ? static_cast<double>(c.floats[k]) : static_cast<double>(c.int64s[k]);
        dst[j] = Transform(d, v);
      }
    }
    col += d.length;
  }

  // Tables: names and dims; keys are collected below.
  out->tables.resize(layout_.tables.size());
  for (size_t t = 0; t < layout_.tables.size(); ++t) {
    out->tables[t].table = layout_.tables[t].name;
    out->tables[t].dim = layout_.tables[t].dim;
    out->tables[t].unique_keys.clear();
    key_index_[t].clear();
  }

  // Sparse inputs: each key becomes the index of its first occurrence in the
  // table's unique list.
  out->sparse.resize(layout_.inputs.size());
  for (size_t i = 0; i < layout_.inputs.size(); ++i) {
    const InputLayout& in = layout_.inputs[i];
    SparseInput& s = out->sparse[i];
    s.table = in.table;
    s.wide_table = in.wide_table;
    s.combiner = in.combiner;
    s.offsets.assign(1, 0);
    s.rows.clear();
    auto& index = key_index_[in.table];
    std::vector<uint64_t>& keys = out->tables[in.table].unique_keys;
    auto add = [&](uint64_t key) {
      auto [it, inserted] = index.emplace(key, static_cast<uint32_t>(keys.size()));
      if (inserted) keys.push_back(key);
      s.rows.push_back(it->second);
    };
    const input::Column& c = batch.columns[input_columns_[i]];
    const input::FeatureSpecEntry& f = features_.features[input_columns_[i]];
    if (in.bucketized) {
      const DenseInputSpec& d = spec_.dense[in.source];
      const bool is_float = f.type == input::FeatureType::kFloat;
      for (size_t r = 0; r < rows; ++r) {
        add(Bucket(d.boundaries,
                   is_float ? static_cast<double>(c.floats[r]) : static_cast<double>(c.int64s[r])));
        s.offsets.push_back(static_cast<uint32_t>(s.rows.size()));
      }
    } else if (f.kind == input::FeatureKind::kVarLen) {
      for (size_t r = 0; r < rows; ++r) {
        for (uint32_t k = c.row_splits[r]; k < c.row_splits[r + 1]; ++k) add(c.ids[k]);
        s.offsets.push_back(static_cast<uint32_t>(s.rows.size()));
      }
    } else {  // fixed int64: `length` ids per example
      for (size_t r = 0; r < rows; ++r) {
        for (int j = 0; j < f.length; ++j) add(static_cast<uint64_t>(c.int64s[r * f.length + j]));
        s.offsets.push_back(static_cast<uint32_t>(s.rows.size()));
      }
    }
  }
  // Wide tables read the keys of their deep table.
  for (size_t t = 0; t < layout_.tables.size(); ++t) {
    const int from = layout_.tables[t].shares_keys_with;
    if (from >= 0) out->tables[t].unique_keys = out->tables[from].unique_keys;
  }
  return absl::OkStatus();
}

absl::Status BuildModelBatch(const ModelSpec& spec, const input::FeatureSpec& features,
                             const input::ColumnarBatch& batch, ModelBatch* out) {
  ASSIGN_OR_RETURN(ModelBatchBuilder builder, ModelBatchBuilder::Create(spec, features));
  return builder.Build(batch, out);
}

}  // namespace brook::trainer
