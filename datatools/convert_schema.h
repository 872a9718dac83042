// The small YAML schema that tells `brook data convert` how to turn rows of
// CSV/TSV text into tf.train.Example records:
//
//   format: csv          # csv | tsv | criteo
//   header: true         # first line names the columns (default: true, unless
//                        # `columns:` is a list of bare names: the file's columns)
//   missing: ["?", ""]   # tokens (after trimming) meaning "no value"
//   label: {column: label, positive: [">50K", ">50K."], negative: ["<=50K", "<=50K."]}
//                        # or a numeric label: {column: y}
//   default_type: ignore # type of columns not typed below; without it an
//                        # untyped column is an error
//   columns:             # entries are {name, type} maps or bare names
//     - {name: age, type: numeric}           # -> float feature, 1 value
//     - {name: workclass, type: categorical} # -> bytes feature (trimmed string)
//     - {name: fnlwgt, type: ignore}
//     - {name: genres, type: categorical, separator: "|"}
//                        # multi-valued: "Comedy|Drama" -> bytes list of 2
//                        # (a varlen feature); an empty element or one equal
//                        # to a `missing:` token is dropped, and a cell with
//                        # no element left ("?|?", "|") is missing
//
// `columns:` may also be a map from name to type or to {type, separator}:
//   columns: {age: numeric, genres: {type: categorical, separator: "|"}}
//
// With `header: false`, `columns:` lists every column of the file in order
// (bare names take default_type; the label column is listed by name). With a
// header, `columns:` is matched by name and order does not matter.
// `format: criteo` is Criteo's raw layout: tab-separated, no header, `label`,
// I1..I13 numeric, C1..C26 categorical (hex strings), empty = missing; any of
// it can still be overridden.
//
// A schema is a plain value (thread-compatible).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "features/feature_spec.h"

namespace brook::datatools {

enum class TextFormat { kCsv, kTsv, kCriteo };
enum class ColumnType { kNumeric, kCategorical, kIgnore };

std::string_view TextFormatName(TextFormat f);  // "csv" | "tsv" | "criteo"
// Case-insensitive inverse of TextFormatName; INVALID_ARGUMENT otherwise.
absl::StatusOr<TextFormat> ParseTextFormat(std::string_view name);
std::string_view ColumnTypeName(ColumnType t);  // "numeric" | "categorical" | "ignore"

struct ColumnSchema {
  std::string name;
  std::optional<ColumnType> type;  // unset: default_type applies
  // Non-empty: the value is a list split on this string (categorical only).
  std::string separator;
};

struct LabelSchema {
  std::string column;
  // Empty: the label column holds a number (written as is). Otherwise a value
  // in `positive` is 1 and anything else 0, except that when `negative` is
  // non-empty a value in neither list is a bad row (catches a wrong column).
  std::vector<std::string> positive;
  std::vector<std::string> negative;
};

struct ConvertSchema {
  TextFormat format = TextFormat::kCsv;
  bool header = true;
  std::vector<std::string> missing = {""};
  LabelSchema label;
  std::optional<ColumnType> default_type;
  std::vector<ColumnSchema> columns;

  // The names of `columns:` in order.
  std::vector<std::string> ColumnNames() const;

  // Errors name the offending key or column and the YAML line. Unknown keys
  // are errors, so a misspelt `defualt_type` does not silently do nothing.
  static absl::StatusOr<ConvertSchema> FromYaml(const std::string& yaml_text);
  // `name_or_path`: a preset name ("adult", "criteo") or a YAML file.
  static absl::StatusOr<ConvertSchema> Load(const std::string& name_or_path);
  static absl::StatusOr<ConvertSchema> Preset(std::string_view name);
  absl::Status Validate() const;

  char delimiter() const { return format == TextFormat::kCsv ? ',' : '\t'; }
  // RFC 4180 quoting is honoured in CSV only: TSV and Criteo text is split on
  // tabs as is (a quote there is data).
  bool quoting() const { return format == TextFormat::kCsv; }
  bool IsMissing(std::string_view trimmed_value) const;
};

// YAML text of a preset (for `--print-schema`), or empty if unknown.
std::string_view PresetYaml(std::string_view name);

// How each file column is used, resolved against the header (or `columns:`).
struct ResolvedColumn {
  std::string name;
  ColumnType type = ColumnType::kIgnore;
  bool is_label = false;
  std::string separator;  // see ColumnSchema
};

// Resolves the schema against the file's column names. INVALID_ARGUMENT names
// a schema column absent from the file, an untyped column with no
// default_type, a duplicate, or a missing label column.
absl::StatusOr<std::vector<ResolvedColumn>> ResolveColumns(
    const ConvertSchema& schema, const std::vector<std::string>& file_columns);

// The feature spec a trainer uses to read the converted data: numeric ->
// fixed float length 1 default 0, categorical (with or without a separator)
// -> varlen bytes, label float.
input::FeatureSpec ToFeatureSpec(const ConvertSchema& schema,
                                 const std::vector<ResolvedColumn>& columns);

}  // namespace brook::datatools
