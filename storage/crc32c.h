// CRC32C (Castagnoli), as TFRecord frames use it. The SSE4.2 instruction is
// used when the CPU has it (checked once at run time); a portable table-driven
// version otherwise. Both are always compiled so tests can compare them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace brook::storage::crc32c {

// Extends `init_crc` (the CRC of some prefix) with `data`. Value(x) ==
// Extend(0, x).
uint32_t Extend(uint32_t init_crc, const char* data, size_t n);
inline uint32_t Value(const char* data, size_t n) { return Extend(0, data, n); }
inline uint32_t Value(std::string_view s) { return Extend(0, s.data(), s.size()); }

// The two implementations, for tests and benchmarks.
uint32_t ExtendPortable(uint32_t init_crc, const char* data, size_t n);
uint32_t ExtendHardware(uint32_t init_crc, const char* data,
                        size_t n);  // REQUIRES: HardwareAvailable()
bool HardwareAvailable();

// TFRecord's masking, so that a CRC of data containing CRCs stays strong.
inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t Unmask(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace brook::storage::crc32c
