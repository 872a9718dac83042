#include "datatools/data_schema.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/absl_compat.h"
#include "common/status_macros.h"
#include "common/yaml_fields.h"

namespace brook::datatools {
namespace {

// Debian's abseil has its own string_view type, not std's.

constexpr std::string_view kDataSchema = "data schema";  // errors about the whole file

// Shortest text that reads back as the same float32: the schema file stays
// readable (0.1, not 0.100000001490116) and a check of the data the schema
// came from compares equal.
std::string FloatText(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v));
  return std::string(buf, end - buf);
}

std::string NumberText(double v) { return absl::StrFormat("%.6g", v); }

// The number at `key` as yaml-cpp converts it to T (".inf" is a double).
template <typename T>
absl::Status ReadNumber(const yaml::MapReader& r, const std::string& key, std::optional<T>* out) {
  if (!r.Has(key)) return absl::OkStatus();
  T x{};
  if (!YAML::convert<T>::decode(r.Get(key), x)) {
    return r.Error(key, absl::StrCat(key, " must be a number, got ", yaml::Describe(r.Get(key))));
  }
  *out = x;
  return absl::OkStatus();
}

// A [min, max] pair at `key`.
template <typename T>
absl::Status ReadPair(const yaml::MapReader& r, const std::string& key, std::optional<T>* min,
                      std::optional<T>* max) {
  const YAML::Node v = r.Get(key);
  if (!v.IsSequence() || v.size() != 2) {
    return r.Error(key, absl::StrCat(key, " must be a list [min, max], got ", yaml::Describe(v)));
  }
  T bounds[2] = {};
  for (size_t i = 0; i < 2; ++i) {
    if (!YAML::convert<T>::decode(v[i], bounds[i])) {
      return yaml::FieldError(
          r.Path(key), yaml::LineOf(v[i]),
          absl::StrCat(key, "[", i, "] must be a number, got ", yaml::Describe(v[i])));
    }
  }
  *min = bounds[0];
  *max = bounds[1];
  return absl::OkStatus();
}

absl::StatusOr<FeatureSchema> ReadFeature(const YAML::Node& node, size_t index) {
  FeatureSchema f;
  // Named after the feature where it gives a name, for every message.
  const YAML::Node name = node.IsMap() ? node["name"] : YAML::Node();
  yaml::MapReader r = yaml::MapReader::Named(
      node, name && name.IsScalar() ? absl::StrCat("feature \"", name.Scalar(), "\"")
                                    : absl::StrCat("features[", index, "]"));
  RETURN_IF_ERROR(r.Check({"name", "type", "presence", "values", "range", "distinct", "top_values"},
                          "{name: age, type: int64, presence: 1}"));
  RETURN_IF_ERROR(r.String("name", &f.name));
  if (f.name.empty()) return r.Missing("name", "");
  if (!r.Has("type")) return r.Missing("type", "one of int64, float, bytes");
  if (!yaml::ParseChoice(r.Get("type"),
                         {{"int64", ValueKind::kInt64},
                          {"float", ValueKind::kFloat},
                          {"bytes", ValueKind::kBytes}},
                         &f.type)) {
    return r.Error("type", absl::StrCat("unknown type ", yaml::Describe(r.Get("type")),
                                        "; expected int64, float or bytes"));
  }
  RETURN_IF_ERROR(ReadNumber(r, "presence", &f.min_presence));
  if (f.min_presence && !(*f.min_presence >= 0 && *f.min_presence <= 1)) {
    return r.Error("presence", absl::StrCat("presence must be in [0, 1], got ",
                                            yaml::Describe(r.Get("presence"))));
  }
  if (r.Has("values")) RETURN_IF_ERROR(ReadPair(r, "values", &f.min_values, &f.max_values));
  if (r.Has("range")) {
    if (f.type == ValueKind::kInt64) {
      RETURN_IF_ERROR(ReadPair(r, "range", &f.int_min, &f.int_max));
    } else if (f.type == ValueKind::kFloat) {
      RETURN_IF_ERROR(ReadPair(r, "range", &f.float_min, &f.float_max));
    } else {
      return r.Error("range", "a bytes feature has no range");
    }
  }
  RETURN_IF_ERROR(ReadNumber(r, "distinct", &f.distinct));
  if (r.Has("top_values")) {
    const YAML::Node v = r.Get("top_values");
    if (!v.IsSequence()) {
      return r.Error("top_values",
                     absl::StrCat("top_values must be a list, got ", yaml::Describe(v)));
    }
    for (const YAML::Node& t : v) f.top_values.push_back(t.Scalar());
  }
  if ((f.min_values && f.max_values && *f.min_values > *f.max_values) ||
      (f.int_min && *f.int_min > *f.int_max) || (f.float_min && *f.float_min > *f.float_max)) {
    return r.MapError("a [min, max] pair has min > max");
  }
  return f;
}

absl::StatusOr<DataSchema> FromNode(const YAML::Node& root) {
  yaml::MapReader r(root, "", std::string(kDataSchema));
  RETURN_IF_ERROR(r.Check({"examples", "features"}, "{examples: 1000, features: [...]}"));
  DataSchema schema;
  RETURN_IF_ERROR(
      r.Int("examples", int64_t{0}, std::numeric_limits<int64_t>::max(), &schema.examples));
  std::set<std::string> names;
  RETURN_IF_ERROR(r.ForEachItem("features", [&](const YAML::Node& item, size_t i) -> absl::Status {
    ASSIGN_OR_RETURN(FeatureSchema f, ReadFeature(item, i));
    if (!names.insert(f.name).second) {
      return yaml::FieldError(absl::StrCat("feature \"", f.name, "\""), yaml::LineOf(item),
                              "is listed twice");
    }
    schema.features.push_back(std::move(f));
    return absl::OkStatus();
  }));
  return schema;
}

Anomaly Error(AnomalyKind kind, const std::string& feature, std::string message) {
  return Anomaly{kind, feature, std::move(message), false};
}

// Checks numeric ranges: float features compare as float32 (the schema's
// text is the shortest form of a float32), int64 features exactly.
void CheckRange(const FeatureSchema& fs, const FeatureStats& f, const CheckOptions& options,
                std::vector<Anomaly>* out) {
  auto report = [&](double value, double lo, double hi, std::string_view which) {
    out->push_back(
        Error(AnomalyKind::kOutOfRange, fs.name,
              absl::StrCat(AbslView(which), " value ", NumberText(value), " is outside the range [",
                           NumberText(lo), ", ", NumberText(hi), "]")));
  };
  if (fs.type == ValueKind::kFloat && fs.float_min && fs.float_max) {
    const double lo0 = static_cast<float>(*fs.float_min);
    const double hi0 = static_cast<float>(*fs.float_max);
    const double slack = options.range_slack * (hi0 - lo0);
    const double lo = lo0 - slack;
    const double hi = hi0 + slack;
    if (f.float_min && *f.float_min < lo) report(*f.float_min, lo, hi, "min");
    if (f.float_max && *f.float_max > hi) report(*f.float_max, lo, hi, "max");
    if (f.non_finite > 0) {
      out->push_back(Error(AnomalyKind::kOutOfRange, fs.name,
                           absl::StrCat(f.non_finite, " NaN or infinite values")));
    }
  } else if (fs.type == ValueKind::kInt64 && fs.int_min && fs.int_max) {
    if (options.range_slack == 0) {
      if (f.int_min && *f.int_min < *fs.int_min)
        report(*f.int_min, *fs.int_min, *fs.int_max, "min");
      if (f.int_max && *f.int_max > *fs.int_max)
        report(*f.int_max, *fs.int_min, *fs.int_max, "max");
    } else {
      const double lo0 = static_cast<double>(*fs.int_min);
      const double hi0 = static_cast<double>(*fs.int_max);
      const double slack = options.range_slack * (hi0 - lo0);
      if (f.int_min && *f.int_min < lo0 - slack)
        report(*f.int_min, lo0 - slack, hi0 + slack, "min");
      if (f.int_max && *f.int_max > hi0 + slack)
        report(*f.int_max, lo0 - slack, hi0 + slack, "max");
    }
  }
}

}  // namespace

std::string_view AnomalyKindName(AnomalyKind k) {
  switch (k) {
    case AnomalyKind::kNoExamples:
      return "no_examples";
    case AnomalyKind::kMissingFeature:
      return "missing_feature";
    case AnomalyKind::kLowPresence:
      return "low_presence";
    case AnomalyKind::kTypeChange:
      return "type_change";
    case AnomalyKind::kValueCount:
      return "value_count";
    case AnomalyKind::kOutOfRange:
      return "out_of_range";
    case AnomalyKind::kNewFeature:
      return "new_feature";
  }
  return "?";
}

absl::StatusOr<DataSchema> DataSchema::FromYaml(const std::string& yaml_text) {
  return yaml::NoThrow(kDataSchema, [&] { return FromNode(yaml::LoadDocument(yaml_text)); });
}

absl::StatusOr<DataSchema> DataSchema::FromYamlFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open schema"));
  std::stringstream ss;
  ss << in.rdbuf();
  auto schema = FromYaml(ss.str());
  if (!schema.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", schema.status().message()));
  }
  return schema;
}

const FeatureSchema* DataSchema::Find(std::string_view name) const {
  for (const FeatureSchema& f : features) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string DataSchema::ToYaml() const {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "examples" << YAML::Value << examples;
  e << YAML::Key << "features" << YAML::Value << YAML::BeginSeq;
  for (const FeatureSchema& f : features) {
    e << YAML::BeginMap;
    e << YAML::Key << "name" << YAML::Value << f.name;
    e << YAML::Key << "type" << YAML::Value << std::string(ValueKindName(f.type));
    if (f.min_presence) {
      e << YAML::Key << "presence" << YAML::Value << absl::StrFormat("%g", *f.min_presence);
    }
    if (f.min_values && f.max_values) {
      e << YAML::Key << "values" << YAML::Value << YAML::Flow << YAML::BeginSeq << *f.min_values
        << *f.max_values << YAML::EndSeq;
    }
    if (f.int_min && f.int_max) {
      e << YAML::Key << "range" << YAML::Value << YAML::Flow << YAML::BeginSeq << *f.int_min
        << *f.int_max << YAML::EndSeq;
    } else if (f.float_min && f.float_max) {
      e << YAML::Key << "range" << YAML::Value << YAML::Flow << YAML::BeginSeq
        << FloatText(*f.float_min) << FloatText(*f.float_max) << YAML::EndSeq;
    }
    if (f.distinct) e << YAML::Key << "distinct" << YAML::Value << *f.distinct;
    if (!f.top_values.empty()) {
      e << YAML::Key << "top_values" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (const std::string& v : f.top_values) e << YAML::DoubleQuoted << v;
      e << YAML::EndSeq;
    }
    e << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  return absl::StrCat(
      "# Data schema inferred by `brook data stats --schema-out`; check new data\n"
      "# with `brook data stats --check THIS_FILE FILES...`.\n",
      e.c_str(), "\n");
}

DataSchema InferSchema(const DatasetStats& stats, int max_top_values) {
  DataSchema schema;
  schema.examples = stats.examples;
  for (const FeatureStats& f : stats.features) {
    FeatureSchema fs;
    fs.name = f.name;
    fs.type = f.main_kind();
    const double presence =
        stats.examples > 0 ? static_cast<double>(f.present) / static_cast<double>(stats.examples)
                           : 0;
    // Rounded down so the data the schema came from passes its own check.
    fs.min_presence = std::floor(presence * 1e4) / 1e4;
    fs.min_values = f.min_values;
    fs.max_values = f.max_values;
    if (fs.type == ValueKind::kInt64) {
      fs.int_min = f.int_min;
      fs.int_max = f.int_max;
    } else if (fs.type == ValueKind::kFloat) {
      fs.float_min = f.float_min;
      fs.float_max = f.float_max;
    }
    if (fs.type != ValueKind::kFloat) {
      fs.distinct = static_cast<int64_t>(std::llround(f.distinct));
      for (const TopValue& t : f.top) {
        if (static_cast<int>(fs.top_values.size()) >= max_top_values) break;
        if (IsPrintableText(t.value)) fs.top_values.push_back(t.value);
      }
    }
    schema.features.push_back(std::move(fs));
  }
  return schema;
}

std::vector<Anomaly> CheckStats(const DatasetStats& stats, const DataSchema& schema,
                                const CheckOptions& options) {
  std::vector<Anomaly> out;
  if (stats.examples == 0) {
    out.push_back(Error(AnomalyKind::kNoExamples, "", "the dataset has no examples"));
    return out;
  }
  const double n = static_cast<double>(stats.examples);
  for (const FeatureSchema& fs : schema.features) {
    const FeatureStats* f = stats.Find(fs.name);
    if (f == nullptr || f->present == 0) {
      if (fs.min_presence.value_or(0) > 0) {
        out.push_back(Error(AnomalyKind::kMissingFeature, fs.name,
                            absl::StrCat("in none of the ", stats.examples,
                                         " examples; the schema expects presence >= ",
                                         NumberText(*fs.min_presence))));
      }
      continue;
    }
    const double presence = f->present / n;
    if (fs.min_presence && presence < *fs.min_presence - options.presence_margin) {
      out.push_back(
          Error(AnomalyKind::kLowPresence, fs.name,
                absl::StrFormat("present in %.4f of examples (%d missing); the schema "
                                "expects >= %.4f (margin %.4f)",
                                presence, f->missing, *fs.min_presence, options.presence_margin)));
    }
    for (int k = 0; k < kNumValueKinds; ++k) {
      if (static_cast<ValueKind>(k) == fs.type || f->kind_examples[k] == 0) continue;
      out.push_back(
          Error(AnomalyKind::kTypeChange, fs.name,
                absl::StrCat(AbslView(ValueKindName(static_cast<ValueKind>(k))), " values in ",
                             f->kind_examples[k], " examples; the schema says ",
                             AbslView(ValueKindName(fs.type)))));
    }
    if (fs.min_values && f->min_values < *fs.min_values) {
      out.push_back(Error(AnomalyKind::kValueCount, fs.name,
                          absl::StrCat("an example has ", f->min_values,
                                       " values; the schema expects at least ", *fs.min_values)));
    }
    if (fs.max_values && f->max_values > *fs.max_values) {
      out.push_back(Error(AnomalyKind::kValueCount, fs.name,
                          absl::StrCat("an example has ", f->max_values,
                                       " values; the schema expects at most ", *fs.max_values)));
    }
    CheckRange(fs, *f, options, &out);
  }
  for (const FeatureStats& f : stats.features) {
    if (f.present == 0 || schema.Find(f.name) != nullptr) continue;
    out.push_back(Anomaly{AnomalyKind::kNewFeature, f.name,
                          absl::StrCat("not in the schema; present in ", f.present, " examples as ",
                                       AbslView(ValueKindName(f.main_kind()))),
                          !options.new_features_are_errors});
  }
  return out;
}

bool HasErrors(const std::vector<Anomaly>& anomalies) {
  return std::any_of(anomalies.begin(), anomalies.end(),
                     [](const Anomaly& a) { return !a.warning; });
}

nlohmann::json AnomaliesToJson(const std::vector<Anomaly>& anomalies) {
  nlohmann::json out = nlohmann::json::array();
  for (const Anomaly& a : anomalies) {
    out.push_back({{"kind", AnomalyKindName(a.kind)},
                   {"feature", PrintableValue(a.feature)},
                   {"severity", a.warning ? "warning" : "error"},
                   {"message", PrintableValue(a.message)}});
  }
  return out;
}

}  // namespace brook::datatools
