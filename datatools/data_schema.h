// A data schema: what a dataset's features looked like when it was trusted
// (inferred from its statistics by `brook data stats --schema-out`), and the
// check of a new dataset against it (`brook data stats --check`), the
// data-validation step of a TFX-style pipeline. The YAML form:
//
//   examples: 32561              # informational
//   features:
//     - name: age
//       type: float              # int64 | float | bytes
//       presence: 1              # min fraction of examples having it
//       values: [1, 1]           # min, max values per example when present
//       range: [17, 90]          # numeric min, max (int64: exact integers)
//     - name: workclass
//       type: bytes
//       presence: 0.9436
//       values: [1, 1]
//       distinct: 9              # informational
//       top_values: [Private, Self-emp-not-inc]   # informational
//
// Every key but name and type is optional; an absent one is not checked.
// Unknown keys are errors. A schema is a plain value (thread-compatible).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"
#include "datatools/data_stats.h"

namespace brook::datatools {

struct FeatureSchema {
  std::string name;
  ValueKind type = ValueKind::kFloat;
  std::optional<double> min_presence;  // [0, 1]
  std::optional<int64_t> min_values, max_values;
  // Numeric range: `range` of a float feature (float32 values, compared as
  // float32) or of an int64 feature (exact integers). Bytes features have none.
  std::optional<double> float_min, float_max;
  std::optional<int64_t> int_min, int_max;
  std::optional<int64_t> distinct;
  std::vector<std::string> top_values;
};

struct DataSchema {
  int64_t examples = 0;
  std::vector<FeatureSchema> features;

  static absl::StatusOr<DataSchema> FromYaml(const std::string& yaml_text);
  static absl::StatusOr<DataSchema> FromYamlFile(const std::string& path);
  std::string ToYaml() const;
  const FeatureSchema* Find(std::string_view name) const;
};

// Infers a schema that `stats` itself passes (unless a feature mixes value
// kinds, which is reported as a type change): presence is the observed
// fraction rounded down to 4 decimals, value counts and ranges the observed
// ones. Float bounds are written as the shortest text that reads back as the
// same float32. Top values (at most max_top_values, printable ones only) are
// kept for people reading the file; checks do not use them.
DataSchema InferSchema(const DatasetStats& stats, int max_top_values = 10);

enum class AnomalyKind {
  kNoExamples,      // the dataset is empty
  kMissingFeature,  // in the schema, absent from every example
  kLowPresence,     // present in fewer examples than the schema's minimum
  kTypeChange,      // values of another kind than the schema's type
  kValueCount,      // an example with more or fewer values than allowed
  kOutOfRange,      // a numeric value outside [min, max]
  kNewFeature,      // in the data, not in the schema (a warning by default)
};
std::string_view AnomalyKindName(AnomalyKind k);  // e.g. "out_of_range"

struct Anomaly {
  AnomalyKind kind;
  std::string feature;   // empty for kNoExamples
  std::string message;   // says what was expected and what was found
  bool warning = false;  // reported, but does not fail the check
};

struct CheckOptions {
  // Presence may fall this far (absolute fraction) below the schema's
  // minimum before it is an anomaly: sampling noise between two splits of
  // one source moves presence by a fraction of a percent.
  double presence_margin = 0.02;
  // Values may exceed [min, max] by this fraction of (max - min). 0: the
  // range is strict, as TFDV's is.
  double range_slack = 0.0;
  // New features fail the check instead of warning.
  bool new_features_are_errors = false;
};

// Every anomaly found, errors and warnings, in schema order then new features.
std::vector<Anomaly> CheckStats(const DatasetStats& stats, const DataSchema& schema,
                                const CheckOptions& options);
// True if any anomaly is not a warning.
bool HasErrors(const std::vector<Anomaly>& anomalies);
nlohmann::json AnomaliesToJson(const std::vector<Anomaly>& anomalies);

}  // namespace brook::datatools
