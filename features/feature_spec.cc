#include "features/feature_spec.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/yaml_fields.h"
#include "yaml-cpp/yaml.h"

namespace brook::input {
namespace {

// A fixed feature's values are stored inline per row, so an absurd length
// (a typo such as 10000000) would make every batch gigabytes. 1M values per
// example is far above any real dense feature.
constexpr int kMaxFixedLength = 1 << 20;

// Note: our abseil (Debian 20220623) has its own absl::string_view, which
// StrCat takes; std::string_view must be converted explicitly.

// Checks one entry on its own (not against the others). Returns "" if it is
// valid, else the reason, without the "feature ..." prefix, so that Validate()
// and FromYaml() can each add the context they have (FromYaml knows the line).
std::string CheckEntry(const FeatureSpecEntry& f) {
  if (f.name.empty()) return "name must be non-empty";
  if (f.kind == FeatureKind::kFixed) {
    if (f.type == FeatureType::kBytes) {
      return "bytes features cannot be kind: fixed (their hashed ids form a "
             "ragged list); use kind: varlen";
    }
    if (f.length < 1 || f.length > kMaxFixedLength) {
      return absl::StrCat("length must be in [1, ", kMaxFixedLength, "], got ", f.length);
    }
    if (f.max_length != 0) return "max_length applies only to kind: varlen";
    if (f.type == FeatureType::kInt64) {
      // The default is stored as a double but lands in an int64 column: it
      // must be a whole number that int64 can hold (2^63 is not).
      const double d = f.default_value;
      if (!(std::trunc(d) == d && d >= -9223372036854775808.0 && d < 9223372036854775808.0)) {
        return absl::StrCat("default ", d, " is not a valid int64");
      }
    }
  } else {
    if (f.type == FeatureType::kFloat) {
      return "float features cannot be kind: varlen (only int64 and bytes "
             "become id lists); use kind: fixed with a length";
    }
    if (f.max_length < 0) {
      return absl::StrCat("max_length must be >= 0 (0 = unbounded), got ", f.max_length);
    }
  }
  return "";
}

std::string FeatureName(const std::string& name, int index) {
  return name.empty() ? absl::StrCat("feature #", index + 1)
                      : absl::StrCat("feature \"", name, "\"");
}

absl::Status FeatureError(const std::string& name, int index, int line, std::string_view msg) {
  return yaml::FieldError(FeatureName(name, index), line, msg);
}

constexpr std::string_view kFeatureSpec = "feature spec";  // errors about the whole spec

absl::Status SpecError(int line, std::string_view msg) {
  return yaml::FieldError(kFeatureSpec, line, msg);
}

// Shortest decimal text that reads back as exactly `d`, so ToYaml round-trips
// defaults bit for bit without printing 0.10000000000000001.
std::string DoubleText(double d) {
  if (std::isnan(d)) return ".nan";
  if (std::isinf(d)) return d > 0 ? ".inf" : "-.inf";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  return buf;
}

// ---- YAML reading. Every helper returns a Status instead of throwing; the
// ---- whole parse is additionally wrapped in a catch-all (see FromYaml).

absl::Status ReadFeature(const YAML::Node& node, int index, FeatureSpecEntry* out, int* line) {
  *line = yaml::LineOf(node);
  // The name is needed for every other message, so read it first.
  if (node.IsMap()) {
    if (const YAML::Node name = node["name"]; name && name.IsScalar()) out->name = name.Scalar();
  }
  yaml::MapReader r = yaml::MapReader::Named(node, FeatureName(out->name, index));
  RETURN_IF_ERROR(r.Check({"name", "type", "kind", "length", "default", "max_length"},
                          "{name: I1, type: float, length: 1}"));
  if (r.Has("name") && !r.Get("name").IsScalar()) {
    return r.Error("name", "name must be a non-empty string");
  }
  if (!r.Has("type")) return r.Missing("type", "one of int64, float, bytes");
  RETURN_IF_ERROR(r.Choice("type", "type",
                           {{"int64", FeatureType::kInt64},
                            {"float", FeatureType::kFloat},
                            {"bytes", FeatureType::kBytes}},
                           &out->type));
  RETURN_IF_ERROR(r.Choice("kind", "kind",
                           {{"fixed", FeatureKind::kFixed}, {"varlen", FeatureKind::kVarLen}},
                           &out->kind));
  if (r.Has("length") && !YAML::convert<int>::decode(r.Get("length"), out->length)) {
    return r.Error(
        "length", absl::StrCat("length must be an integer, got ", yaml::Describe(r.Get("length"))));
  }
  if (r.Has("default") && !YAML::convert<double>::decode(r.Get("default"), out->default_value)) {
    return r.Error("default", absl::StrCat("default must be a number, got ",
                                           yaml::Describe(r.Get("default"))));
  }
  if (r.Has("max_length") && !YAML::convert<int>::decode(r.Get("max_length"), out->max_length)) {
    return r.Error("max_length", absl::StrCat("max_length must be an integer, got ",
                                              yaml::Describe(r.Get("max_length"))));
  }
  // bytes can only be varlen, so that is its default; numbers default to fixed.
  if (!r.Has("kind")) {
    out->kind = out->type == FeatureType::kBytes ? FeatureKind::kVarLen : FeatureKind::kFixed;
  }
  // Keys that do not apply to the kind: at the kind's line (the map's when
  // the kind is implied).
  if (out->kind == FeatureKind::kVarLen && (r.Has("length") || r.Has("default"))) {
    return r.Error("kind", absl::StrCat("\"", r.Has("length") ? "length" : "default",
                                        "\" applies only to kind: fixed"));
  }
  if (out->kind == FeatureKind::kFixed && r.Has("max_length") && out->type != FeatureType::kBytes) {
    return r.Error("kind", "\"max_length\" applies only to kind: varlen");
  }
  if (std::string msg = CheckEntry(*out); !msg.empty()) return r.MapError(msg);
  return absl::OkStatus();
}

absl::Status ReadLabel(const YAML::Node& node, FeatureSpec* spec) {
  if (node.IsScalar()) {  // shorthand: `label: clicked` (float)
    spec->label_name = node.Scalar();
    return absl::OkStatus();
  }
  if (!node.IsMap()) {
    return SpecError(yaml::LineOf(node), "label must be a map such as {name: label, type: float}");
  }
  if (const YAML::Node name = node["name"]; name && name.IsScalar()) {
    spec->label_name = name.Scalar();
  }
  yaml::MapReader r =
      yaml::MapReader::Named(node, absl::StrCat("label \"", spec->label_name, "\""));
  RETURN_IF_ERROR(r.Check({"name", "type"}, "{name: label, type: float}"));
  if (r.Has("name") && !r.Get("name").IsScalar()) return r.Error("name", "name must be a string");
  return r.Choice("type", "label type",
                  {{"int64", FeatureType::kInt64}, {"float", FeatureType::kFloat}},
                  &spec->label_type);
}

absl::StatusOr<FeatureSpec> FromYamlImpl(const std::string& yaml_text) {
  const YAML::Node root = yaml::LoadDocument(yaml_text);
  if (!root || root.IsNull()) return SpecError(0, "empty document");
  yaml::MapReader r = yaml::MapReader::Named(root, std::string(kFeatureSpec));
  RETURN_IF_ERROR(r.Check({"label", "on_missing", "on_type_mismatch", "features"},
                          "{label: label, features: [...]}"));
  FeatureSpec spec;
  if (!r.Has("label")) return r.Missing("label", "e.g. label: {name: label, type: float}");
  RETURN_IF_ERROR(ReadLabel(r.Get("label"), &spec));
  if (spec.label_name.empty()) return r.MapError("label name must be non-empty");
  RETURN_IF_ERROR(r.Choice("on_missing", "on_missing policy",
                           {{"default", MissingPolicy::kDefault}, {"error", MissingPolicy::kError}},
                           &spec.on_missing));
  RETURN_IF_ERROR(
      r.Choice("on_type_mismatch", "on_type_mismatch policy",
               {{"error", MismatchPolicy::kError}, {"default", MismatchPolicy::kDefault}},
               &spec.on_type_mismatch));
  if (!r.Has("features")) return r.Missing("features", "a list of features");
  std::vector<int> feature_lines;
  RETURN_IF_ERROR(r.ForEachItem("features", [&](const YAML::Node& item, size_t i) {
    return ReadFeature(item, static_cast<int>(i), &spec.features.emplace_back(),
                       &feature_lines.emplace_back());
  }));
  // Cross-feature checks, here rather than only in Validate() so that the
  // message can point at both lines.
  absl::flat_hash_map<absl::string_view, size_t> first;
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const std::string& name = spec.features[i].name;
    if (name == spec.label_name) {
      return FeatureError(name, static_cast<int>(i), feature_lines[i],
                          "has the same name as the label (a label used as a feature "
                          "leaks the answer)");
    }
    auto [pos, inserted] = first.emplace(name, i);
    if (!inserted) {
      return FeatureError(
          name, static_cast<int>(i), feature_lines[i],
          absl::StrCat("duplicate name (first defined on line ", feature_lines[pos->second], ")"));
    }
  }
  absl::Status v = spec.Validate();  // belt and braces: one definition of valid
  if (!v.ok()) return v;
  return spec;
}

}  // namespace

std::string_view FeatureTypeName(FeatureType t) {
  switch (t) {
    case FeatureType::kInt64:
      return "int64";
    case FeatureType::kFloat:
      return "float";
    case FeatureType::kBytes:
      return "bytes";
  }
  return "unknown";
}

absl::StatusOr<FeatureSpec> FeatureSpec::FromYaml(const std::string& yaml_text) {
  // yaml-cpp reports syntax errors and failed conversions by throwing.
  return yaml::NoThrow(kFeatureSpec, [&] { return FromYamlImpl(yaml_text); });
}

absl::StatusOr<FeatureSpec> FeatureSpec::FromYamlFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open feature spec file ", path));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading feature spec file ", path));
  absl::StatusOr<FeatureSpec> spec = FromYaml(text.str());
  if (!spec.ok()) {
    return absl::Status(spec.status().code(), absl::StrCat(path, ": ", spec.status().message()));
  }
  return spec;
}

absl::Status FeatureSpec::Validate() const {
  if (label_name.empty()) return SpecError(0, "label name must be non-empty");
  if (label_type == FeatureType::kBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("label \"", label_name, "\": type must be int64 or float"));
  }
  absl::flat_hash_map<absl::string_view, size_t> first;
  for (size_t i = 0; i < features.size(); ++i) {
    const FeatureSpecEntry& f = features[i];
    if (std::string msg = CheckEntry(f); !msg.empty()) {
      return FeatureError(f.name, static_cast<int>(i), 0, msg);
    }
    if (f.name == label_name) {
      return FeatureError(f.name, static_cast<int>(i), 0, "has the same name as the label");
    }
    if (!first.emplace(f.name, i).second) {
      return FeatureError(f.name, static_cast<int>(i), 0, "duplicate name");
    }
  }
  return absl::OkStatus();
}

std::string FeatureSpec::ToYaml() const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "label" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "name"
      << YAML::Value << label_name << YAML::Key << "type" << YAML::Value
      << std::string(FeatureTypeName(label_type)) << YAML::EndMap;
  out << YAML::Key << "on_missing" << YAML::Value
      << (on_missing == MissingPolicy::kError ? "error" : "default");
  out << YAML::Key << "on_type_mismatch" << YAML::Value
      << (on_type_mismatch == MismatchPolicy::kDefault ? "default" : "error");
  out << YAML::Key << "features" << YAML::Value << YAML::BeginSeq;
  for (const FeatureSpecEntry& f : features) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << f.name;
    out << YAML::Key << "type" << YAML::Value << std::string(FeatureTypeName(f.type));
    if (f.kind == FeatureKind::kFixed) {
      out << YAML::Key << "kind" << YAML::Value << "fixed";
      out << YAML::Key << "length" << YAML::Value << f.length;
      out << YAML::Key << "default" << YAML::Value << DoubleText(f.default_value);
    } else {
      out << YAML::Key << "kind" << YAML::Value << "varlen";
      if (f.max_length != 0) out << YAML::Key << "max_length" << YAML::Value << f.max_length;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

int FeatureSpec::IndexOf(const std::string& name) const {
  for (size_t i = 0; i < features.size(); ++i) {
    if (features[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace brook::input
