// The model sections of a job spec: which model, its layer sizes, and how the
// features of the feature spec (features/feature_spec.h) become model
// inputs.
//
//   model:
//     type: deepfm          # lr | wide_deep | deepfm | dlrm
//     embedding_dim: 16     # default dim of sparse inputs (and bucketized dense ones)
//     hidden: [256, 128]    # deep tower of wide_deep / deepfm (default [256, 128])
//     # dlrm: bottom: [64]  (hidden widths of the bottom MLP on the dense
//     #       inputs; a last layer to the embedding dim is added; default [])
//     #       top: [256, 128] (hidden widths over the interactions; a last
//     #       layer to one logit is added; default [256, 128])
//     activation: relu      # relu | sigmoid | tanh (hidden layers)
//     dropout: 0.0          # after each hidden activation while training, [0, 1)
//     loss: logloss         # logloss | mse (rating regression)
//     seed: 0               # dropout masks are drawn from (seed, ModelBatch::step)
//   sparse:                 # id features -> embedding tables
//     - {feature: C1, table: C1, dim: 16, combiner: sum}
//   dense:                  # fixed float/int64 features -> dense inputs
//     - {feature: I1, transform: log1p}
//     - {feature: I2, transform: standardize, mean: 1.5, stddev: 3.0}
//     - {feature: I3, transform: bucketize, boundaries: [0, 1, 10, 100], dim: 8}
//
// Sparse inputs: a varlen feature (int64 or bytes) or a fixed int64 feature
// (its `length` values are the ids). `table` defaults to the feature name;
// inputs naming one table share its rows (same id, same row) and must agree
// on dim. `combiner` is sum (default) or mean; mean over no ids is zero.
// Dense inputs: fixed float or int64 features, `length` columns each.
// Transforms: none (default); log1p: sign(x) * log(1 + |x|), defined for
// every x (Criteo's counts go negative); standardize: (x - mean) / stddev,
// with mean and stddev given together or filled by ComputeMoments;
// bucketize (length-1 features only): x becomes the id i = number of
// boundaries <= x (TensorFlow's Bucketize; NaN -> 0) into its own table
// "<feature>_bucket" of `dim` (default embedding_dim), and is then a sparse
// input like the others rather than a dense column.
//
// Tables: lr trains one dim-1 weight per id in each table (`dim` and
// embedding_dim do not apply). wide_deep and deepfm add, beside each table T,
// a dim-1 table "T_wide" read with the same ids (the wide / first-order
// part). deepfm and dlrm need every sparse input to have the same dim (FM and
// dot interactions pair them up).
//
// Unknown or repeated keys are errors, and so are keys that do not apply
// (hidden on dlrm, mean on log1p, ...); errors name the field and its YAML
// line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "features/feature_spec.h"
#include "trainer/backend/op_types.h"
#include "trainer/input/columnar_batch.h"

namespace brook::trainer {

enum class ModelType { kLr, kWideDeep, kDeepFm, kDlrm };
enum class DenseTransform { kNone, kLog1p, kStandardize, kBucketize };

std::string_view ModelTypeName(ModelType t);  // "lr" | "wide_deep" | "deepfm" | "dlrm"

struct SparseInputSpec {
  std::string feature;
  std::string table;  // "" = the feature name
  int dim = 0;        // 0 = model.embedding_dim
  Combiner combiner = Combiner::kSum;
  int line = 0;  // YAML line, 0 when not parsed from text
};

struct DenseInputSpec {
  std::string feature;
  DenseTransform transform = DenseTransform::kNone;
  double mean = 0.0;  // kStandardize
  double stddev = 1.0;
  bool has_moments = false;        // kStandardize: mean/stddev are set
  std::vector<double> boundaries;  // kBucketize: finite, strictly increasing
  int dim = 0;                     // kBucketize: 0 = model.embedding_dim
  int length = 1;                  // values per example; FromYaml copies it from the feature spec
  int line = 0;
};

// An embedding table the model pulls, in ModelBatch::tables order.
struct TableSpec {
  std::string name;
  int dim = 0;
  // -1, or the index of the (earlier) table whose unique keys this one uses:
  // a wide table reads the same ids as its deep table.
  int shares_keys_with = -1;
};

// One sparse input of the model (ModelBatch::sparse order): the `sparse`
// entries, then the bucketized `dense` entries.
struct InputLayout {
  bool bucketized = false;
  int source = 0;       // index into ModelSpec::sparse, or ::dense when bucketized
  int table = 0;        // index into ModelLayout::tables
  int wide_table = -1;  // wide_deep / deepfm: the dim-1 table of the same ids
  int dim = 0;
  Combiner combiner = Combiner::kSum;
};

struct ModelLayout {
  std::vector<TableSpec> tables;
  std::vector<InputLayout> inputs;
  int dense_width = 0;  // sum of `length` over non-bucketized dense entries
};

struct ModelSpec {
  ModelType type = ModelType::kLr;
  int embedding_dim = 16;
  std::vector<int> hidden = {256, 128};  // wide_deep, deepfm
  std::vector<int> bottom;               // dlrm
  std::vector<int> top = {256, 128};     // dlrm
  Activation activation = Activation::kRelu;
  float dropout = 0.0f;
  LossKind loss = LossKind::kLogLoss;
  uint64_t seed = 0;
  std::vector<SparseInputSpec> sparse;
  std::vector<DenseInputSpec> dense;

  // Parses the `model`, `sparse` and `dense` sections of a YAML document and
  // checks them against `features` (ValidateAgainst). Other top-level keys are
  // errors unless named in `other_sections` (a job spec passes its own
  // sections, e.g. "features"). InvalidArgument naming the field and line.
  static absl::StatusOr<ModelSpec> FromYaml(const std::string& yaml_text,
                                            const input::FeatureSpec& features,
                                            absl::Span<const std::string_view> other_sections = {});

  // Self-consistency: sizes in range, names unique, shared tables agree on
  // dim, generated table names do not collide, deepfm/dlrm dims equal.
  absl::Status Validate() const;
  // Validate() plus: every feature exists in `features` with a kind that fits
  // and the `length` recorded here.
  absl::Status ValidateAgainst(const input::FeatureSpec& features) const;

  // Tables, inputs and dense width. REQUIRES: Validate().ok().
  ModelLayout Layout() const;
  // The dim of sparse input `s` (its own, or embedding_dim); 1 for lr.
  int SparseDim(const SparseInputSpec& s) const;
  int BucketDim(const DenseInputSpec& d) const;
};

// Streaming mean and (population) standard deviation of the raw values of
// every standardize input that has no moments yet. Thread-compatible.
class MomentsAccumulator {
 public:
  // REQUIRES: spec.ValidateAgainst(features).ok(). `features` must outlive this.
  MomentsAccumulator(const ModelSpec& spec, const input::FeatureSpec& features);
  // InvalidArgument if the batch does not fit the feature spec.
  absl::Status Add(const input::ColumnarBatch& batch);
  // Writes mean/stddev (and has_moments) into the matching entries of *spec.
  // A constant feature gets stddev 1 (its standardized value is then 0).
  // FailedPrecondition, and *spec unchanged, if some feature saw no values.
  absl::Status Apply(ModelSpec* spec) const;

 private:
  struct Moments {
    int dense_index = 0;
    int column = 0;
    int length = 1;
    bool is_float = true;
    double count = 0, mean = 0, m2 = 0;  // Welford / Chan et al.
  };
  const input::FeatureSpec* features_;  // borrowed
  std::vector<Moments> moments_;
};

// Scans `batches` with a MomentsAccumulator and applies it to *spec.
absl::Status ComputeMoments(const input::FeatureSpec& features,
                            absl::Span<const input::ColumnarBatch> batches, ModelSpec* spec);

}  // namespace brook::trainer
