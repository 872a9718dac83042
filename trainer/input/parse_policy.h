// The missing / type-mismatch policy of feature_spec.h in one place, shared by
// the wire parser (example_parser.cc) and the protobuf-based reference parser
// (example_parser_reference.cc), so that both classify a feature and word the
// resulting error identically. Internal to trainer/input.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "features/feature_spec.h"
#include "trainer/input/columnar_batch.h"

namespace brook::input::internal {

// The oneof case of tf.train.Feature. The values are the field numbers of
// bytes_list / float_list / int64_list, which the wire parser relies on.
enum class ListKind : uint8_t { kNone = 0, kBytes = 1, kFloat = 2, kInt64 = 3 };

absl::string_view ListKindName(ListKind k);  // "bytes_list", ... or "no value"

// The list kind a feature of type `t` must arrive as.
inline ListKind DeclaredKind(FeatureType t) {
  switch (t) {
    case FeatureType::kBytes:
      return ListKind::kBytes;
    case FeatureType::kFloat:
      return ListKind::kFloat;
    case FeatureType::kInt64:
      return ListKind::kInt64;
  }
  return ListKind::kNone;
}

enum class Outcome : uint8_t { kOk, kMissing, kMismatch };

// What a feature that arrived as `kind` with `count` values is, per the spec.
// kNone (absent, or present with no kind set) is missing; a fixed feature
// must have exactly `length` values; a varlen one any number (truncation to
// max_length is not a mismatch).
inline Outcome Classify(const FeatureSpecEntry& f, ListKind kind, uint64_t count) {
  if (kind == ListKind::kNone) return Outcome::kMissing;
  if (kind != DeclaredKind(f.type)) return Outcome::kMismatch;
  if (f.kind == FeatureKind::kFixed && count != static_cast<uint64_t>(f.length)) {
    return Outcome::kMismatch;
  }
  return Outcome::kOk;
}

// The label may arrive as int64_list or float_list (it is converted to
// float), with exactly one value.
inline bool LabelOk(ListKind kind, uint64_t count) {
  return (kind == ListKind::kFloat || kind == ListKind::kInt64) && count == 1;
}

absl::Status LabelMissingError(const FeatureSpec& spec);
absl::Status LabelMismatchError(const FeatureSpec& spec, ListKind kind, uint64_t count);
absl::Status FeatureMissingError(const FeatureSpecEntry& f);
absl::Status FeatureMismatchError(const FeatureSpecEntry& f, ListKind kind, uint64_t count);
// Both parsers roll a rejected row back by cutting every column to
// batch->num_rows rows. That is only right if the batch holds exactly
// num_rows rows of this spec, which CheckBatchShape verifies (O(features)):
// it returns nullptr if so, else what is wrong.
const char* CheckBatchShape(const FeatureSpec& spec, const ColumnarBatch& batch);
// Cuts every column (and labels) back to batch->num_rows rows. Never
// allocates: it only shrinks.
void TruncateToRows(const FeatureSpec& spec, ColumnarBatch* batch);

// The batch was not prepared by InitBatch for this spec, or was modified.
absl::Status BatchShapeError(const FeatureSpec& spec, const char* what);

}  // namespace brook::input::internal
