#include "datatools/convert_schema.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/absl_compat.h"
#include "common/status_macros.h"
#include "common/yaml_fields.h"

namespace brook::datatools {
namespace {

// Debian's abseil has its own string_view type, not std's.

constexpr std::string_view kConvertSchema = "convert schema";  // errors about the whole file

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

// A string or a list of strings at `key` of a dotted map; empty strings are
// allowed (`missing: [""]`: an empty cell is missing).
absl::Status ReadStrings(const yaml::MapReader& r, const std::string& key,
                         std::vector<std::string>* out) {
  if (!r.Has(key)) return absl::OkStatus();
  const YAML::Node v = r.Get(key);
  out->clear();
  if (v.IsScalar()) {
    out->push_back(v.Scalar());
    return absl::OkStatus();
  }
  if (!v.IsSequence()) {
    return r.Error(key,
                   absl::StrCat("must be a string or a list of strings, got ", yaml::Describe(v)));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].IsScalar()) {
      return yaml::FieldError(absl::StrCat(r.Path(key), "[", i, "]"), yaml::LineOf(v[i]),
                              absl::StrCat("must be a string, got ", yaml::Describe(v[i])));
    }
    out->push_back(v[i].Scalar());
  }
  return absl::OkStatus();
}

// A column type (any case); errors name `where`.
absl::Status ReadColumnType(const YAML::Node& node, const std::string& where, ColumnType* out) {
  const std::string s = node.IsScalar() ? absl::AsciiStrToLower(node.Scalar()) : "";
  if (s == "numeric") {
    *out = ColumnType::kNumeric;
  } else if (s == "categorical") {
    *out = ColumnType::kCategorical;
  } else if (s == "ignore") {
    *out = ColumnType::kIgnore;
  } else {
    return yaml::FieldError(where, yaml::LineOf(node),
                            absl::StrCat("unknown type ", yaml::Describe(node),
                                         "; expected numeric, categorical or ignore"));
  }
  return absl::OkStatus();
}

absl::Status ReadLabel(const YAML::Node& node, LabelSchema* label) {
  if (node.IsScalar()) {  // `label: y` is shorthand for {column: y}
    label->column = node.Scalar();
    return absl::OkStatus();
  }
  yaml::MapReader r(node, "label");
  RETURN_IF_ERROR(r.Check({"column", "positive", "negative"}, "{column: label}"));
  RETURN_IF_ERROR(r.String("column", &label->column));
  RETURN_IF_ERROR(ReadStrings(r, "positive", &label->positive));
  return ReadStrings(r, "negative", &label->negative);
}

// One column given as a map: its `type` and `separator`, and its `name`
// when the map is an entry of a list. `r` is named after the column.
absl::Status ReadColumnKeys(yaml::MapReader& r, bool name_allowed, ColumnSchema* col) {
  static constexpr std::string_view kKeys[] = {"name", "type", "separator"};
  absl::Span<const std::string_view> allowed = kKeys;
  if (!name_allowed) allowed.remove_prefix(1);
  RETURN_IF_ERROR(r.Check(allowed, "{name: tags, type: categorical, separator: \";\"}"));
  RETURN_IF_ERROR(r.String("name", &col->name));
  if (name_allowed && col->name.empty()) return r.Missing("name", "");
  RETURN_IF_ERROR(r.String("separator", &col->separator));
  if (r.Has("type")) {
    ColumnType type{};
    RETURN_IF_ERROR(ReadColumnType(r.Get("type"), r.Path("type"), &type));
    col->type = type;
  }
  if (!col->separator.empty() && col->type != ColumnType::kCategorical) {
    return r.MapError("separator needs type: categorical (a multi-valued column is a list of ids)");
  }
  return absl::OkStatus();
}

std::string ColumnName(const std::string& name) { return absl::StrCat("column \"", name, "\""); }

absl::Status ReadColumns(const yaml::MapReader& root, std::vector<ColumnSchema>* columns) {
  const YAML::Node node = root.Get("columns");
  if (node.IsMap()) {  // {name: type} or {name: {type, separator}}, in order
    for (const auto& kv : node) {
      ColumnSchema col;
      col.name = kv.first.Scalar();
      const std::string where = ColumnName(col.name);
      if (kv.second.IsScalar()) {
        ColumnType type{};
        RETURN_IF_ERROR(ReadColumnType(kv.second, where, &type));
        col.type = type;
      } else if (kv.second.IsMap()) {
        yaml::MapReader r = yaml::MapReader::Named(kv.second, where);
        RETURN_IF_ERROR(ReadColumnKeys(r, /*name_allowed=*/false, &col));
      } else if (!kv.second.IsNull()) {
        return yaml::FieldError(where, yaml::LineOf(kv.second),
                                "must be a type or {type, separator}");
      }
      columns->push_back(std::move(col));
    }
    return absl::OkStatus();
  }
  if (!node.IsSequence()) {
    return root.Error("columns",
                      absl::StrCat("must be a list or a map, got ", yaml::Describe(node)));
  }
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    ColumnSchema col;
    if (item.IsScalar()) {
      col.name = item.Scalar();
    } else if (item.IsMap()) {
      // Named after the column where it gives a name, for every message.
      const YAML::Node name = item["name"];
      yaml::MapReader r =
          yaml::MapReader::Named(item, name && name.IsScalar() ? ColumnName(name.Scalar())
                                                               : absl::StrCat("columns[", i, "]"));
      RETURN_IF_ERROR(ReadColumnKeys(r, /*name_allowed=*/true, &col));
    } else {
      return yaml::FieldError(
          absl::StrCat("columns[", i, "]"), yaml::LineOf(item),
          absl::StrCat("must be a name or {name, type}, got ", yaml::Describe(item)));
    }
    columns->push_back(std::move(col));
  }
  return absl::OkStatus();
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
  yaml::MapReader r(root, "", std::string(kConvertSchema));
  RETURN_IF_ERROR(r.Check({"format", "header", "missing", "label", "default_type", "columns"},
                          "{format: csv, label: label, columns: [...]}"));
  ConvertSchema schema;
  if (r.Has("format")) {
    std::string name;
    RETURN_IF_ERROR(r.String("format", &name));
    absl::StatusOr<TextFormat> f = ParseTextFormat(name);
    if (!f.ok()) return r.Error("format", std::string(f.status().message()));
    schema.format = *f;
  }
  const bool header_given = r.Has("header");
  if (header_given && !YAML::convert<bool>::decode(r.Get("header"), schema.header)) {
    return r.Error("header",
                   absl::StrCat("must be true or false, got ", yaml::Describe(r.Get("header"))));
  }
  const bool missing_given = r.Has("missing");
  RETURN_IF_ERROR(ReadStrings(r, "missing", &schema.missing));
  if (r.Has("label")) RETURN_IF_ERROR(ReadLabel(r.Get("label"), &schema.label));
  if (r.Has("default_type")) {
    ColumnType type{};
    RETURN_IF_ERROR(ReadColumnType(r.Get("default_type"), r.Path("default_type"), &type));
    schema.default_type = type;
  }
  if (r.Has("columns")) RETURN_IF_ERROR(ReadColumns(r, &schema.columns));
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
    case TextFormat::kCsv:
      return "csv";
    case TextFormat::kTsv:
      return "tsv";
    case TextFormat::kCriteo:
      return "criteo";
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
    case ColumnType::kNumeric:
      return "numeric";
    case ColumnType::kCategorical:
      return "categorical";
    case ColumnType::kIgnore:
      return "ignore";
  }
  return "?";
}

std::string_view PresetYaml(std::string_view name) {
  if (name == "adult") return kAdultYaml;
  if (name == "criteo") return kCriteoYaml;
  return {};
}

absl::StatusOr<ConvertSchema> ConvertSchema::FromYaml(const std::string& yaml_text) {
  return yaml::NoThrow(kConvertSchema, [&] { return FromYamlNode(yaml::LoadDocument(yaml_text)); });
}

absl::StatusOr<ConvertSchema> ConvertSchema::Preset(std::string_view name) {
  const std::string_view yaml = PresetYaml(name);
  if (yaml.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no schema preset \"", AbslView(name), "\" (have adult, criteo)"));
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
        return absl::InvalidArgumentError(
            absl::StrCat("column \"", name,
                         "\" has no type; give it one under `columns:` or set "
                         "`default_type:` (numeric, categorical or ignore)"));
      }
      rc.type = *type;
    }
    out.push_back(std::move(rc));
  }
  for (const ColumnSchema& c : schema.columns) {
    if (!file_names.contains(c.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("column \"", c.name, "\" is in the schema but not in the file"));
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
