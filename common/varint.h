// Protobuf base-128 varints, for the few places that write protobuf wire
// bytes by hand instead of serializing a message (the WAL's in-place
// records, the zero-copy pull reply, the predict JSON's Examples).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace brook {

inline constexpr size_t kMaxVarintBytes = 10;

// Bytes PutVarint writes for v: 1 to 10.
constexpr size_t VarintBytes(uint64_t v) { return 1 + (std::bit_width(v | 1) - 1) / 7; }

// Writes v at dst and returns the byte after it. Byte: char or uint8_t.
template <typename Byte>
Byte* PutVarint(Byte* dst, uint64_t v) {
  while (v >= 0x80) {
    *dst++ = static_cast<Byte>(v | 0x80);
    v >>= 7;
  }
  *dst++ = static_cast<Byte>(v);
  return dst;
}

}  // namespace brook
