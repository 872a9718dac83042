// A feature spec (features/feature_spec.h) inferred from TFRecord data,
// for `brook data spec` and `brook data stats --feature-spec-out`: the user
// with TensorFlow-written files gets the spec the trainer needs without
// writing it by hand.
//
//   ASSIGN_OR_RETURN(DatasetStats stats, ComputeStats(files, {}));
//   ASSIGN_OR_RETURN(InferredSpec inferred, InferFeatureSpec(stats, {}));
//   std::string yaml = InferredSpecYaml(inferred, stats);
//
// Built on the data schema InferSchema derives from the statistics (type,
// values per example, presence, range). Rules:
//   - int64 and bytes features: varlen id lists (embedding inputs);
//   - float features with the same count n >= 1 in every example where they
//     are present: fixed, length n, default 0 (dense inputs); with counts
//     0 or 1 (TensorFlow's empty list for "missing"): fixed, length 1, and
//     the spec says on_type_mismatch: default so the empty lists read as 0;
//   - float features whose count varies otherwise cannot be read (a spec
//     reads floats only as fixed-length) and are left out, with a note;
//   - the label: the feature `options.label` names, else a one-value
//     numeric feature named like a label (label, click, target, y, ...),
//     else a one-value feature holding only 0 and 1. It is a guess, said so
//     in the file and in `label_reason`.
// Features come in natural order of names (C1, C2, ..., C10).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "datatools/data_stats.h"
#include "features/feature_spec.h"

namespace brook::datatools {

struct SpecInferenceOptions {
  std::string label;  // empty: guess it
};

struct InferredSpec {
  input::FeatureSpec spec;
  bool label_guessed = false;
  // Why this feature is the label, e.g. "named like a label".
  std::string label_reason;
  // One per spec feature: what the data showed ("int64, 1 value, 27 distinct").
  std::vector<std::string> feature_comments;
  // Features left out or read with a caveat, one sentence each.
  std::vector<std::string> notes;
};

// INVALID_ARGUMENT when the data has no examples, when options.label is not
// a feature with one numeric value in every example, or when no label can
// be guessed (the message says to pass --label).
absl::StatusOr<InferredSpec> InferFeatureSpec(const DatasetStats& stats,
                                              const SpecInferenceOptions& options);

// The spec as YAML that FeatureSpec::FromYaml reads, with comments: where it
// came from, the label guess to confirm, what each feature looked like.
std::string InferredSpecYaml(const InferredSpec& inferred, const DatasetStats& stats);

}  // namespace brook::datatools
