// The TFRecord frame, shared by the reader and the writer:
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes)
//   | data[length] | uint32 masked_crc32c(data)
#pragma once

#include <cstddef>
#include <cstdint>

#include "storage/crc32c.h"

namespace brook::storage::internal {

constexpr size_t kLengthBytes = 8;
constexpr size_t kHeaderBytes = kLengthBytes + 4;  // length + its masked CRC
constexpr size_t kFooterBytes = 4;                 // masked CRC of the data
constexpr size_t kFrameOverheadBytes = kHeaderBytes + kFooterBytes;

inline void EncodeFixed32(char* dst, uint32_t value) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}
inline void EncodeFixed64(char* dst, uint64_t value) {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}
inline uint32_t DecodeFixed32(const char* src) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i)
    value |= static_cast<uint32_t>(static_cast<unsigned char>(src[i])) << (8 * i);
  return value;
}
inline uint64_t DecodeFixed64(const char* src) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i)
    value |= static_cast<uint64_t>(static_cast<unsigned char>(src[i])) << (8 * i);
  return value;
}

// Writes the 12-byte header for a record of `length` bytes.
inline void EncodeHeader(char* dst, uint64_t length) {
  EncodeFixed64(dst, length);
  EncodeFixed32(dst + kLengthBytes, crc32c::Mask(crc32c::Value(dst, kLengthBytes)));
}

}  // namespace brook::storage::internal
