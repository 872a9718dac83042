#include "features/feature_spec.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/yaml.h"

namespace brook::input {
namespace {

// A fixed feature's values are stored inline per row, so an absurd length
// (a typo such as 10000000) would make every batch gigabytes. 1M values per
// example is far above any real dense feature.
constexpr int kMaxFixedLength = 1 << 20;

constexpr absl::string_view kTypesAllowed = "int64, float, bytes";

// Note: our abseil (Debian 20220623) has its own absl::string_view, which
// StrCat and StrJoin take; std::string_view must be converted explicitly.

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

std::string LineSuffix(int line) { return line > 0 ? absl::StrCat(" (line ", line, ")") : ""; }

absl::Status FeatureError(const std::string& name, int index, int line, absl::string_view msg) {
  const std::string who =
      name.empty() ? absl::StrCat("feature #", index + 1) : absl::StrCat("feature \"", name, "\"");
  return absl::InvalidArgumentError(absl::StrCat(who, LineSuffix(line), ": ", msg));
}

absl::Status SpecError(int line, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("feature spec", LineSuffix(line), ": ", msg));
}

// Sets *out to the value named by scalar `node`; false if it names none.
template <typename E>
bool ParseChoice(const YAML::Node& node,
                 std::initializer_list<std::pair<absl::string_view, E>> choices, E* out) {
  if (!node.IsScalar()) return false;
  for (const auto& [name, value] : choices) {
    if (node.Scalar() == name) {
      *out = value;
      return true;
    }
  }
  return false;
}

bool ParseType(const YAML::Node& node, FeatureType* t) {
  return ParseChoice(node,
                     {{"int64", FeatureType::kInt64},
                      {"float", FeatureType::kFloat},
                      {"bytes", FeatureType::kBytes}},
                     t);
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

int LineOf(const YAML::Node& n) { return n.Mark().is_null() ? 0 : n.Mark().line + 1; }

std::string ScalarText(const YAML::Node& n) {
  return n.IsScalar() ? absl::StrCat("\"", n.Scalar(), "\"") : std::string("a non-scalar");
}

// Calls fn(key, value) for each pair of `map`; unknown keys and keys given
// twice are errors so that a typo ("lenght: 4") is never silently ignored.
template <typename ErrorFn, typename Fn>
absl::Status ForEachKey(const YAML::Node& map, std::initializer_list<absl::string_view> allowed,
                        const ErrorFn& error, Fn&& fn) {
  absl::flat_hash_map<std::string, int> seen;
  // Range-for binds each pair by value: yaml-cpp's operator-> returns a proxy,
  // so `const Node& key = it->first` would dangle.
  for (const auto& pair : map) {
    const YAML::Node key = pair.first;
    const int line = LineOf(key);
    if (!key.IsScalar()) return error(line, "keys must be plain names");
    const std::string& k = key.Scalar();
    bool known = false;
    for (absl::string_view a : allowed) known |= (a == k);
    if (!known) {
      return error(
          line, absl::StrCat("unknown key \"", k, "\"; allowed: ", absl::StrJoin(allowed, ", ")));
    }
    auto [pos, inserted] = seen.emplace(k, line);
    if (!inserted) {
      return error(line,
                   absl::StrCat("key \"", k, "\" given twice (first on line ", pos->second, ")"));
    }
    absl::Status s = fn(k, pair.second);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReadFeature(const YAML::Node& node, int index, FeatureSpecEntry* out, int* line) {
  *line = LineOf(node);
  if (!node.IsMap()) {
    return FeatureError("", index, *line,
                        "must be a map such as {name: I1, type: float, length: 1}");
  }
  // The name is needed for every other message, so read it first.
  if (const YAML::Node name = node["name"]; name && name.IsScalar()) out->name = name.Scalar();
  auto error = [&](int l, absl::string_view msg) { return FeatureError(out->name, index, l, msg); };
  bool has_type = false, has_kind = false, has_length = false, has_default = false,
       has_max_length = false;
  int kind_line = *line;
  absl::Status s = ForEachKey(
      node, {"name", "type", "kind", "length", "default", "max_length"}, error,
      [&](const std::string& key, const YAML::Node& v) -> absl::Status {
        const int l = LineOf(v);
        if (key == "name") {
          if (!v.IsScalar()) return error(l, "name must be a non-empty string");
        } else if (key == "type") {
          has_type = true;
          if (!ParseType(v, &out->type)) {
            return error(
                l, absl::StrCat("unknown type ", ScalarText(v), "; allowed: ", kTypesAllowed));
          }
        } else if (key == "kind") {
          has_kind = true;
          kind_line = l;
          if (!ParseChoice(v, {{"fixed", FeatureKind::kFixed}, {"varlen", FeatureKind::kVarLen}},
                           &out->kind)) {
            return error(l,
                         absl::StrCat("unknown kind ", ScalarText(v), "; allowed: fixed, varlen"));
          }
        } else if (key == "length") {
          has_length = true;
          if (!YAML::convert<int>::decode(v, out->length)) {
            return error(l, absl::StrCat("length must be an integer, got ", ScalarText(v)));
          }
        } else if (key == "default") {
          has_default = true;
          if (!YAML::convert<double>::decode(v, out->default_value)) {
            return error(l, absl::StrCat("default must be a number, got ", ScalarText(v)));
          }
        } else if (key == "max_length") {
          has_max_length = true;
          if (!YAML::convert<int>::decode(v, out->max_length)) {
            return error(l, absl::StrCat("max_length must be an integer, got ", ScalarText(v)));
          }
        }
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  if (!has_type) {
    return error(*line, absl::StrCat("missing \"type\" (one of ", kTypesAllowed, ")"));
  }
  // bytes can only be varlen, so that is its default; numbers default to fixed.
  if (!has_kind) {
    out->kind = out->type == FeatureType::kBytes ? FeatureKind::kVarLen : FeatureKind::kFixed;
  }
  if (out->kind == FeatureKind::kVarLen && (has_length || has_default)) {
    return error(kind_line, absl::StrCat("\"", has_length ? "length" : "default",
                                         "\" applies only to kind: fixed"));
  }
  if (out->kind == FeatureKind::kFixed && has_max_length && out->type != FeatureType::kBytes) {
    return error(kind_line, "\"max_length\" applies only to kind: varlen");
  }
  if (std::string msg = CheckEntry(*out); !msg.empty()) return error(*line, msg);
  return absl::OkStatus();
}

absl::Status ReadLabel(const YAML::Node& node, FeatureSpec* spec) {
  const int line = LineOf(node);
  if (node.IsScalar()) {  // shorthand: `label: clicked` (float)
    spec->label_name = node.Scalar();
    return absl::OkStatus();
  }
  if (!node.IsMap()) {
    return SpecError(line, "label must be a map such as {name: label, type: float}");
  }
  auto error = [&](int l, absl::string_view msg) {
    return absl::InvalidArgumentError(
        absl::StrCat("label \"", spec->label_name, "\"", LineSuffix(l), ": ", msg));
  };
  if (const YAML::Node name = node["name"]; name && name.IsScalar()) {
    spec->label_name = name.Scalar();
  }
  return ForEachKey(
      node, {"name", "type"}, error,
      [&](const std::string& key, const YAML::Node& v) -> absl::Status {
        if (key == "type") {
          if (!ParseType(v, &spec->label_type) || spec->label_type == FeatureType::kBytes) {
            return error(LineOf(v), absl::StrCat("unknown label type ", ScalarText(v),
                                                 "; allowed: int64, float"));
          }
        } else if (!v.IsScalar()) {
          return error(LineOf(v), "name must be a string");
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<FeatureSpec> FromYamlImpl(const std::string& yaml_text) {
  const YAML::Node root = YAML::Load(yaml_text);
  if (!root || root.IsNull()) return SpecError(0, "empty document");
  if (!root.IsMap()) return SpecError(LineOf(root), "must be a map with label and features");
  FeatureSpec spec;
  std::vector<int> feature_lines;
  bool has_label = false, has_features = false;
  auto error = [](int l, absl::string_view msg) { return SpecError(l, msg); };
  absl::Status s = ForEachKey(
      root, {"label", "on_missing", "on_type_mismatch", "features"}, error,
      [&](const std::string& key, const YAML::Node& v) -> absl::Status {
        const int l = LineOf(v);
        if (key == "label") {
          has_label = true;
          return ReadLabel(v, &spec);
        }
        if (key == "on_missing") {
          if (!ParseChoice(v,
                           {{"default", MissingPolicy::kDefault}, {"error", MissingPolicy::kError}},
                           &spec.on_missing)) {
            return SpecError(l, absl::StrCat("on_missing: unknown policy ", ScalarText(v),
                                             "; allowed: default, error"));
          }
          return absl::OkStatus();
        }
        if (key == "on_type_mismatch") {
          if (!ParseChoice(
                  v, {{"error", MismatchPolicy::kError}, {"default", MismatchPolicy::kDefault}},
                  &spec.on_type_mismatch)) {
            return SpecError(l, absl::StrCat("on_type_mismatch: unknown policy ", ScalarText(v),
                                             "; allowed: error, default"));
          }
          return absl::OkStatus();
        }
        has_features = true;                      // key == "features"
        if (v.IsNull()) return absl::OkStatus();  // `features:` with nothing: none
        if (!v.IsSequence()) return SpecError(l, "features must be a list");
        for (size_t i = 0; i < v.size(); ++i) {
          FeatureSpecEntry entry;
          int line = 0;
          absl::Status fs = ReadFeature(v[i], static_cast<int>(i), &entry, &line);
          if (!fs.ok()) return fs;
          spec.features.push_back(std::move(entry));
          feature_lines.push_back(line);
        }
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  if (!has_label) {
    return SpecError(LineOf(root), "missing \"label\" (e.g. label: {name: label, type: float})");
  }
  if (spec.label_name.empty()) return SpecError(LineOf(root), "label name must be non-empty");
  if (!has_features) return SpecError(LineOf(root), "missing \"features\" list");
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
  // yaml-cpp reports syntax errors and failed conversions by throwing; no
  // exception may leave this API, so convert every one to a Status here.
  try {
    return FromYamlImpl(yaml_text);
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    return SpecError(line, absl::StrCat("invalid YAML: ", e.msg));
  } catch (const std::exception& e) {
    return SpecError(0, absl::StrCat("invalid YAML: ", e.what()));
  }
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
