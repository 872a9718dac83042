// The row form of predict JSON ({"instances": [...]}) read as SAX events
// (nlohmann::json::sax_parse), straight into each instance's feature
// columns and then its serialized tf.train.Example, sized first and written
// once: no DOM, no tf::Example, no location strings unless there is an
// error. 4-5x the DOM path's speed (BENCHMARKS.md, "Serving").
//
// It refuses exactly the bodies the DOM path refuses (both are fuzzed
// against each other: tests/fuzz/predict_json_fuzzer.cc), with the same
// messages where there is one error. With several, the syntax error comes
// first, then the body's shape (not an object, an unknown field, neither
// form, the signature), then the first bad value in the body (the DOM
// path's first by feature name).
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/varint.h"
#include "serving/json_internal.h"

namespace brook::serving::internal {

namespace {

// tf.train.Example's wire format, written directly: sizes first, then each
// Example written once into its own string (no intermediate messages).

// A length-delimited field's tag and length (every tag here is one byte).
char* PutLengthDelimited(uint32_t field, size_t len, char* p) {
  *p++ = static_cast<char>((field << 3) | 2);
  return PutVarint(p, len);
}
// Most lengths and ids here take one byte: that case without bit_width.
constexpr size_t VarintBytesFast(uint64_t v) { return v < 0x80 ? 1 : VarintBytes(v); }
constexpr size_t LengthDelimitedBytes(size_t len) { return 1 + VarintBytesFast(len) + len; }

// One feature's values in an instance: its column of the spec.
struct FeatureValues {
  bool present = false;
  size_t seen_in = 0;  // 1 + the instance whose key set it last
  std::vector<float> floats;
  std::vector<uint64_t> ints;
  std::vector<std::string> bytes;  // the first `n_bytes` are this instance's
  size_t n_bytes = 0;
  size_t payload_bytes = 0;  // EndInstance's sizes
  size_t feature_bytes = 0;
  size_t entry_bytes = 0;

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

// The packed payload of a float or int64 list (Feature.float_list = 2 /
// int64_list = 3 {value = 1 packed}); the bytes list's entries.
size_t ListPayloadBytes(input::FeatureType t, const FeatureValues& v) {
  switch (t) {
    case input::FeatureType::kFloat:
      return 4 * v.floats.size();
    case input::FeatureType::kInt64: {
      size_t data = 0;
      for (uint64_t i : v.ints) data += VarintBytesFast(i);
      return data;
    }
    case input::FeatureType::kBytes: {
      size_t list = 0;
      for (size_t i = 0; i < v.n_bytes; ++i) list += LengthDelimitedBytes(v.bytes[i].size());
      return list;
    }
  }
  return 0;
}

// Bytes of the tf.train.Feature message of v, from its payload's.
size_t FeatureBytes(input::FeatureType t, size_t payload) {
  if (t == input::FeatureType::kBytes) return LengthDelimitedBytes(payload);
  return LengthDelimitedBytes(payload == 0 ? 0 : LengthDelimitedBytes(payload));
}

// Writes the tf.train.Feature message of v (its payload `payload` bytes) at
// p; returns the byte after it.
char* WriteFeature(input::FeatureType t, const FeatureValues& v, size_t payload, char* p) {
  switch (t) {
    case input::FeatureType::kFloat:  // Feature.float_list = 2 {value = 1 packed}
      p = PutLengthDelimited(2, payload == 0 ? 0 : LengthDelimitedBytes(payload), p);
      if (payload == 0) return p;
      p = PutLengthDelimited(1, payload, p);
      for (float f : v.floats) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        *p++ = static_cast<char>(bits);
        *p++ = static_cast<char>(bits >> 8);
        *p++ = static_cast<char>(bits >> 16);
        *p++ = static_cast<char>(bits >> 24);
      }
      return p;
    case input::FeatureType::kInt64:  // Feature.int64_list = 3 {value = 1 packed}
      p = PutLengthDelimited(3, payload == 0 ? 0 : LengthDelimitedBytes(payload), p);
      if (payload == 0) return p;
      p = PutLengthDelimited(1, payload, p);
      for (uint64_t i : v.ints) p = PutVarint(p, i);
      return p;
    case input::FeatureType::kBytes:  // Feature.bytes_list = 1 {repeated bytes value = 1}
      p = PutLengthDelimited(1, payload, p);
      for (size_t i = 0; i < v.n_bytes; ++i) {
        p = PutLengthDelimited(1, v.bytes[i].size(), p);
        std::memcpy(p, v.bytes[i].data(), v.bytes[i].size());
        p += v.bytes[i].size();
      }
      return p;
  }
  return p;
}

class InstancesReader {
 public:
  InstancesReader(const input::FeatureSpec& spec, std::string_view body)
      : spec_(spec),
        body_(body),
        columns_(spec.features.size()),
        next_column_(spec.features.size() + 1, kNoColumn) {
    for (size_t i = 0; i < spec.features.size(); ++i) by_name_.emplace(spec.features[i].name, i);
  }

  std::optional<absl::StatusOr<JsonExamples>> Read() && {
    const bool parsed = Json::sax_parse(body_.begin(), body_.end(), this);
    if (saw_inputs_) return std::nullopt;
    if (!parsed && !not_json_.ok()) return absl::StatusOr<JsonExamples>(not_json_);
    if (top_kind_ != nullptr) return absl::StatusOr<JsonExamples>(NotAnObject(top_kind_));
    if (!unknown_top_.empty()) {
      return absl::StatusOr<JsonExamples>(UnknownTopLevelField(unknown_top_));
    }
    if (instances_seen_ == 0) return absl::StatusOr<JsonExamples>(NeitherOrBoth());
    if (!signature_error_.ok()) return absl::StatusOr<JsonExamples>(signature_error_);
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
  bool parse_error(size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& e) {
    not_json_ = NotJson(e, position, last_token);
    return false;
  }

 private:
  enum class Kind { kNull, kBoolean, kInteger, kUnsigned, kFloat, kString };
  // What the container at each depth is, for the values inside it.
  enum class Level {
    kTop,            // the body's object
    kInstances,      // "instances": [ ... ]
    kInstance,       // one instance: {feature: value}
    kList,           // a feature's list of values
    kB64,            // {"b64": "..."}, a bytes value
    kSkippedList,    // anything else: read past
    kSkippedObject,  // the same, its keys checked for duplicates
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

  Level level() const { return levels_.empty() ? Level::kSkippedList : levels_.back(); }
  bool Failed() const { return !error_.ok(); }
  std::string Instance() const { return absl::StrCat("instances[", instance_, "]"); }
  // Where the value now read sits: "instances[3].C1", "...C1[2]".
  std::string Where() const {
    std::string w = absl::StrCat(Instance(), ".", feature_->name);
    if (in_list_) absl::StrAppend(&w, "[", list_index_, "]");
    return w;
  }
  void Fail(absl::Status s) {
    if (error_.ok()) error_ = std::move(s);
  }

  // The column of feature `k`, columns_.size() for the label, or more for
  // neither. Clients send an instance's keys in one order: the column that
  // followed the previous key in the last instance is tried before hashing.
  size_t Column(const std::string& k) {
    const size_t n = columns_.size();
    const size_t guess = prev_column_ == kNoColumn ? first_column_ : next_column_[prev_column_];
    size_t c = kNoColumn;
    if (guess < n && spec_.features[guess].name == k) {
      c = guess;
    } else if (guess == n && k == spec_.label_name) {
      c = n;
    } else if (auto it = by_name_.find(std::string_view(k)); it != by_name_.end()) {
      c = it->second;
    } else if (k == spec_.label_name) {
      c = n;
    }
    if (c != kNoColumn) {
      (prev_column_ == kNoColumn ? first_column_ : next_column_[prev_column_]) = c;
    }
    prev_column_ = c;
    return c;
  }

  bool Scalar(Kind k);
  void TopLevelValue(const char* kind, Kind k);
  bool Open(bool object);
  bool Close();
  void Append(Kind k);
  void EndInstance();

  const input::FeatureSpec& spec_;
  const std::string_view body_;
  absl::flat_hash_map<std::string_view, size_t> by_name_;
  std::vector<FeatureValues> columns_;
  // Column's guesses: the key order of the last instance.
  static constexpr size_t kNoColumn = SIZE_MAX;
  std::vector<size_t> next_column_;  // per column and the label
  size_t first_column_ = 0;
  size_t prev_column_ = kNoColumn;  // the last key's in this instance
  std::vector<Level> levels_;
  // Keys of each open kSkippedObject (until something failed: then the
  // body is refused anyway).
  std::vector<absl::flat_hash_set<std::string>> skipped_keys_;
  bool at_top_ = true;              // no value read yet
  const char* top_kind_ = nullptr;  // the body is not an object: what it is
  std::string unknown_top_;         // the first (by name) unknown top-level field
  bool saw_inputs_ = false;
  int instances_seen_ = 0;
  int signatures_seen_ = 0;
  absl::Status signature_error_;
  std::string top_key_;
  // The instance and feature being read.
  size_t instance_ = 0;
  const input::FeatureSpecEntry* feature_ = nullptr;  // nullptr: the label, ignored
  size_t column_ = 0;
  bool label_seen_ = false;  // in this instance
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
};

bool InstancesReader::key(std::string& k) {
  switch (level()) {
    case Level::kTop:
      top_key_ = k;
      if (k == "inputs") {
        saw_inputs_ = true;
        return false;
      }
      if (k == "signature_name" && ++signatures_seen_ > 1) Fail(DuplicateKey("body", k));
      if (k != "instances" && k != "signature_name" && (unknown_top_.empty() || k < unknown_top_)) {
        unknown_top_ = k;
      }
      return true;
    case Level::kInstance: {
      if (Failed()) return true;
      const size_t found = Column(k);
      if (found >= columns_.size()) {
        feature_ = nullptr;
        if (k != spec_.label_name) {
          Fail(UnknownFeature(absl::StrCat(Instance(), ".", CutForError(k)), k, spec_));
        } else if (label_seen_) {
          Fail(DuplicateKey(Instance(), k));
        }
        label_seen_ = true;
        return true;
      }
      column_ = found;
      feature_ = &spec_.features[column_];
      FeatureValues& col = columns_[column_];
      if (col.seen_in == instance_ + 1) {
        Fail(DuplicateKey(Instance(), k));
        return true;
      }
      col.seen_in = instance_ + 1;
      col.Reset();
      return true;
    }
    case Level::kB64:
      ++b64_keys_;
      b64_key_ = k == "b64";
      b64_ok_ = false;
      return true;
    case Level::kSkippedObject:
      if (!Failed() && !skipped_keys_.back().insert(k).second) Fail(DuplicateKey("", k));
      return true;
    default:
      return true;
  }
}

// A scalar or compound value directly under a top-level key.
void InstancesReader::TopLevelValue(const char* kind, Kind k) {
  if (top_key_ == "instances") {
    if (++instances_seen_ > 1) {
      Fail(DuplicateKey("body", "instances"));
    } else {
      Fail(absl::InvalidArgumentError(
          absl::StrCat("instances: expected a list of objects, got ", kind)));
    }
  } else if (top_key_ == "signature_name" && signature_error_.ok()) {
    if (k != Kind::kString) {
      signature_error_ = BadSignatureKind(kind);
    } else if (!value_.s->empty() && *value_.s != kSignatureName) {
      signature_error_ = BadSignature(Json(*value_.s));
    }
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
      TopLevelValue(KindName(k), k);
      return true;
    case Level::kInstances:
      Fail(absl::InvalidArgumentError(
          absl::StrCat(Instance(), ": expected an object of feature values, got ", KindName(k))));
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
    case Level::kSkippedList:
    case Level::kSkippedObject:
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
      col.floats.push_back(ToFloat(d));
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
  const Level skipped = object ? Level::kSkippedObject : Level::kSkippedList;
  Level next = skipped;
  if (at_top_) {
    at_top_ = false;
    if (object) {
      next = Level::kTop;
    } else {
      top_kind_ = "list";
    }
  } else {
    const char* kind = object ? "object" : "list";
    switch (level()) {
      case Level::kTop:
        if (top_key_ == "instances" && !object && instances_seen_ == 0) {
          ++instances_seen_;
          next = Level::kInstances;
        } else {
          TopLevelValue(kind, Kind::kNull);
        }
        break;
      case Level::kInstances:
        if (object) {
          next = Level::kInstance;
          label_seen_ = false;
          prev_column_ = kNoColumn;
          for (FeatureValues& c : columns_) c.present = false;
        } else {
          Fail(absl::InvalidArgumentError(
              absl::StrCat(Instance(), ": expected an object of feature values, got list")));
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
      case Level::kSkippedList:
      case Level::kSkippedObject:
        break;
    }
  }
  if (next == Level::kB64) {
    b64_keys_ = 0;
    b64_ok_ = false;
  }
  if (next == Level::kSkippedObject) skipped_keys_.emplace_back();
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
    case Level::kSkippedObject:
      skipped_keys_.pop_back();
      break;
    default:
      break;
  }
  return true;
}

void InstancesReader::EndInstance() {
  // Features.feature = 1: a map entry {key = 1, value = 2} per feature.
  size_t features = 0;
  for (size_t c = 0; c < columns_.size(); ++c) {
    FeatureValues& v = columns_[c];
    if (!v.present) continue;
    const input::FeatureType t = spec_.features[c].type;
    v.payload_bytes = ListPayloadBytes(t, v);
    v.feature_bytes = FeatureBytes(t, v.payload_bytes);
    v.entry_bytes =
        LengthDelimitedBytes(spec_.features[c].name.size()) + LengthDelimitedBytes(v.feature_bytes);
    features += LengthDelimitedBytes(v.entry_bytes);
  }
  std::string& example = out_.examples.emplace_back();
  if (features == 0) return;  // no feature: an empty Example, as protobuf writes it
  example.resize(LengthDelimitedBytes(features));
  char* p = PutLengthDelimited(1, features, example.data());  // Example.features = 1
  for (size_t c = 0; c < columns_.size(); ++c) {
    const FeatureValues& v = columns_[c];
    if (!v.present) continue;
    const input::FeatureType t = spec_.features[c].type;
    const std::string& name = spec_.features[c].name;
    p = PutLengthDelimited(1, v.entry_bytes, p);
    p = PutLengthDelimited(1, name.size(), p);
    std::memcpy(p, name.data(), name.size());
    p += name.size();
    p = PutLengthDelimited(2, v.feature_bytes, p);
    p = WriteFeature(t, v, v.payload_bytes, p);
  }
}

}  // namespace

std::optional<absl::StatusOr<JsonExamples>> ExamplesFromInstancesJson(
    std::string_view body, const input::FeatureSpec& spec) {
  return InstancesReader(spec, body).Read();
}

}  // namespace brook::serving::internal
