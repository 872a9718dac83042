#include "serving/json_examples.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "serving/json_internal.h"
#include "tensorflow/example.pb.h"

namespace brook::serving {

std::string CutForError(std::string_view text, size_t most) {
  if (text.size() <= most) return std::string(text);
  size_t cut = most;
  // Not inside a UTF-8 character: back off its continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(std::string(text.substr(0, cut)), "... (", text.size(), " bytes)");
}

namespace internal {

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

namespace {

// Doubles from here on round to infinity as a float: FLT_MAX plus half its
// ulp (2^104), the tie included (it rounds to even, which is infinity).
const double kFloatOverflow =
    static_cast<double>(std::numeric_limits<float>::max()) + std::ldexp(1.0, 103);

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

// nlohmann's message without its "[json.exception...] " prefix, at most
// 300 bytes (it quotes the token it stopped at, which may be anything).
std::string Why(const nlohmann::detail::exception& e, std::string_view after) {
  std::string why = e.what();
  const size_t at = why.find(after);
  if (at != std::string::npos) why = why.substr(at + after.size());
  if (why.size() > 300) why = absl::StrCat(why.substr(0, 300), "...");
  return why;
}

}  // namespace

bool FitsFloat(double d) { return std::isfinite(d) && std::fabs(d) < kFloatOverflow; }

float ToFloat(double d) {
  // Between FLT_MAX and kFloatOverflow the conversion rounds to FLT_MAX;
  // said here, not left to the implementation.
  constexpr float kMax = std::numeric_limits<float>::max();
  if (d > kMax) return kMax;
  if (d < -kMax) return -kMax;
  return static_cast<float>(d);
}

bool IsIntegerBeyondUint64(double d) {
  return std::isfinite(d) && d == std::floor(d) && std::fabs(d) >= 9.2e18;
}

absl::Status TypeError(const std::string& where, input::FeatureType t, const char* got) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": expected ", Expected(t), ", got ", got));
}

absl::Status NotFiniteFloat(const std::string& where, double d) {
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", Json(d).dump(), " is not a finite float"));
}

absl::Status IdOutOfRange(const std::string& where, double d) {
  return absl::InvalidArgumentError(absl::StrCat(
      where, ": ", Json(d).dump(), " is out of range (ids are int64, or uint64 up to 2^64-1)"));
}

absl::Status UnknownFeature(const std::string& where, const std::string& name,
                            const input::FeatureSpec& spec) {
  std::string known = " (its features: ";
  for (size_t i = 0; i < spec.features.size() && i < 40; ++i) {
    absl::StrAppend(&known, i == 0 ? "" : ", ", spec.features[i].name);
  }
  if (spec.features.size() > 40) absl::StrAppend(&known, ", ...");
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": the model has no feature \"", CutForError(name), "\"", known, ")"));
}

absl::Status DuplicateKey(const std::string& where, const std::string& key) {
  if (where.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("key \"", CutForError(key), "\" is given twice in one object"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": \"", CutForError(key), "\" is given twice"));
}

absl::Status NotAnObject(const char* kind) {
  return absl::InvalidArgumentError(
      absl::StrCat("body must be a JSON object with \"instances\" or \"inputs\", got ", kind));
}

absl::Status UnknownTopLevelField(const std::string& key) {
  return absl::InvalidArgumentError(
      absl::StrCat("unknown field \"", CutForError(key),
                   "\" in the body (known: instances, inputs, signature_name)"));
}

absl::Status NeitherOrBoth() {
  return absl::InvalidArgumentError(
      "body must have exactly one of \"instances\" (a list of examples) and \"inputs\" "
      "(columnar: feature -> list of values)");
}

absl::Status BadSignature(const Json& given) {
  return absl::InvalidArgumentError(
      absl::StrCat("signature_name \"", CutForError(given.get_ref<const std::string&>()),
                   "\" is not this model's; its one signature is \"", kSignatureName, "\""));
}

absl::Status BadSignatureKind(const char* kind) {
  return absl::InvalidArgumentError(absl::StrCat("signature_name: expected a string, got ", kind));
}

absl::Status NotJson(const nlohmann::detail::exception& e, size_t position,
                     const std::string& last_token) {
  if (const auto* syntax = dynamic_cast<const nlohmann::detail::parse_error*>(&e)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "body is not JSON at byte ", syntax->byte > 0 ? syntax->byte - 1 : 0, ": ", Why(e, ": ")));
  }
  // Valid JSON, but a number beyond a double (out_of_range): the parser
  // stops just past it.
  const size_t at = position >= last_token.size() ? position - last_token.size() : 0;
  return absl::InvalidArgumentError(
      absl::StrCat("body: the number at byte ", at, " is out of range (", Why(e, "] "), ")"));
}

}  // namespace internal

namespace {

using internal::Json;
using internal::JsonKind;

// Appends one scalar to `f` as type `t`.
absl::Status AppendScalar(const std::string& where, input::FeatureType t, const Json& v,
                          tf::Feature* f) {
  switch (t) {
    case input::FeatureType::kFloat: {
      if (!v.is_number()) return internal::TypeError(where, t, JsonKind(v));
      const double d = v.get<double>();
      if (!internal::FitsFloat(d)) return internal::NotFiniteFloat(where, d);
      f->mutable_float_list()->add_value(internal::ToFloat(d));
      return absl::OkStatus();
    }
    case input::FeatureType::kInt64: {
      if (v.is_number_unsigned()) {
        f->mutable_int64_list()->add_value(static_cast<int64_t>(v.get<uint64_t>()));
      } else if (v.is_number_integer()) {
        f->mutable_int64_list()->add_value(v.get<int64_t>());
      } else if (v.is_number_float() && internal::IsIntegerBeyondUint64(v.get<double>())) {
        return internal::IdOutOfRange(where, v.get<double>());
      } else {
        return internal::TypeError(where, t, JsonKind(v));
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
      return internal::TypeError(where, t, JsonKind(v));
    }
  }
  return absl::OkStatus();
}

class Converter {
 public:
  explicit Converter(const input::FeatureSpec& spec) : spec_(spec) {
    for (const input::FeatureSpecEntry& e : spec.features) by_name_.emplace(e.name, &e);
  }

  // Sets feature `name` of `ex` from `v`. `where` names it in errors.
  absl::Status Set(const std::string& where, const std::string& name, const Json& v,
                   tf::Example* ex) const {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      if (name == spec_.label_name) return absl::OkStatus();  // ignored
      return internal::UnknownFeature(where, name, spec_);
    }
    const input::FeatureSpecEntry* e = it->second;
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
  const input::FeatureSpec& spec_;
  absl::flat_hash_map<std::string_view, const input::FeatureSpecEntry*> by_name_;
};

// Why `body` does not parse, with the byte offset (a DOM parse says only
// that it failed).
absl::Status NotJsonAt(std::string_view body) {
  struct Catcher : nlohmann::detail::json_sax_acceptor<Json> {
    absl::Status error = absl::InvalidArgumentError("body is not JSON");
    bool parse_error(size_t position, const std::string& last_token,
                     const nlohmann::detail::exception& e) {
      error = internal::NotJson(e, position, last_token);
      return false;
    }
  } catcher;
  Json::sax_parse(body.begin(), body.end(), &catcher);
  return catcher.error;
}

// The DOM of `body`, refusing a key given twice in any object (nlohmann
// would keep the last, so a misspelt copy could hide the value meant).
absl::StatusOr<Json> ParseRefusingDuplicates(std::string_view body) {
  std::vector<absl::flat_hash_set<std::string>> open;  // keys of each open object
  std::optional<std::string> duplicate;
  Json::parser_callback_t cb = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        open.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!open.empty() && !open.back().insert(parsed.get_ref<const std::string&>()).second &&
            !duplicate.has_value()) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  Json doc = Json::parse(body.begin(), body.end(), cb, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return NotJsonAt(body);
  if (duplicate.has_value()) return internal::DuplicateKey("", *duplicate);
  return doc;
}

}  // namespace

std::string JsonExamples::Where(size_t i) const {
  return absl::StrCat(columnar ? "inputs" : "instances", "[", i, "]");
}

absl::StatusOr<JsonExamples> ExamplesFromPredictJsonDom(std::string_view body,
                                                        const input::FeatureSpec& spec) {
  ASSIGN_OR_RETURN(Json doc, ParseRefusingDuplicates(body));
  if (!doc.is_object()) return internal::NotAnObject(JsonKind(doc));
  const bool has_instances = doc.contains("instances");
  const bool has_inputs = doc.contains("inputs");
  for (const auto& [key, value] : doc.items()) {
    if (key != "instances" && key != "inputs" && key != "signature_name") {
      return internal::UnknownTopLevelField(key);
    }
  }
  if (has_instances == has_inputs) return internal::NeitherOrBoth();
  if (auto sig = doc.find("signature_name"); sig != doc.end()) {
    if (!sig->is_string()) return internal::BadSignatureKind(JsonKind(*sig));
    if (!sig->get_ref<const std::string&>().empty() && *sig != internal::kSignatureName) {
      return internal::BadSignature(*sig);
    }
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
        RETURN_IF_ERROR(conv.Set(absl::StrCat(where, ".", CutForError(name)), name, value, &ex));
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
  std::optional<std::string> first;
  for (const auto& [name, value] : cols.items()) {
    if (!value.is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs.", CutForError(name),
                       ": expected a list with one value per example, got ", JsonKind(value)));
    }
    if (!first.has_value()) {
      first = name;
      n = value.size();
    } else if (value.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("inputs.", CutForError(name), ": ",
                                                     value.size(), " values, but ",
                                                     CutForError(*first), " has ", n));
    }
  }
  std::vector<tf::Example> examples(n);
  for (const auto& [name, value] : cols.items()) {
    for (size_t i = 0; i < n; ++i) {
      RETURN_IF_ERROR(conv.Set(absl::StrCat("inputs.", CutForError(name), "[", i, "]"), name,
                               value[i], &examples[i]));
    }
  }
  for (const tf::Example& ex : examples) {
    ex.SerializeToString(&bytes);
    out.examples.push_back(bytes);
  }
  return out;
}

absl::StatusOr<JsonExamples> ExamplesFromPredictJson(std::string_view body,
                                                     const input::FeatureSpec& spec) {
  std::optional<absl::StatusOr<JsonExamples>> fast =
      internal::ExamplesFromInstancesJson(body, spec);
  if (fast.has_value()) return *std::move(fast);
  return ExamplesFromPredictJsonDom(body, spec);
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
