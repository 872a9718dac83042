// Fuzzes `brook serve`'s predict JSON (serving/json_examples.h): the input
// is a request body, turned into tf.train.Examples under a feature spec of
// every type and kind, the way POST /v1/models/NAME:predict reads it. Any
// input must give examples or an INVALID_ARGUMENT status: no crash, no
// exception escaping, no other code. Examples it gives must parse back.
// Differential: the fast path (parse events written straight to the wire
// format) against the DOM path. Both accept or both refuse, and what they
// accept gives Examples equal field for field.
// Seeds: corpus/predict_json/ (both request forms, b64, nulls, errors).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <google/protobuf/util/message_differencer.h>
#include "features/feature_spec.h"
#include "serving/json_examples.h"
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
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
