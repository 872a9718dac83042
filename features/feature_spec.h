// A feature spec maps tf.train.Example features to columns of a batch. It is
// the `features:` section of a job spec and can stand alone as a YAML file:
//
//   label: {name: label, type: float}        # or int64; required
//   on_missing: default                      # default | error (spec-wide)
//   on_type_mismatch: error                  # error | default
//   features:
//     - {name: I1, type: float, length: 1, default: 0.0}   # fixed float
//     - {name: age, type: int64, length: 1, default: -1}   # fixed int64
//     - {name: C1, type: int64, kind: varlen}               # ragged id list
//     - {name: country, type: bytes, kind: varlen}          # hashed ids
//     - {name: tags, type: bytes, kind: varlen, max_length: 8}
//
// Fixed features (kind: fixed, the default for int64/float) have `length`
// values per example; a missing one is filled with `default` and counted (or
// is an error with on_missing: error); a present one of the wrong length is a
// type mismatch. Varlen features (int64 or bytes) become ragged id columns:
// int64 values are reinterpreted as uint64 ids, bytes values hashed with
// brook::Hash64 (XXH64, seed 0). A missing varlen feature is an empty list.
// A type mismatch (e.g. a float_list where int64 was declared) is an error
// naming the feature, or with on_type_mismatch: default is treated as
// missing. Both are counted per feature in ParseStats.
//
// In YAML, `type` is required; `kind` defaults to fixed for int64/float and
// to varlen for bytes; `label: NAME` is short for {name: NAME, type: float}.
// Unknown or repeated keys, and keys that do not apply to the kind (length
// or default on varlen, max_length on fixed), are errors, so a typo is never
// silently ignored. A feature may not share the label's name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace brook::input {

enum class FeatureType { kInt64, kFloat, kBytes };
enum class FeatureKind { kFixed, kVarLen };
enum class MissingPolicy { kDefault, kError };
enum class MismatchPolicy { kError, kDefault };

struct FeatureSpecEntry {
  std::string name;
  FeatureType type = FeatureType::kFloat;
  FeatureKind kind = FeatureKind::kFixed;
  int length = 1;              // kFixed only
  double default_value = 0.0;  // kFixed only; cast to the column type
  int max_length = 0;          // kVarLen only; 0 = unbounded, else truncate
};

struct FeatureSpec {
  std::string label_name;  // required
  FeatureType label_type = FeatureType::kFloat;
  MissingPolicy on_missing = MissingPolicy::kDefault;
  MismatchPolicy on_type_mismatch = MismatchPolicy::kError;
  std::vector<FeatureSpecEntry> features;

  // Names, types and lengths are checked; duplicate names are an error. Errors
  // name the feature (and the YAML line when parsed from text).
  static absl::StatusOr<FeatureSpec> FromYaml(const std::string& yaml_text);
  static absl::StatusOr<FeatureSpec> FromYamlFile(const std::string& path);
  std::string ToYaml() const;
  absl::Status Validate() const;
  // Index of a feature by name, or -1.
  int IndexOf(const std::string& name) const;
};

std::string_view FeatureTypeName(FeatureType t);  // "int64" | "float" | "bytes"

}  // namespace brook::input
