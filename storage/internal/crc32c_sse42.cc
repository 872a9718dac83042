// The SSE4.2 CRC32C kernel. Built with -msse4.2; only reached after a run-time
// CPU check. Keep includes to the C headers below: an inline function from a
// C++ header instantiated here could be merged (by the linker) with copies
// used on the portable path and carry SSE4.2 instructions there.
//
// One crc32 instruction has a latency of 3 cycles and a throughput of 1 per
// cycle, so a single dependency chain runs at a third of the unit's speed.
// Large buffers are cut into three equal blocks whose CRCs run as three
// independent chains, then joined: CRC(A||B) = shift(CRC(A), |B|) ^ CRC0(B),
// where shift() appends |B| zero bytes, a linear map tabulated once per block
// size (Mark Adler's crc32c.c method).
#include <stdint.h>
#include <string.h>

#include "storage/internal/crc32c_internal.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace brook::storage::crc32c::internal {

#if defined(__x86_64__)

namespace {

constexpr size_t kLongBlock = 8192;  // bytes per stream in the long loop
constexpr size_t kShortBlock = 256;  // bytes per stream in the short loop
// TFRecord frames of tf.train.Example are typically 0.2-2 KiB: a third tier
// runs them three streams wide too (the join costs ~2 ns of table lookups,
// the single stream would cost 3x the latency of the crc32 instruction).
constexpr size_t kTinyBlock = 64;

inline uint64_t LoadU64(const char* p) {
  uint64_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

// CRC register (not inverted) after feeding `n` zero bytes.
uint32_t FeedZeros(uint32_t crc, size_t n) {
  for (size_t i = 0; i < n / 8; ++i) crc = static_cast<uint32_t>(_mm_crc32_u64(crc, 0));
  for (size_t i = 0; i < n % 8; ++i) crc = _mm_crc32_u8(crc, 0);
  return crc;
}

// shift(crc) for a fixed number of zero bytes, as four byte-indexed tables:
// the map is linear over GF(2), so it is the XOR of its value on each byte.
struct ZeroShift {
  uint32_t table[4][256];

  explicit ZeroShift(size_t zero_bytes) {
    uint32_t column[32];  // image of each single-bit register value
    for (int bit = 0; bit < 32; ++bit) column[bit] = FeedZeros(1u << bit, zero_bytes);
    for (uint32_t byte = 0; byte < 256; ++byte) {
      for (int lane = 0; lane < 4; ++lane) {
        uint32_t value = byte << (8 * lane);
        uint32_t image = 0;
        for (int bit = 0; bit < 32; ++bit) {
          if (value & (1u << bit)) image ^= column[bit];
        }
        table[lane][byte] = image;
      }
    }
  }

  uint32_t Apply(uint32_t crc) const {
    return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^ table[2][(crc >> 16) & 0xff] ^
           table[3][crc >> 24];
  }
};

const ZeroShift& LongShift() {
  static const ZeroShift* shift = new ZeroShift(kLongBlock);
  return *shift;
}
const ZeroShift& ShortShift() {
  static const ZeroShift* shift = new ZeroShift(kShortBlock);
  return *shift;
}
const ZeroShift& TinyShift() {
  static const ZeroShift* shift = new ZeroShift(kTinyBlock);
  return *shift;
}

// Runs three streams over [p, p + 3*block) and joins them into crc0.
inline uint32_t ThreeStreams(uint32_t crc0, const char* p, size_t block, const ZeroShift& shift) {
  uint64_t c0 = crc0, c1 = 0, c2 = 0;
  const char* end = p + block;
  for (; p < end; p += 8) {
    c0 = _mm_crc32_u64(c0, LoadU64(p));
    c1 = _mm_crc32_u64(c1, LoadU64(p + block));
    c2 = _mm_crc32_u64(c2, LoadU64(p + 2 * block));
  }
  uint32_t joined = shift.Apply(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
  return shift.Apply(joined) ^ static_cast<uint32_t>(c2);
}

}  // namespace

uint32_t ExtendSse42(uint32_t init_crc, const char* data, size_t n) {
  uint32_t crc = ~init_crc;
  if (n >= 3 * kLongBlock) {
    // Long buffers: align to 8 bytes so the 64-bit loads never split a cache
    // line. Short ones (TFRecord headers and frames) skip this: the prologue
    // is up to 7 dependent byte steps, dearer than a few split loads.
    while ((reinterpret_cast<uintptr_t>(data) & 7) != 0) {
      crc = _mm_crc32_u8(crc, static_cast<uint8_t>(*data++));
      --n;
    }
    const ZeroShift& shift = LongShift();
    while (n >= 3 * kLongBlock) {  // the prologue may have taken it below
      crc = ThreeStreams(crc, data, kLongBlock, shift);
      data += 3 * kLongBlock;
      n -= 3 * kLongBlock;
    }
  }
  if (n >= 3 * kShortBlock) {
    const ZeroShift& shift = ShortShift();
    do {
      crc = ThreeStreams(crc, data, kShortBlock, shift);
      data += 3 * kShortBlock;
      n -= 3 * kShortBlock;
    } while (n >= 3 * kShortBlock);
  }
  if (n >= 3 * kTinyBlock) {
    const ZeroShift& shift = TinyShift();
    do {
      crc = ThreeStreams(crc, data, kTinyBlock, shift);
      data += 3 * kTinyBlock;
      n -= 3 * kTinyBlock;
    } while (n >= 3 * kTinyBlock);
  }
  uint64_t crc64 = crc;
  for (; n >= 8; n -= 8, data += 8) crc64 = _mm_crc32_u64(crc64, LoadU64(data));
  crc = static_cast<uint32_t>(crc64);
  for (; n > 0; --n) crc = _mm_crc32_u8(crc, static_cast<uint8_t>(*data++));
  return ~crc;
}

bool Sse42Compiled() { return true; }

#else  // !__x86_64__

uint32_t ExtendSse42(uint32_t init_crc, const char*, size_t) { return init_crc; }
bool Sse42Compiled() { return false; }

#endif

}  // namespace brook::storage::crc32c::internal
