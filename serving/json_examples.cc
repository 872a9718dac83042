#include "serving/json_examples.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>
#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/varint.h"
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

absl::Status TypeError(const std::string& where, input::FeatureType t, const char* got) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": expected ", Expected(t), ", got ", got));
}

absl::Status TypeError(const std::string& where, input::FeatureType t, const Json& got) {
  return TypeError(where, t, JsonKind(got));
}

absl::Status NotFiniteFloat(const std::string& where, double d) {
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", Json(d).dump(), " is not a finite float"));
}

bool FitsFloat(double d) {
  return std::isfinite(d) && std::fabs(d) <= std::numeric_limits<float>::max();
}

// JSON reads an integer beyond int64 and uint64 as a double.
bool IsIntegerBeyondUint64(double d) {
  return std::isfinite(d) && d == std::floor(d) && std::fabs(d) >= 9.2e18;
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
      absl::StrCat(where, ": the model has no feature \"", name, "\"", known, ")"));
}

// nlohmann's error text without its "[json.exception...] ... : " prefix:
// "body is not JSON at byte 17: syntax error ...", or for a number beyond
// a double (out_of_range, not a syntax error) "body is not JSON: number
// overflow parsing '1e400'".
absl::Status NotJson(const nlohmann::detail::exception& e) {
  std::string why = e.what();
  if (const auto* syntax = dynamic_cast<const nlohmann::detail::parse_error*>(&e)) {
    const size_t colon = why.find(": ");
    if (colon != std::string::npos) why = why.substr(colon + 2);
    return absl::InvalidArgumentError(absl::StrCat(
        "body is not JSON at byte ", syntax->byte > 0 ? syntax->byte - 1 : 0, ": ", why));
  }
  const size_t bracket = why.find("] ");
  if (bracket != std::string::npos) why = why.substr(bracket + 2);
  return absl::InvalidArgumentError(absl::StrCat("body is not JSON: ", why));
}

absl::Status NotAnObject(const char* kind) {
  return absl::InvalidArgumentError(
      absl::StrCat("body must be a JSON object with \"instances\" or \"inputs\", got ", kind));
}

absl::Status UnknownTopLevelField(const std::string& key) {
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown field \"", key, "\" in the body (known: instances, inputs, signature_name)"));
}

absl::Status NeitherOrBoth() {
  return absl::InvalidArgumentError(
      "body must have exactly one of \"instances\" (a list of examples) and \"inputs\" "
      "(columnar: feature -> list of values)");
}

// Appends one scalar to `f` as type `t`.
absl::Status AppendScalar(const std::string& where, input::FeatureType t, const Json& v,
                          tf::Feature* f) {
  switch (t) {
    case input::FeatureType::kFloat: {
      if (!v.is_number()) return TypeError(where, t, v);
      const double d = v.get<double>();
      if (!FitsFloat(d)) return NotFiniteFloat(where, d);
      f->mutable_float_list()->add_value(static_cast<float>(d));
      return absl::OkStatus();
    }
    case input::FeatureType::kInt64: {
      if (v.is_number_unsigned()) {
        f->mutable_int64_list()->add_value(static_cast<int64_t>(v.get<uint64_t>()));
      } else if (v.is_number_integer()) {
        f->mutable_int64_list()->add_value(v.get<int64_t>());
      } else if (v.is_number_float() && IsIntegerBeyondUint64(v.get<double>())) {
        return IdOutOfRange(where, v.get<double>());
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
      return UnknownFeature(where, name, spec_);
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
  const input::FeatureSpec& spec_;
  absl::flat_hash_map<std::string_view, const input::FeatureSpecEntry*> by_name_;
};

}  // namespace

std::string JsonExamples::Where(size_t i) const {
  return absl::StrCat(columnar ? "inputs" : "instances", "[", i, "]");
}

absl::StatusOr<JsonExamples> ExamplesFromPredictJsonDom(std::string_view body,
                                                        const input::FeatureSpec& spec) {
  Json doc = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    // Parse again for the position: the callback-free parse says only that
    // it failed.
    try {
      doc = Json::parse(body.begin(), body.end());
    } catch (const Json::exception& e) {
      return NotJson(e);
    }
    return absl::InvalidArgumentError("body is not JSON");
  }
  if (!doc.is_object()) return NotAnObject(JsonKind(doc));
  const bool has_instances = doc.contains("instances");
  const bool has_inputs = doc.contains("inputs");
  for (const auto& [key, value] : doc.items()) {
    if (key != "instances" && key != "inputs" && key != "signature_name") {
      return UnknownTopLevelField(key);
    }
  }
  if (has_instances == has_inputs) return NeitherOrBoth();
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

namespace {

// tf.train.Example's wire format, written directly: the fast path encodes
// each instance from its columns without building the proto's map.
void AppendVarint(uint64_t v, std::string* out) {
  char buf[kMaxVarintBytes];
  out->append(buf, static_cast<size_t>(PutVarint(buf, v) - buf));
}

// Field `field` of wire type 2 (length-delimited), its length `len`.
void PutLengthDelimited(uint32_t field, size_t len, std::string* out) {
  AppendVarint((field << 3) | 2, out);
  AppendVarint(len, out);
}

// One feature's values in an instance: its column of the spec.
struct FeatureValues {
  bool present = false;
  std::vector<float> floats;
  std::vector<uint64_t> ints;
  std::vector<std::string> bytes;  // the first `n_bytes` are this instance's
  size_t n_bytes = 0;

  void Reset() {
    present = true;
    floats.clear();
    ints.clear();
    n_bytes = 0;
  }
  std::string* NextBytes() {
    if (n_bytes == bytes.size()) bytes.emplace_back();
    std::string* s = &bytes[n_bytes++];
    s->clear();
    return s;
  }
};

// Appends the serialized tf.train.Feature of `v` (type `t`) to `out`.
void EncodeFeature(input::FeatureType t, const FeatureValues& v, std::string* out) {
  switch (t) {
    case input::FeatureType::kFloat: {  // Feature.float_list = 2 {value = 1 packed}
      const size_t data = 4 * v.floats.size();
      const size_t list = data == 0 ? 0 : 1 + VarintBytes(data) + data;
      PutLengthDelimited(2, list, out);
      if (data == 0) return;
      PutLengthDelimited(1, data, out);
      for (float f : v.floats) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        const char le[4] = {static_cast<char>(bits), static_cast<char>(bits >> 8),
                            static_cast<char>(bits >> 16), static_cast<char>(bits >> 24)};
        out->append(le, 4);
      }
      return;
    }
    case input::FeatureType::kInt64: {  // Feature.int64_list = 3 {value = 1 packed}
      size_t data = 0;
      for (uint64_t i : v.ints) data += VarintBytes(i);
      const size_t list = data == 0 ? 0 : 1 + VarintBytes(data) + data;
      PutLengthDelimited(3, list, out);
      if (data == 0) return;
      PutLengthDelimited(1, data, out);
      for (uint64_t i : v.ints) AppendVarint(i, out);
      return;
    }
    case input::FeatureType::kBytes: {  // Feature.bytes_list = 1 {repeated bytes value = 1}
      size_t list = 0;
      for (size_t i = 0; i < v.n_bytes; ++i) {
        list += 1 + VarintBytes(v.bytes[i].size()) + v.bytes[i].size();
      }
      PutLengthDelimited(1, list, out);
      for (size_t i = 0; i < v.n_bytes; ++i) {
        PutLengthDelimited(1, v.bytes[i].size(), out);
        out->append(v.bytes[i]);
      }
      return;
    }
  }
}

// The row form read as SAX events (nlohmann::json::sax_parse), straight
// into each instance's feature columns and then its serialized Example:
// no DOM, no tf::Example, no location strings unless there is an error.
// A body with "inputs" stops the parse: the DOM path reads that one.
//
// The errors and their order are the DOM path's: a syntax error anywhere
// first, then the body's shape (not an object, an unknown field, neither
// form), then the first bad value in the body (the DOM's is the first by
// feature name). A key given twice: the last value counts, as in the DOM,
// but a bad first value is still refused, and so are "instances" or "b64"
// given twice.
class InstancesReader {
 public:
  InstancesReader(const input::FeatureSpec& spec, std::string_view body)
      : spec_(spec), body_(body), columns_(spec.features.size()) {
    for (size_t i = 0; i < spec.features.size(); ++i) by_name_.emplace(spec.features[i].name, i);
  }

  // nullopt: the body has "inputs", for the DOM path.
  std::optional<absl::StatusOr<JsonExamples>> Read() && {
    const bool parsed = Json::sax_parse(body_.begin(), body_.end(), this);
    if (saw_inputs_) return std::nullopt;
    if (!parsed && !not_json_.ok()) return absl::StatusOr<JsonExamples>(not_json_);
    if (top_kind_ != nullptr) return absl::StatusOr<JsonExamples>(NotAnObject(top_kind_));
    if (!unknown_top_.empty()) {
      return absl::StatusOr<JsonExamples>(UnknownTopLevelField(unknown_top_));
    }
    if (instances_seen_ == 0) return absl::StatusOr<JsonExamples>(NeitherOrBoth());
    if (!error_.ok()) return absl::StatusOr<JsonExamples>(error_);
    return absl::StatusOr<JsonExamples>(std::move(out_));
  }

  // The SAX interface.
  bool null() { return Scalar(Kind::kNull); }
  bool boolean(bool) { return Scalar(Kind::kBoolean); }
  bool number_integer(int64_t v) {
    value_.i = v;
    return Scalar(Kind::kInteger);
  }
  bool number_unsigned(uint64_t v) {
    value_.u = v;
    return Scalar(Kind::kUnsigned);
  }
  bool number_float(double v, const std::string&) {
    value_.d = v;
    return Scalar(Kind::kFloat);
  }
  bool string(std::string& v) {
    value_.s = &v;
    return Scalar(Kind::kString);
  }
  bool binary(Json::binary_t&) { return Scalar(Kind::kNull); }  // not in JSON
  bool start_object(size_t) { return Open(/*object=*/true); }
  bool start_array(size_t) { return Open(/*object=*/false); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(std::string& k);
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    not_json_ = NotJson(e);
    return false;
  }

 private:
  enum class Kind { kNull, kBoolean, kInteger, kUnsigned, kFloat, kString };
  // What the container at each depth is, for the values inside it.
  enum class Level {
    kTop,        // the body's object
    kInstances,  // "instances": [ ... ]
    kInstance,   // one instance: {feature: value}
    kList,       // a feature's list of values
    kB64,        // {"b64": "..."}, a bytes value
    kSkipped,    // anything else: read past
  };

  static const char* KindName(Kind k) {
    switch (k) {
      case Kind::kNull:
        return "null";
      case Kind::kBoolean:
        return "boolean";
      case Kind::kInteger:
      case Kind::kUnsigned:
        return "integer";
      case Kind::kFloat:
        return "number";
      case Kind::kString:
        return "string";
    }
    return "value";
  }

  Level level() const { return levels_.empty() ? Level::kSkipped : levels_.back(); }
  bool Failed() const { return !error_.ok(); }

  // Where the value now read sits: "instances[3].C1", "...C1[2]".
  std::string Where() const {
    std::string w = absl::StrCat("instances[", instance_, "].", feature_->name);
    if (in_list_) absl::StrAppend(&w, "[", list_index_, "]");
    return w;
  }
  void Fail(absl::Status s) {
    if (error_.ok()) error_ = std::move(s);
  }

  bool Scalar(Kind k);
  bool Open(bool object);
  bool Close();
  void Append(Kind k);
  void EndInstance();

  const input::FeatureSpec& spec_;
  const std::string_view body_;
  absl::flat_hash_map<std::string_view, size_t> by_name_;
  std::vector<FeatureValues> columns_;
  std::vector<Level> levels_;
  bool at_top_ = true;              // no value read yet
  const char* top_kind_ = nullptr;  // the body is not an object: what it is
  std::string unknown_top_;         // the first (by name) unknown top-level field
  bool saw_inputs_ = false;
  int instances_seen_ = 0;
  std::string top_key_;
  // The instance and feature being read.
  size_t instance_ = 0;
  const input::FeatureSpecEntry* feature_ = nullptr;  // nullptr: the label, ignored
  size_t column_ = 0;
  bool in_list_ = false;
  size_t list_index_ = 0;
  // A {"b64": ...} object being read.
  int b64_keys_ = 0;
  bool b64_key_ = false;  // the last key was "b64"
  bool b64_ok_ = false;
  std::string b64_raw_;
  union {
    int64_t i;
    uint64_t u;
    double d;
    std::string* s;
  } value_{};
  absl::Status not_json_;
  absl::Status error_;  // the first bad value
  JsonExamples out_;
  std::string features_bytes_;  // scratch: an Example's Features message
  std::string feature_bytes_;   // scratch: one Feature message
};

bool InstancesReader::key(std::string& k) {
  switch (level()) {
    case Level::kTop:
      top_key_ = k;
      if (k == "inputs") {
        saw_inputs_ = true;
        return false;
      }
      if (k != "instances" && k != "signature_name" && (unknown_top_.empty() || k < unknown_top_)) {
        unknown_top_ = k;
      }
      return true;
    case Level::kInstance: {
      if (Failed()) return true;
      auto it = by_name_.find(std::string_view(k));
      if (it == by_name_.end()) {
        feature_ = nullptr;
        if (k != spec_.label_name) {
          Fail(UnknownFeature(absl::StrCat("instances[", instance_, "].", k), k, spec_));
        }
        return true;
      }
      column_ = it->second;
      feature_ = &spec_.features[column_];
      columns_[column_].Reset();
      return true;
    }
    case Level::kB64:
      ++b64_keys_;
      b64_key_ = k == "b64";
      b64_ok_ = false;
      return true;
    default:
      return true;
  }
}

bool InstancesReader::Scalar(Kind k) {
  if (at_top_) {
    at_top_ = false;
    top_kind_ = KindName(k);
    return true;
  }
  switch (level()) {
    case Level::kTop:
      if (top_key_ == "instances") {
        ++instances_seen_;
        Fail(absl::InvalidArgumentError(
            absl::StrCat("instances: expected a list of objects, got ", KindName(k))));
      }
      return true;
    case Level::kInstances:
      Fail(absl::InvalidArgumentError(absl::StrCat(
          "instances[", instance_, "]: expected an object of feature values, got ", KindName(k))));
      ++instance_;
      return true;
    case Level::kInstance:
      if (Failed() || feature_ == nullptr) return true;
      if (k == Kind::kNull) {
        columns_[column_].present = false;  // the same as leaving it out
        return true;
      }
      Append(k);
      return true;
    case Level::kList:
      if (!Failed() && feature_ != nullptr) Append(k);
      ++list_index_;
      return true;
    case Level::kB64:
      b64_ok_ = b64_keys_ == 1 && b64_key_ && k == Kind::kString;
      if (b64_ok_) b64_raw_ = *value_.s;
      return true;
    case Level::kSkipped:
      return true;
  }
  return true;
}

void InstancesReader::Append(Kind k) {
  FeatureValues& col = columns_[column_];
  const input::FeatureType t = feature_->type;
  switch (t) {
    case input::FeatureType::kFloat: {
      double d;
      if (k == Kind::kFloat) {
        d = value_.d;
      } else if (k == Kind::kInteger) {
        d = static_cast<double>(value_.i);
      } else if (k == Kind::kUnsigned) {
        d = static_cast<double>(value_.u);
      } else {
        return Fail(TypeError(Where(), t, KindName(k)));
      }
      if (!FitsFloat(d)) return Fail(NotFiniteFloat(Where(), d));
      col.floats.push_back(static_cast<float>(d));
      return;
    }
    case input::FeatureType::kInt64:
      if (k == Kind::kInteger) {
        col.ints.push_back(static_cast<uint64_t>(value_.i));
      } else if (k == Kind::kUnsigned) {
        col.ints.push_back(value_.u);
      } else if (k == Kind::kFloat && IsIntegerBeyondUint64(value_.d)) {
        Fail(IdOutOfRange(Where(), value_.d));
      } else {
        Fail(TypeError(Where(), t, KindName(k)));
      }
      return;
    case input::FeatureType::kBytes:
      if (k != Kind::kString) return Fail(TypeError(Where(), t, KindName(k)));
      col.NextBytes()->assign(*value_.s);
      return;
  }
}

bool InstancesReader::Open(bool object) {
  if (at_top_) {
    at_top_ = false;
    if (!object) top_kind_ = "list";
    levels_.push_back(object ? Level::kTop : Level::kSkipped);
    return true;
  }
  const char* kind = object ? "object" : "list";
  Level next = Level::kSkipped;
  switch (level()) {
    case Level::kTop:
      if (top_key_ == "instances") {
        if (++instances_seen_ > 1) {
          Fail(absl::InvalidArgumentError("\"instances\" is given twice"));
        } else if (object) {
          Fail(absl::InvalidArgumentError(
              absl::StrCat("instances: expected a list of objects, got ", kind)));
        } else {
          next = Level::kInstances;
        }
      }
      break;
    case Level::kInstances:
      if (object) {
        next = Level::kInstance;
        for (FeatureValues& c : columns_) c.present = false;
      } else {
        Fail(absl::InvalidArgumentError(absl::StrCat(
            "instances[", instance_, "]: expected an object of feature values, got list")));
        ++instance_;
      }
      break;
    case Level::kInstance:
      if (Failed() || feature_ == nullptr) break;
      if (!object) {
        in_list_ = true;
        list_index_ = 0;
        next = Level::kList;
      } else if (feature_->type == input::FeatureType::kBytes) {
        next = Level::kB64;
      } else {
        Fail(TypeError(Where(), feature_->type, kind));
      }
      break;
    case Level::kList:
      if (Failed() || feature_ == nullptr) {
        ++list_index_;
      } else if (object && feature_->type == input::FeatureType::kBytes) {
        next = Level::kB64;
      } else {
        Fail(TypeError(Where(), feature_->type, kind));
        ++list_index_;
      }
      break;
    case Level::kB64:
      b64_ok_ = false;  // {"b64": [...]} or {"b64": {...}}
      break;
    case Level::kSkipped:
      break;
  }
  if (next == Level::kB64) {
    b64_keys_ = 0;
    b64_ok_ = false;
  }
  levels_.push_back(next);
  return true;
}

bool InstancesReader::Close() {
  const Level closing = level();
  levels_.pop_back();
  switch (closing) {
    case Level::kInstance:
      if (!Failed()) EndInstance();
      ++instance_;
      break;
    case Level::kList:
      in_list_ = false;
      break;
    case Level::kB64: {
      if (Failed()) break;
      if (!b64_ok_ || b64_keys_ != 1) {
        Fail(TypeError(Where(), feature_->type, "object"));
      } else if (!absl::Base64Unescape(b64_raw_, columns_[column_].NextBytes())) {
        Fail(absl::InvalidArgumentError(absl::StrCat(Where(), ".b64: not base64")));
      }
      if (in_list_) ++list_index_;
      break;
    }
    default:
      break;
  }
  return true;
}

void InstancesReader::EndInstance() {
  features_bytes_.clear();
  for (size_t c = 0; c < columns_.size(); ++c) {
    const FeatureValues& v = columns_[c];
    if (!v.present) continue;
    const std::string& name = spec_.features[c].name;
    feature_bytes_.clear();
    EncodeFeature(spec_.features[c].type, v, &feature_bytes_);
    // Features.feature = 1: a map entry {key = 1, value = 2}.
    const size_t entry = 1 + VarintBytes(name.size()) + name.size() + 1 +
                         VarintBytes(feature_bytes_.size()) + feature_bytes_.size();
    PutLengthDelimited(1, entry, &features_bytes_);
    PutLengthDelimited(1, name.size(), &features_bytes_);
    features_bytes_.append(name);
    PutLengthDelimited(2, feature_bytes_.size(), &features_bytes_);
    features_bytes_.append(feature_bytes_);
  }
  std::string& example = out_.examples.emplace_back();
  if (features_bytes_.empty()) return;  // no feature: an empty Example, as protobuf writes it
  example.reserve(1 + VarintBytes(features_bytes_.size()) + features_bytes_.size());
  PutLengthDelimited(1, features_bytes_.size(), &example);  // Example.features = 1
  example.append(features_bytes_);
}

}  // namespace

absl::StatusOr<JsonExamples> ExamplesFromPredictJson(std::string_view body,
                                                     const input::FeatureSpec& spec) {
  std::optional<absl::StatusOr<JsonExamples>> fast = InstancesReader(spec, body).Read();
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
