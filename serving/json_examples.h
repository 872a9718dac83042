// TensorFlow Serving's predict request body, as JSON, turned into
// serialized tf.train.Examples by a model's feature spec (no network here;
// the fuzz target tests/fuzz/predict_json_fuzzer.cc feeds it anything).
//
//   {"instances": [{"I1": 0.5, "C1": 17, "tags": ["a", "b"]}, ...]}   row form
//   {"inputs": {"I1": [0.5, 0.7], "C1": [17, 4]}}                       columnar
//
// Each feature's value follows its declared type: float takes numbers,
// int64 takes integers (uint64 ids beyond 2^63 too), bytes takes strings or
// {"b64": "..."} (TF Serving's binary form); a fixed feature of length 1
// takes a scalar or a one-element list, anything else a list. null is the
// same as leaving the feature out. "signature_name" is accepted and
// ignored. The label may be given (it is ignored); any other name is an
// error, so a misspelt feature is never silently served as missing.
//
// Errors are INVALID_ARGUMENT naming where: "instances[3].C1: expected
// int64 (an integer or list of integers), got string", "body is not JSON at
// byte 17: ...", "inputs.I1: 3 values, but C1 has 2".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "features/feature_spec.h"

namespace brook::serving {

struct JsonExamples {
  std::vector<std::string> examples;  // serialized tf.train.Example
  bool columnar = false;              // "inputs" (reply with "outputs")
  // Where example i came from in the body: "instances[i]" or "inputs[i]".
  std::string Where(size_t i) const;
};

absl::StatusOr<JsonExamples> ExamplesFromPredictJson(std::string_view body,
                                                     const input::FeatureSpec& spec);

// The same through nlohmann's DOM. ExamplesFromPredictJson reads the row
// form as a stream of parse events instead (4-5x faster; no tree, no
// tf::Example) and comes here for the columnar form. Kept public as the
// reference the fast path is tested and fuzzed against: the two accept and
// refuse the same bodies (a key given twice in any object is refused by
// both), and give equal Examples; with several errors in one body they may
// name different ones first.
absl::StatusOr<JsonExamples> ExamplesFromPredictJsonDom(std::string_view body,
                                                        const input::FeatureSpec& spec);

// At most `most` bytes of `text`, which the client sent, for an error
// message (cut between UTF-8 characters, saying how long it was): a large
// request never comes back as a larger error.
std::string CutForError(std::string_view text, size_t most = 100);

// The other way: {"instances": [...]} holding the spec's features of each
// serialized tf.train.Example (the label left out; bytes that are not
// printable ASCII as {"b64": ...}). For example requests (`brook local
// --serve`) and load generators (`brook bench serve`). INVALID_ARGUMENT for
// a record that is not a tf.train.Example.
absl::StatusOr<std::string> PredictJsonFromExamples(absl::Span<const std::string> examples,
                                                    const input::FeatureSpec& spec);

}  // namespace brook::serving
