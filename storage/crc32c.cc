// CRC32C: a portable slicing-by-8 version and run-time dispatch to the SSE4.2
// kernel (storage/internal/crc32c_sse42.cc).
#include "storage/crc32c.h"

#include <array>

#include "storage/internal/crc32c_internal.h"

namespace brook::storage::crc32c {
namespace {

constexpr uint32_t kReflectedPolynomial = 0x82f63b78u;  // Castagnoli, bit-reversed

// Slicing-by-8 tables: kTables[k][b] is the CRC register after feeding byte b
// followed by k zero bytes, so eight table lookups consume eight bytes at once.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables tables{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (kReflectedPolynomial & (0u - (crc & 1)));
    tables[0][byte] = crc;
  }
  for (uint32_t byte = 0; byte < 256; ++byte) {
    for (int k = 1; k < 8; ++k) {
      uint32_t prev = tables[k - 1][byte];
      tables[k][byte] = (prev >> 8) ^ tables[0][prev & 0xff];
    }
  }
  return tables;
}

constexpr Tables kTables = MakeTables();

inline uint32_t LoadLe32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

bool DetectHardware() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return internal::Sse42Compiled() && __builtin_cpu_supports("sse4.2");
#else
  return false;
#endif
}

}  // namespace

uint32_t ExtendPortable(uint32_t init_crc, const char* data, size_t n) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  uint32_t crc = ~init_crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t low = LoadLe32(p) ^ crc;
    uint32_t high = LoadLe32(p + 4);
    crc = kTables[7][low & 0xff] ^ kTables[6][(low >> 8) & 0xff] ^ kTables[5][(low >> 16) & 0xff] ^
          kTables[4][low >> 24] ^ kTables[3][high & 0xff] ^ kTables[2][(high >> 8) & 0xff] ^
          kTables[1][(high >> 16) & 0xff] ^ kTables[0][high >> 24];
  }
  for (; n > 0; --n, ++p) crc = (crc >> 8) ^ kTables[0][(crc ^ *p) & 0xff];
  return ~crc;
}

bool HardwareAvailable() {
  static const bool available = DetectHardware();
  return available;
}

uint32_t ExtendHardware(uint32_t init_crc, const char* data, size_t n) {
  // Outside the contract (no SSE4.2) answer correctly rather than fault.
  if (!HardwareAvailable()) return ExtendPortable(init_crc, data, n);
  return internal::ExtendSse42(init_crc, data, n);
}

uint32_t Extend(uint32_t init_crc, const char* data, size_t n) {
  static const bool use_hardware = HardwareAvailable();
  return use_hardware ? internal::ExtendSse42(init_crc, data, n)
                      : ExtendPortable(init_crc, data, n);
}

}  // namespace brook::storage::crc32c
