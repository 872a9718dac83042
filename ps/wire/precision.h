// Rows and gradients in a table's wire precision (ps::WirePrecision): float32
// as is, or 2 bytes a value as bfloat16 or IEEE float16, packed
// little-endian like every other PS payload (docs/formats.md "Wire
// precision"). Both sides use these functions, so a value rounds the same
// way whoever encodes it.
//
// Rounding is to nearest, ties to even; NaN stays NaN and +-Inf stays
// +-Inf. fp16 payloads carry a power-of-two scale (Fp16Scale): a value is
// sent as fp16(x * scale) and read back as that / scale, so the largest
// finite value of a request lands in [2^14, 2^15) and gradients far below
// fp16's 6e-8 smallest step keep their precision relative to the largest.
// A power of two multiplies exactly, so the scale adds no rounding of its own.
//
// Thread-safe (no state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/options.h"

namespace brook::ps::wire {

// Bytes a value takes on the wire: 4 for fp32, 2 for bf16 and fp16.
inline size_t WireValueBytes(WirePrecision precision) {
  return precision == WirePrecision::kFp32 ? 4 : 2;
}

// One value, the reference every bulk path must agree with.
uint16_t FloatToBf16(float value);
float Bf16ToFloat(uint16_t bits);
uint16_t FloatToFp16(float value);
float Fp16ToFloat(uint16_t bits);

// The power of two that maps the largest finite |value| into [2^14, 2^15)
// (1 when every value is 0 or non-finite). For fp16 payloads; 1 otherwise.
float Fp16Scale(absl::Span<const float> values);

// Writes values x scale in `precision` to dst (values.size() x
// WireValueBytes bytes; any alignment). scale is 1 for fp32 and bf16.
void EncodeValues(WirePrecision precision, absl::Span<const float> values, float scale, char* dst);
// Reads n values of `precision` from src (any alignment) into dst, each
// divided by `scale`.
void DecodeValues(WirePrecision precision, const char* src, size_t n, float scale, float* dst);

// brook.v1.WirePrecision's number for `precision`, and back: INVALID_ARGUMENT
// (naming `what`) for a number no WirePrecision has (a newer client's).
int WirePrecisionNumber(WirePrecision precision);
absl::StatusOr<WirePrecision> WirePrecisionFromNumber(int number, std::string_view what);

// values in `precision` into *out (resized), fp16 at Fp16Scale(values);
// returns the scale used (1 but for fp16).
float EncodeFloatsAs(WirePrecision precision, absl::Span<const float> values, std::string* out);
// The float32 values of a payload in `precision` (scale as read, see
// CheckScale): fp32 views `bytes` (wire.h DecodeFloats), the others decode
// into *scratch, which only grows (keep one per thread to allocate nothing). INVALID_ARGUMENT
// (naming `what`) when the length is not a multiple of the value size or the scale is bad.
absl::StatusOr<absl::Span<const float>> DecodeFloatsAs(WirePrecision precision,
                                                       std::string_view bytes, float scale,
                                                       std::vector<float>* scratch,
                                                       std::string_view what);
// values rounded in place as a trip through the wire in `precision` would
// (one fp16 scale for all of them): the in-process client's stand-in for the
// network, so a job trains the same numbers either way.
void RoundTrip(WirePrecision precision, absl::Span<float> values);

// A scale read from a request or reply: INVALID_ARGUMENT (naming `what`)
// unless it is a finite power of two > 0, as Fp16Scale makes. 0 (the field
// unset) reads as 1.
absl::Status CheckScale(float* scale, std::string_view what);

}  // namespace brook::ps::wire
