#include "trainer/input/parse_policy.h"

#include "absl/strings/str_cat.h"

namespace brook::input::internal {
namespace {

std::string Values(uint64_t count) {
  return absl::StrCat(count, count == 1 ? " value" : " values");
}

}  // namespace

absl::string_view ListKindName(ListKind k) {
  switch (k) {
    case ListKind::kBytes:
      return "bytes_list";
    case ListKind::kFloat:
      return "float_list";
    case ListKind::kInt64:
      return "int64_list";
    case ListKind::kNone:
      break;
  }
  return "no value";
}

absl::Status LabelMissingError(const FeatureSpec& spec) {
  return absl::InvalidArgumentError(absl::StrCat("label \"", spec.label_name, "\" missing"));
}

absl::Status LabelMismatchError(const FeatureSpec& spec, ListKind kind, uint64_t count) {
  return absl::InvalidArgumentError(absl::StrCat("label \"", spec.label_name,
                                                 "\": expected one int64 or float value, got ",
                                                 ListKindName(kind), " with ", Values(count)));
}

absl::Status FeatureMissingError(const FeatureSpecEntry& f) {
  return absl::InvalidArgumentError(
      absl::StrCat("feature \"", f.name, "\" missing (on_missing: error)"));
}

absl::Status FeatureMismatchError(const FeatureSpecEntry& f, ListKind kind, uint64_t count) {
  const std::string expected =
      f.kind == FeatureKind::kFixed
          ? absl::StrCat(ListKindName(DeclaredKind(f.type)), " with ", Values(f.length))
          : std::string(ListKindName(DeclaredKind(f.type)));
  return absl::InvalidArgumentError(absl::StrCat("feature \"", f.name,
                                                 "\": type mismatch: expected ", expected, ", got ",
                                                 ListKindName(kind), " with ", Values(count)));
}

const char* CheckBatchShape(const FeatureSpec& spec, const ColumnarBatch& batch) {
  const size_t rows = batch.num_rows;
  if (batch.columns.size() != spec.features.size()) return "wrong number of columns";
  if (batch.labels.size() != rows) return "labels.size() != num_rows";
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const FeatureSpecEntry& f = spec.features[i];
    const Column& c = batch.columns[i];
    if (f.kind == FeatureKind::kFixed) {
      const size_t want = rows * static_cast<size_t>(f.length);
      const bool is_float = f.type == FeatureType::kFloat;
      if ((is_float ? c.floats.size() : c.int64s.size()) != want) return "fixed column size";
    } else {
      if (c.row_splits.size() != rows + 1 || c.ids.size() != c.row_splits.back()) {
        return "varlen column row_splits";
      }
    }
  }
  return nullptr;
}

void TruncateToRows(const FeatureSpec& spec, ColumnarBatch* batch) {
  const size_t rows = batch->num_rows;
  batch->labels.resize(rows);
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const FeatureSpecEntry& f = spec.features[i];
    Column& c = batch->columns[i];
    if (f.kind == FeatureKind::kFixed) {
      const size_t want = rows * static_cast<size_t>(f.length);
      if (f.type == FeatureType::kFloat) {
        c.floats.resize(want);
      } else {
        c.int64s.resize(want);
      }
    } else {
      c.row_splits.resize(rows + 1);
      c.ids.resize(c.row_splits.back());
    }
  }
}

absl::Status BatchShapeError(const FeatureSpec& spec, const char* what) {
  return absl::FailedPreconditionError(absl::StrCat("batch does not match the feature spec (",
                                                    spec.features.size(), " features): ", what,
                                                    "; prepare it with ExampleParser::InitBatch"));
}

}  // namespace brook::input::internal
