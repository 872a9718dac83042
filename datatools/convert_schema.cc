#include "datatools/convert_schema.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "common/absl_compat.h"
#include "datatools/yaml_error.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace brook::datatools {
namespace {

// Debian's abseil has its own string_view type, not std's.

// UCI Adult as TensorFlow's Wide & Deep census tutorial uses it: fnlwgt (a
// census sampling weight, not a property of the person) is dropped. The test
// split of the original files writes labels with a trailing period.
constexpr std::string_view kAdultYaml = R"(format: csv
header: true
missing: ["?", ""]
label: {column: label, positive: [">50K", ">50K."], negative: ["<=50K", "<=50K."]}
columns:
  - {name: age, type: numeric}
  - {name: workclass, type: categorical}
  - {name: fnlwgt, type: ignore}
  - {name: education, type: categorical}
  - {name: education-num, type: numeric}
  - {name: marital-status, type: categorical}
  - {name: occupation, type: categorical}
  - {name: relationship, type: categorical}
  - {name: race, type: categorical}
  - {name: sex, type: categorical}
  - {name: capital-gain, type: numeric}
  - {name: capital-loss, type: numeric}
  - {name: hours-per-week, type: numeric}
  - {name: native-country, type: categorical}
)";

// Criteo's layout is implied by `format: criteo` (see CriteoDefaults), so the
// preset only has to name the format.
constexpr std::string_view kCriteoYaml = R"(format: criteo
header: false
missing: [""]
label: {column: label}
)";

constexpr int kCriteoIntColumns = 13;
constexpr int kCriteoCatColumns = 26;

absl::StatusOr<std::string> ScalarString(const YAML::Node& node, std::string_view key) {
  if (!node.IsScalar()) return YamlError(node, absl::StrCat("`", AbslView(key), "` must be a string"));
  return node.Scalar();
}

absl::StatusOr<std::vector<std::string>> StringList(const YAML::Node& node, std::string_view key) {
  std::vector<std::string> out;
  if (node.IsScalar()) {
    out.push_back(node.Scalar());
    return out;
  }
  if (!node.IsSequence()) {
    return YamlError(node, absl::StrCat("`", AbslView(key), "` must be a list of strings"));
  }
  for (const YAML::Node& item : node) {
    ASSIGN_OR_RETURN(std::string s, ScalarString(item, key));
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<ColumnType> ParseColumnType(const YAML::Node& node, std::string_view where) {
  ASSIGN_OR_RETURN(std::string s, ScalarString(node, "type"));
  s = absl::AsciiStrToLower(s);
  if (s == "numeric") return ColumnType::kNumeric;
  if (s == "categorical") return ColumnType::kCategorical;
  if (s == "ignore") return ColumnType::kIgnore;
  return YamlError(node, absl::StrCat(AbslView(where), ": unknown type \"", node.Scalar(),
                                      "\"; expected numeric, categorical or ignore"));
}

absl::Status ParseLabel(const YAML::Node& node, LabelSchema* label) {
  if (node.IsScalar()) {  // `label: y` is shorthand for {column: y}
    label->column = node.Scalar();
    return absl::OkStatus();
  }
  if (!node.IsMap()) return YamlError(node, "`label` must be a map like {column: label}");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (key == "column") {
      ASSIGN_OR_RETURN(label->column, ScalarString(kv.second, "label.column"));
    } else if (key == "positive") {
      ASSIGN_OR_RETURN(label->positive, StringList(kv.second, "label.positive"));
    } else if (key == "negative") {
      ASSIGN_OR_RETURN(label->negative, StringList(kv.second, "label.negative"));
    } else {
      return YamlError(kv.first, absl::StrCat("unknown key `label.", key,
                                              "`; expected column, positive, negative"));
    }
  }
  return absl::OkStatus();
}

// One column's settings: `type` and `separator` (the name is given).
absl::Status ParseColumnKeys(const YAML::Node& item, const std::string& where, bool name_allowed,
                             ColumnSchema* col) {
  for (const auto& kv : item) {
    const std::string key = kv.first.Scalar();
    if (key == "name" && name_allowed) {
      ASSIGN_OR_RETURN(col->name, ScalarString(kv.second, where + ".name"));
    } else if (key == "separator") {
      ASSIGN_OR_RETURN(col->separator, ScalarString(kv.second, where + ".separator"));
      if (col->separator.empty()) {
        return YamlError(kv.second, absl::StrCat(where, ": `separator` must not be empty"));
      }
    } else if (key != "type") {
      return YamlError(kv.first, absl::StrCat(where, ": unknown key `", key, "`; expected ",
                                              name_allowed ? "name, " : "", "type, separator"));
    }
  }
  if (col->name.empty()) return YamlError(item, absl::StrCat(where, ": missing `name`"));
  if (item["type"]) {
    ASSIGN_OR_RETURN(col->type, ParseColumnType(item["type"],
                                                absl::StrCat("column \"", col->name, "\"")));
  }
  if (!col->separator.empty() && col->type != ColumnType::kCategorical) {
    return YamlError(item, absl::StrCat("column \"", col->name, "\": `separator` needs "
                                        "`type: categorical` (a multi-valued column is a list "
                                        "of ids)"));
  }
  return absl::OkStatus();
}

absl::Status ParseColumns(const YAML::Node& node, std::vector<ColumnSchema>* columns) {
  if (node.IsMap()) {  // {name: type} or {name: {type, separator}}, in order
    for (const auto& kv : node) {
      ColumnSchema col;
      col.name = kv.first.Scalar();
      const std::string where = absl::StrCat("columns.", col.name);
      if (kv.second.IsScalar()) {
        ASSIGN_OR_RETURN(col.type, ParseColumnType(kv.second,
                                                   absl::StrCat("column \"", col.name, "\"")));
      } else if (kv.second.IsMap()) {
        RETURN_IF_ERROR(ParseColumnKeys(kv.second, where, /*name_allowed=*/false, &col));
      } else if (!kv.second.IsNull()) {
        return YamlError(kv.second, absl::StrCat(where, " must be a type or {type, separator}"));
      }
      columns->push_back(std::move(col));
    }
    return absl::OkStatus();
  }
  if (!node.IsSequence()) return YamlError(node, "`columns` must be a list or a map");
  int index = 0;
  for (const YAML::Node& item : node) {
    ColumnSchema col;
    if (item.IsScalar()) {
      col.name = item.Scalar();
    } else if (item.IsMap()) {
      RETURN_IF_ERROR(ParseColumnKeys(item, absl::StrCat("columns[", index, "]"),
                                      /*name_allowed=*/true, &col));
    } else {
      return YamlError(item, absl::StrCat("columns[", index, "] must be a name or {name, type}"));
    }
    columns->push_back(std::move(col));
    ++index;
  }
  return absl::OkStatus();
}

absl::StatusOr<TextFormat> ParseFormat(const YAML::Node& node) {
  ASSIGN_OR_RETURN(std::string s, ScalarString(node, "format"));
  auto f = ParseTextFormat(s);
  if (!f.ok()) return YamlError(node, std::string(f.status().message()));
  return f;
}

// Fills what `format: criteo` implies and the YAML left out.
void ApplyCriteoDefaults(ConvertSchema* schema, bool header_given, bool missing_given) {
  if (!header_given) schema->header = false;
  if (!missing_given) schema->missing = {""};
  if (schema->label.column.empty()) schema->label.column = "label";
  if (!schema->columns.empty()) return;
  schema->columns.push_back({schema->label.column, std::nullopt});
  for (int i = 1; i <= kCriteoIntColumns; ++i) {
    schema->columns.push_back({absl::StrCat("I", i), ColumnType::kNumeric});
  }
  for (int i = 1; i <= kCriteoCatColumns; ++i) {
    schema->columns.push_back({absl::StrCat("C", i), ColumnType::kCategorical});
  }
}

absl::StatusOr<ConvertSchema> FromYamlNode(const YAML::Node& root) {
  if (!root.IsMap()) return YamlError(root, "a convert schema must be a YAML map");
  ConvertSchema schema;
  bool header_given = false;
  bool missing_given = false;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& value = kv.second;
    if (key == "format") {
      ASSIGN_OR_RETURN(schema.format, ParseFormat(value));
    } else if (key == "header") {
      if (!value.IsScalar()) return YamlError(value, "`header` must be true or false");
      bool b = false;
      if (!YAML::convert<bool>::decode(value, b)) {
        return YamlError(value, "`header` must be true or false");
      }
      schema.header = b;
      header_given = true;
    } else if (key == "missing") {
      ASSIGN_OR_RETURN(schema.missing, StringList(value, "missing"));
      missing_given = true;
    } else if (key == "label") {
      RETURN_IF_ERROR(ParseLabel(value, &schema.label));
    } else if (key == "default_type") {
      ASSIGN_OR_RETURN(schema.default_type, ParseColumnType(value, "default_type"));
    } else if (key == "columns") {
      RETURN_IF_ERROR(ParseColumns(value, &schema.columns));
    } else {
      return YamlError(kv.first, absl::StrCat("unknown key `", key, "`; expected format, header, "
                                              "missing, label, default_type, columns"));
    }
  }
  if (schema.format == TextFormat::kCriteo) {
    ApplyCriteoDefaults(&schema, header_given, missing_given);
  } else if (!header_given && !schema.columns.empty() &&
             std::all_of(schema.columns.begin(), schema.columns.end(),
                         [](const ColumnSchema& c) { return !c.type.has_value(); })) {
    // A list of bare names (no types at all) can only be the file's column
    // names; a typed list is matched against a header by name.
    schema.header = false;
  }
  RETURN_IF_ERROR(schema.Validate());
  return schema;
}

}  // namespace

std::string_view TextFormatName(TextFormat f) {
  switch (f) {
    case TextFormat::kCsv: return "csv";
    case TextFormat::kTsv: return "tsv";
    case TextFormat::kCriteo: return "criteo";
  }
  return "?";
}

absl::StatusOr<TextFormat> ParseTextFormat(std::string_view name) {
  const std::string s = absl::AsciiStrToLower(AbslView(name));
  if (s == "csv") return TextFormat::kCsv;
  if (s == "tsv") return TextFormat::kTsv;
  if (s == "criteo") return TextFormat::kCriteo;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown format \"", AbslView(name), "\"; expected csv, tsv or criteo"));
}

std::string_view ColumnTypeName(ColumnType t) {
  switch (t) {
    case ColumnType::kNumeric: return "numeric";
    case ColumnType::kCategorical: return "categorical";
    case ColumnType::kIgnore: return "ignore";
  }
  return "?";
}

std::string_view PresetYaml(std::string_view name) {
  if (name == "adult") return kAdultYaml;
  if (name == "criteo") return kCriteoYaml;
  return {};
}

absl::StatusOr<ConvertSchema> ConvertSchema::FromYaml(const std::string& yaml_text) {
  try {
    return FromYamlNode(YAML::Load(yaml_text));
  } catch (const YAML::Exception& e) {
    // yaml-cpp reports syntax errors by throwing; the mark has the line.
    return absl::InvalidArgumentError(absl::StrCat("line ", e.mark.line + 1, ": ", e.msg));
  }
}

absl::StatusOr<ConvertSchema> ConvertSchema::Preset(std::string_view name) {
  const std::string_view yaml = PresetYaml(name);
  if (yaml.empty()) {
    return absl::NotFoundError(absl::StrCat("no schema preset \"", AbslView(name), "\" (have adult, criteo)"));
  }
  return FromYaml(std::string(yaml));
}

absl::StatusOr<ConvertSchema> ConvertSchema::Load(const std::string& name_or_path) {
  if (!PresetYaml(name_or_path).empty()) return Preset(name_or_path);
  std::ifstream in(name_or_path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open schema \"", name_or_path,
                                            "\" (not a file, nor a preset: adult, criteo)"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto schema = FromYaml(ss.str());
  if (!schema.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name_or_path, ": ", schema.status().message()));
  }
  return schema;
}

absl::Status ConvertSchema::Validate() const {
  if (label.column.empty()) {
    return absl::InvalidArgumentError("`label.column` is required (the column holding the label)");
  }
  if (!header && columns.empty()) {
    return absl::InvalidArgumentError(
        "`header: false` needs `columns:` listing the file's columns in order");
  }
  std::set<std::string> seen;
  for (const ColumnSchema& c : columns) {
    if (c.name.empty()) return absl::InvalidArgumentError("a column has an empty name");
    if (!seen.insert(c.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("column \"", c.name, "\" is listed twice"));
    }
    if (c.name == label.column && c.type.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "column \"", c.name, "\" is the label column; it is typed by `label:`, not `columns:`"));
    }
  }
  for (const std::string& p : label.positive) {
    if (std::find(label.negative.begin(), label.negative.end(), p) != label.negative.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("label value \"", p, "\" is both positive and negative"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> ConvertSchema::ColumnNames() const {
  std::vector<std::string> names;
  for (const ColumnSchema& c : columns) names.push_back(c.name);
  return names;
}

bool ConvertSchema::IsMissing(std::string_view trimmed_value) const {
  return std::find(missing.begin(), missing.end(), trimmed_value) != missing.end();
}

absl::StatusOr<std::vector<ResolvedColumn>> ResolveColumns(
    const ConvertSchema& schema, const std::vector<std::string>& file_columns) {
  absl::flat_hash_map<std::string, const ColumnSchema*> by_name;
  for (const ColumnSchema& c : schema.columns) by_name[c.name] = &c;
  std::set<std::string> file_names;
  std::vector<ResolvedColumn> out;
  bool have_label = false;
  for (const std::string& name : file_columns) {
    if (!file_names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("column \"", name, "\" appears twice"));
    }
    ResolvedColumn rc;
    rc.name = name;
    if (name == schema.label.column) {
      rc.is_label = true;
      have_label = true;
    } else {
      auto it = by_name.find(name);
      std::optional<ColumnType> type = it != by_name.end() ? it->second->type : std::nullopt;
      if (it != by_name.end()) rc.separator = it->second->separator;
      if (!type) type = schema.default_type;
      if (!type) {
        return absl::InvalidArgumentError(absl::StrCat(
            "column \"", name, "\" has no type; give it one under `columns:` or set "
            "`default_type:` (numeric, categorical or ignore)"));
      }
      rc.type = *type;
    }
    out.push_back(std::move(rc));
  }
  for (const ColumnSchema& c : schema.columns) {
    if (!file_names.contains(c.name)) {
      return absl::InvalidArgumentError(absl::StrCat("column \"", c.name,
                                                     "\" is in the schema but not in the file"));
    }
  }
  if (!have_label) {
    return absl::InvalidArgumentError(
        absl::StrCat("label column \"", schema.label.column, "\" is not in the file"));
  }
  return out;
}

input::FeatureSpec ToFeatureSpec(const ConvertSchema& schema,
                                 const std::vector<ResolvedColumn>& columns) {
  input::FeatureSpec spec;
  spec.label_name = schema.label.column;
  spec.label_type = input::FeatureType::kFloat;
  for (const ResolvedColumn& c : columns) {
    if (c.is_label || c.type == ColumnType::kIgnore) continue;
    input::FeatureSpecEntry e;
    e.name = c.name;
    if (c.type == ColumnType::kNumeric) {
      e.type = input::FeatureType::kFloat;
      e.kind = input::FeatureKind::kFixed;
      e.length = 1;
      e.default_value = 0.0;
    } else {
      e.type = input::FeatureType::kBytes;
      e.kind = input::FeatureKind::kVarLen;
    }
    spec.features.push_back(std::move(e));
  }
  return spec;
}

}  // namespace brook::datatools
