// Turns a parsed ColumnarBatch (one column per feature) into what a model
// step consumes: the dense matrix after transforms, and per sparse input a
// CSR over the *unique keys of its table*. Keys are deduplicated per table
// across every input sharing it, so the trainer pulls each key once
// (tables[t].unique_keys, rows come back in that order) and pushes one summed
// gradient per key (StepResult::table_grads[t], same order).
//
//   ASSIGN_OR_RETURN(ModelBatchBuilder builder, ModelBatchBuilder::Create(model_spec, features));
//   ModelBatch mb;
//   RETURN_IF_ERROR(builder.Build(columnar_batch, &mb));   // reuses mb's buffers
//   // pull mb.tables[t].unique_keys for every t, then Model::Step(mb, rows, params, ...)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "features/feature_spec.h"
#include "trainer/backend/op_types.h"
#include "trainer/input/columnar_batch.h"
#include "trainer/model/model_spec.h"

namespace brook::trainer {

// One sparse input (ModelLayout::inputs order): example b's ids are
// rows[offsets[b] .. offsets[b + 1]), each an index into the unique keys of
// tables[table] (and of tables[wide_table], which has the same keys).
struct SparseInput {
  int table = 0;
  int wide_table = -1;  // wide_deep / deepfm only
  Combiner combiner = Combiner::kSum;
  std::vector<uint32_t> offsets;  // batch_size + 1 entries, offsets[0] == 0
  std::vector<uint32_t> rows;
};

struct TableKeys {
  std::string table;
  int dim = 0;
  // Distinct keys in order of first appearance in the batch (inputs in
  // layout order, examples in order), so a batch always gives the same list.
  std::vector<uint64_t> unique_keys;
};

struct ModelBatch {
  int batch_size = 0;
  // Global step number, set by the trainer: dropout masks are drawn from
  // (ModelSpec::seed, step), so a step can be replayed exactly.
  uint64_t step = 0;
  std::vector<float> dense;  // batch_size x dense_width, row-major
  int dense_width = 0;
  std::vector<SparseInput> sparse;
  std::vector<TableKeys> tables;  // ModelLayout::tables order
  std::vector<float> labels;      // batch_size
};

// Thread-compatible (Build reuses scratch hash maps); immutable spec inside.
class ModelBatchBuilder {
 public:
  // InvalidArgument if the spec does not validate against `features`.
  static absl::StatusOr<ModelBatchBuilder> Create(const ModelSpec& spec,
                                                  const input::FeatureSpec& features);

  // Fills *out from `batch`, which must hold whole rows of the feature spec
  // (InvalidArgument naming the feature otherwise, *out untouched). Standardize
  // inputs need moments (FailedPrecondition otherwise; see ComputeMoments).
  absl::Status Build(const input::ColumnarBatch& batch, ModelBatch* out);

  const ModelLayout& layout() const { return layout_; }

 private:
  ModelBatchBuilder() = default;
  absl::Status CheckBatch(const input::ColumnarBatch& batch) const;

  ModelSpec spec_;
  input::FeatureSpec features_;
  ModelLayout layout_;
  std::vector<int> dense_columns_;  // per spec_.dense entry: column index
  std::vector<int> input_columns_;  // per layout_.inputs entry: column index
  // Scratch, per table: key -> index into unique_keys.
  std::vector<absl::flat_hash_map<uint64_t, uint32_t>> key_index_;
};

// One-shot form of ModelBatchBuilder::Build.
absl::Status BuildModelBatch(const ModelSpec& spec, const input::FeatureSpec& features,
                             const input::ColumnarBatch& batch, ModelBatch* out);

}  // namespace brook::trainer
