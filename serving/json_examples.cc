#include "serving/json_examples.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <nlohmann/json.hpp>
#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tensorflow/example.pb.h"

namespace brook::serving {

namespace {

using Json = nlohmann::json;

const char* JsonKind(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "number";
    case Json::value_t::string:
      return "string";
    case Json::value_t::array:
      return "list";
    case Json::value_t::object:
      return "object";
    default:
      return "value";
  }
}

const char* Expected(input::FeatureType t) {
  switch (t) {
    case input::FeatureType::kFloat:
      return "float (a number or list of numbers)";
    case input::FeatureType::kInt64:
      return "int64 (an integer or list of integers)";
    case input::FeatureType::kBytes:
      return "bytes (a string, {\"b64\": ...}, or a list of them)";
  }
  return "";
}

absl::Status TypeError(const std::string& where, input::FeatureType t, const Json& got) {
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": expected ", Expected(t), ", got ", JsonKind(got)));
}

// Appends one scalar to `f` as type `t`.
absl::Status AppendScalar(const std::string& where, input::FeatureType t, const Json& v,
                          tf::Feature* f) {
  switch (t) {
    case input::FeatureType::kFloat: {
      if (!v.is_number()) return TypeError(where, t, v);
      const double d = v.get<double>();
      if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", v.dump(), " is not a finite float"));
      }
      f->mutable_float_list()->add_value(static_cast<float>(d));
      return absl::OkStatus();
    }
    case input::FeatureType::kInt64: {
      if (v.is_number_unsigned()) {
        f->mutable_int64_list()->add_value(static_cast<int64_t>(v.get<uint64_t>()));
      } else if (v.is_number_integer()) {
        f->mutable_int64_list()->add_value(v.get<int64_t>());
      } else if (v.is_number_float() && std::isfinite(v.get<double>()) &&
                 v.get<double>() == std::floor(v.get<double>()) &&
                 std::fabs(v.get<double>()) >= 9.2e18) {
        // JSON reads an integer beyond int64 and uint64 as a double.
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": ", v.dump(), " is out of range (ids are int64, or uint64 up to 2^64-1)"));
      } else {
        return TypeError(where, t, v);
      }
      return absl::OkStatus();
    }
    case input::FeatureType::kBytes: {
      if (v.is_string()) {
        f->mutable_bytes_list()->add_value(v.get<std::string>());
        return absl::OkStatus();
      }
      if (v.is_object() && v.size() == 1 && v.contains("b64") && v["b64"].is_string()) {
        std::string raw;
        if (!absl::Base64Unescape(v["b64"].get<std::string>(), &raw)) {
          return absl::InvalidArgumentError(absl::StrCat(where, ".b64: not base64"));
        }
        f->mutable_bytes_list()->add_value(std::move(raw));
        return absl::OkStatus();
      }
      return TypeError(where, t, v);
    }
  }
  return absl::OkStatus();
}

// The spec entry named `name`, or nullptr (the label is not an entry).
const input::FeatureSpecEntry* Lookup(
    const absl::flat_hash_map<std::string_view, const input::FeatureSpecEntry*>& by_name,
    const std::string& name) {
  auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : it->second;
}

class Converter {
 public:
  explicit Converter(const input::FeatureSpec& spec) : spec_(spec) {
    for (const input::FeatureSpecEntry& e : spec.features) by_name_.emplace(e.name, &e);
  }

  // Sets feature `name` of `ex` from `v`. `where` names it in errors.
  absl::Status Set(const std::string& where, const std::string& name, const Json& v,
                   tf::Example* ex) const {
    const input::FeatureSpecEntry* e = Lookup(by_name_, name);
    if (e == nullptr) {
      if (name == spec_.label_name) return absl::OkStatus();  // ignored
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the model has no feature \"", name, "\"", Known()));
    }
    if (v.is_null()) return absl::OkStatus();  // missing
    tf::Feature f;
    // An empty list keeps its kind: present, with no values.
    switch (e->type) {
      case input::FeatureType::kFloat:
        f.mutable_float_list();
        break;
      case input::FeatureType::kInt64:
        f.mutable_int64_list();
        break;
      case input::FeatureType::kBytes:
        f.mutable_bytes_list();
        break;
    }
    if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) {
        RETURN_IF_ERROR(AppendScalar(absl::StrCat(where, "[", i, "]"), e->type, v[i], &f));
      }
    } else {
      RETURN_IF_ERROR(AppendScalar(where, e->type, v, &f));
    }
    (*ex->mutable_features()->mutable_feature())[name] = std::move(f);
    return absl::OkStatus();
  }

 private:
  std::string Known() const {
    std::string s = " (its features: ";
    for (size_t i = 0; i < spec_.features.size() && i < 40; ++i) {
      absl::StrAppend(&s, i == 0 ? "" : ", ", spec_.features[i].name);
    }
    if (spec_.features.size() > 40) absl::StrAppend(&s, ", ...");
    return s + ")";
  }
  const input::FeatureSpec& spec_;
  absl::flat_hash_map<std::string_view, const input::FeatureSpecEntry*> by_name_;
};

}  // namespace

std::string JsonExamples::Where(size_t i) const {
  return absl::StrCat(columnar ? "inputs" : "instances", "[", i, "]");
}

absl::StatusOr<JsonExamples> ExamplesFromPredictJson(std::string_view body,
                                                     const input::FeatureSpec& spec) {
  Json doc = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    // Parse again for the position: the callback-free parse says only that
    // it failed.
    try {
      doc = Json::parse(body.begin(), body.end());
    } catch (const Json::parse_error& e) {
      // e.what() is "[json.exception...] parse error at line L, column C: why".
      std::string why = e.what();
      const size_t colon = why.find(": ");
      if (colon != std::string::npos) why = why.substr(colon + 2);
      return absl::InvalidArgumentError(
          absl::StrCat("body is not JSON at byte ", e.byte > 0 ? e.byte - 1 : 0, ": ", why));
    } catch (const Json::exception& e) {
      // Not a syntax error: e.g. a number beyond a double ("1e400").
      std::string why = e.what();
      const size_t bracket = why.find("] ");
      if (bracket != std::string::npos) why = why.substr(bracket + 2);
      return absl::InvalidArgumentError(absl::StrCat("body is not JSON: ", why));
    }
    return absl::InvalidArgumentError("body is not JSON");
  }
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "body must be a JSON object with \"instances\" or \"inputs\", got ", JsonKind(doc)));
  }
  const bool has_instances = doc.contains("instances");
  const bool has_inputs = doc.contains("inputs");
  for (const auto& [key, value] : doc.items()) {
    if (key != "instances" && key != "inputs" && key != "signature_name") {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown field \"", key, "\" in the body (known: instances, inputs, signature_name)"));
    }
  }
  if (has_instances == has_inputs) {
    return absl::InvalidArgumentError(
        "body must have exactly one of \"instances\" (a list of examples) and \"inputs\" "
        "(columnar: feature -> list of values)");
  }
  const Converter conv(spec);
  JsonExamples out;
  std::string bytes;
  if (has_instances) {
    const Json& list = doc["instances"];
    if (!list.is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("instances: expected a list of objects, got ", JsonKind(list)));
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = absl::StrCat("instances[", i, "]");
      if (!list[i].is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": expected an object of feature values, got ", JsonKind(list[i])));
      }
      tf::Example ex;
      for (const auto& [name, value] : list[i].items()) {
        RETURN_IF_ERROR(conv.Set(absl::StrCat(where, ".", name), name, value, &ex));
      }
      ex.SerializeToString(&bytes);
      out.examples.push_back(bytes);
    }
    return out;
  }
  out.columnar = true;
  const Json& cols = doc["inputs"];
  if (!cols.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inputs: expected an object of feature -> list of values, got ", JsonKind(cols)));
  }
  size_t n = 0;
  std::string first;
  for (const auto& [name, value] : cols.items()) {
    if (!value.is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "inputs.", name, ": expected a list with one value per example, got ", JsonKind(value)));
    }
    if (first.empty()) {
      first = name;
      n = value.size();
    } else if (value.size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs.", name, ": ", value.size(), " values, but ", first, " has ", n));
    }
  }
  std::vector<tf::Example> examples(n);
  for (const auto& [name, value] : cols.items()) {
    for (size_t i = 0; i < n; ++i) {
      RETURN_IF_ERROR(
          conv.Set(absl::StrCat("inputs.", name, "[", i, "]"), name, value[i], &examples[i]));
    }
  }
  for (const tf::Example& ex : examples) {
    ex.SerializeToString(&bytes);
    out.examples.push_back(bytes);
  }
  return out;
}

absl::StatusOr<std::string> PredictJsonFromExamples(absl::Span<const std::string> examples,
                                                    const input::FeatureSpec& spec) {
  Json instances = Json::array();
  for (size_t i = 0; i < examples.size(); ++i) {
    tf::Example ex;
    if (!ex.ParseFromString(examples[i])) {
      return absl::InvalidArgumentError(absl::StrCat("record ", i, " is not a tf.train.Example"));
    }
    Json instance = Json::object();
    const auto& features = ex.features().feature();
    for (const input::FeatureSpecEntry& e : spec.features) {
      auto it = features.find(e.name);
      if (it == features.end()) continue;
      Json values = Json::array();
      for (float v : it->second.float_list().value()) values.push_back(v);
      for (int64_t v : it->second.int64_list().value()) values.push_back(v);
      for (const std::string& v : it->second.bytes_list().value()) {
        const bool printable = std::all_of(v.begin(), v.end(), [](char c) {
          return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
        });
        if (printable) {
          values.push_back(v);
        } else {
          values.push_back({{"b64", absl::Base64Escape(v)}});
        }
      }
      instance[e.name] = values.size() == 1 ? values[0] : values;
    }
    instances.push_back(std::move(instance));
  }
  return Json{{"instances", std::move(instances)}}.dump();
}

}  // namespace brook::serving
