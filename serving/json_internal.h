// What the two readers of predict JSON share (json_examples.cc, the DOM
// path; json_instances.cc, the row form's streaming path): the value rules
// and every error message, so both refuse the same bodies in the same
// words. Not an API: only those two files include it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "features/feature_spec.h"
#include "serving/json_examples.h"

namespace brook::serving::internal {

using Json = nlohmann::json;

// The one signature a brook model has (GET .../metadata).
inline constexpr char kSignatureName[] = "serving_default";

// "integer", "number", "string", "list", "object", ... as errors say.
const char* JsonKind(const Json& v);

// A float feature's value: whether it rounds to a finite float (up to
// FLT_MAX and half an ulp beyond: "3.4028235e38", FLT_MAX's shortest text,
// is a little above it as a double), and that float.
bool FitsFloat(double d);
float ToFloat(double d);  // REQUIRES: FitsFloat(d)
// JSON reads an integer beyond int64 and uint64 as a double.
bool IsIntegerBeyondUint64(double d);

absl::Status TypeError(const std::string& where, input::FeatureType t, const char* got);
absl::Status NotFiniteFloat(const std::string& where, double d);
absl::Status IdOutOfRange(const std::string& where, double d);
absl::Status UnknownFeature(const std::string& where, const std::string& name,
                            const input::FeatureSpec& spec);
absl::Status DuplicateKey(const std::string& where, const std::string& key);
absl::Status NotAnObject(const char* kind);
absl::Status UnknownTopLevelField(const std::string& key);
absl::Status NeitherOrBoth();
// signature_name given as something other than kSignatureName.
absl::Status BadSignature(const Json& given);
absl::Status BadSignatureKind(const char* kind);

// The body does not parse: nlohmann's error (a SAX parse_error's
// arguments) as "body is not JSON at byte N: ...", or for a number beyond
// a double "body: the number at byte N is out of range (...)".
absl::Status NotJson(const nlohmann::detail::exception& e, size_t position,
                     const std::string& last_token);

// The row form read as a stream (json_instances.cc). nullopt: the body has
// "inputs", which only the DOM path reads.
std::optional<absl::StatusOr<JsonExamples>> ExamplesFromInstancesJson(
    std::string_view body, const input::FeatureSpec& spec);

}  // namespace brook::serving::internal
