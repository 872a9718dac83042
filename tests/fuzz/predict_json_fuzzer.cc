// Fuzzes `brook serve`'s predict JSON (serving/json_examples.h): the input
// is a request body, turned into tf.train.Examples under a feature spec of
// every type and kind, the way POST /v1/models/NAME:predict reads it. Any
// input must give examples or an INVALID_ARGUMENT status: no crash, no
// exception escaping, no other code. Examples it gives must parse back.
// Differential: the fast path (parse events written straight to the wire
// format) against the DOM path. Both accept or both refuse, and what they
// accept gives Examples equal field for field. And the fast path's JSON
// reader (serving/json_sax.h) against nlohmann's SAX parser: the same events
// where nlohmann accepts the text, kSyntaxError where it refuses it.
// Seeds: corpus/predict_json/ (both request forms, b64, nulls, errors).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include <google/protobuf/util/message_differencer.h>
#include <nlohmann/json.hpp>
#include "features/feature_spec.h"
#include "serving/json_examples.h"
#include "serving/json_sax.h"
#include "tensorflow/example.pb.h"

namespace {

const brook::input::FeatureSpec& Spec() {
  static const brook::input::FeatureSpec* spec = [] {
    auto s = brook::input::FeatureSpec::FromYaml(
        "label: {name: label, type: float}\n"
        "features:\n"
        "  - {name: I1, type: float, length: 1, default: 0.0}\n"
        "  - {name: I2, type: float, length: 3}\n"
        "  - {name: C1, type: int64, kind: varlen}\n"
        "  - {name: C2, type: bytes, kind: varlen, max_length: 4}\n");
    if (!s.ok()) std::abort();
    return new brook::input::FeatureSpec(*s);
  }();
  return *spec;
}

// Every event as text (numbers by their bits).
struct Recorder {
  std::string events;
  bool failed = false;
  bool Add(std::string_view kind, std::string_view value = {}) {
    events.append(kind).append(value).push_back('\n');
    return true;
  }
  bool null() { return Add("null"); }
  bool boolean(bool b) { return Add(b ? "true" : "false"); }
  bool number_integer(int64_t v) { return Add("i", std::to_string(v)); }
  bool number_unsigned(uint64_t v) { return Add("u", std::to_string(v)); }
  bool number_float(double v, const std::string&) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return Add("f", std::to_string(bits));
  }
  bool string(std::string& s) { return Add("s", s); }
  bool binary(nlohmann::json::binary_t&) { return Add("binary"); }
  bool start_object(size_t) { return Add("{"); }
  bool key(std::string& k) { return Add("k", k); }
  bool end_object() { return Add("}"); }
  bool start_array(size_t) { return Add("["); }
  bool end_array() { return Add("]"); }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) {
    failed = true;
    return false;
  }
};

void CompareJsonReaders(std::string_view text) {
  Recorder slow, fast;
  const bool parsed = nlohmann::json::sax_parse(text.begin(), text.end(), &slow);
  const brook::serving::internal::SaxResult r = brook::serving::internal::FastSaxParse(text, &fast);
  if (slow.failed || !parsed) {
    if (r != brook::serving::internal::SaxResult::kSyntaxError) std::abort();
    return;
  }
  if (r != brook::serving::internal::SaxResult::kDone || fast.events != slow.events) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  CompareJsonReaders(body);
  auto r = brook::serving::ExamplesFromPredictJson(body, Spec());
  auto dom = brook::serving::ExamplesFromPredictJsonDom(body, Spec());
  if (!dom.ok() && dom.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
  if (!r.ok() && r.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
  if (r.ok() != dom.ok()) std::abort();
  if (!r.ok()) return 0;
  if (dom->examples.size() != r->examples.size() || dom->columnar != r->columnar) std::abort();
  for (size_t i = 0; i < r->examples.size(); ++i) {
    brook::tf::Example ex, want;
    if (!ex.ParseFromString(r->examples[i]) || !want.ParseFromString(dom->examples[i])) {
      std::abort();
    }
    if (!google::protobuf::util::MessageDifferencer::Equals(ex, want)) std::abort();
  }
  return 0;
}
