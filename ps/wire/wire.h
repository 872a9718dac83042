// The PS wire format's packed payloads, decoded and encoded here and nowhere
// else (docs/architecture.md "Keys and rows"; the messages are in proto/brook/v1/ps.proto):
//   keys:   packed little-endian uint64, 8 bytes each
//   floats: packed little-endian float32, 4 bytes each (rows, gradients,
//           dense values)
// Header-only so the server adapter (ps/rpc) and the client (ps/client) share
// one definition without linking each other. Thread-safe (no state).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace brook::ps::wire {

// Every platform Brook targets (x86-64, aarch64) is little-endian, so packing
// is a memcpy (or no copy at all). A big-endian port would byte-swap here.
static_assert(std::endian::native == std::endian::little,
              "the PS wire format is little-endian; add byte swapping in ps/wire/wire.h");

namespace wire_internal {

template <typename T>
absl::StatusOr<absl::Span<const T>> View(std::string_view bytes, std::vector<T>* scratch,
                                         std::string_view what) {
  if (bytes.size() % sizeof(T) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": ", bytes.size(),
                                                   " bytes is not a multiple of ", sizeof(T)));
  }
  const size_t n = bytes.size() / sizeof(T);
  if (n == 0) return absl::Span<const T>();
  // protobuf keeps bytes fields in heap strings (16-byte aligned) or in the
  // SSO buffer of an 8-byte-aligned std::string, so the zero-copy view is the
  // normal case; an odd buffer (an arena, a sub-slice) is copied instead.
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(T) == 0) {
    return absl::Span<const T>(reinterpret_cast<const T*>(bytes.data()), n);
  }
  scratch->resize(n);
  std::memcpy(scratch->data(), bytes.data(), bytes.size());
  return absl::Span<const T>(*scratch);
}

}  // namespace wire_internal

// Views packed keys. INVALID_ARGUMENT (naming `what`) when the length is not
// a multiple of 8. The span aliases `bytes` or `*scratch`; both must outlive it.
inline absl::StatusOr<absl::Span<const uint64_t>> DecodeKeys(std::string_view bytes,
                                                             std::vector<uint64_t>* scratch,
                                                             std::string_view what = "keys") {
  return wire_internal::View<uint64_t>(bytes, scratch, what);
}

// Views packed float32. INVALID_ARGUMENT when the length is not a multiple of
// 4. Same aliasing as DecodeKeys.
inline absl::StatusOr<absl::Span<const float>> DecodeFloats(std::string_view bytes,
                                                            std::vector<float>* scratch,
                                                            std::string_view what) {
  return wire_internal::View<float>(bytes, scratch, what);
}

inline void EncodeKeys(absl::Span<const uint64_t> keys, std::string* out) {
  out->assign(reinterpret_cast<const char*>(keys.data()), keys.size() * sizeof(uint64_t));
}

inline void EncodeFloats(absl::Span<const float> values, std::string* out) {
  out->assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// Sizes `out` to hold `n` packed floats and returns a writable view of them,
// so a PS can pull rows straight into a response without a second copy.
// std::string storage comes from operator new (16-byte aligned) or is the SSO
// buffer (8-byte aligned), so the view is always float-aligned.
inline absl::Span<float> MutableFloats(std::string* out, size_t n) {
  out->resize(n * sizeof(float));
  return absl::Span<float>(reinterpret_cast<float*>(out->data()), n);
}

}  // namespace brook::ps::wire
