// XXH64 written from the xxHash specification (doc/xxhash_spec.md in
// Cyan4973/xxHash), not copied from its sources, plus Mix64. Both are part of
// Brook's data format (see hash.h): never change their output.

#include "common/hash.h"

#include <bit>
#include <cstring>

namespace brook {
namespace {

// The spec defines XXH64 over little-endian lanes. Brook only targets
// little-endian hosts; a big-endian port would have to byte-swap here.
static_assert(std::endian::native == std::endian::little,
              "Hash64 reads lanes in host order, which must be little-endian");

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;

inline uint64_t Load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));  // unaligned-safe; compiles to one load
  return v;
}

inline uint32_t Load32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline uint64_t Round(uint64_t acc, uint64_t lane) {
  acc += lane * kPrime2;
  acc = std::rotl(acc, 31);
  return acc * kPrime1;
}

inline uint64_t MergeAccumulator(uint64_t acc, uint64_t acc_n) {
  acc ^= Round(0, acc_n);
  return acc * kPrime1 + kPrime4;
}

}  // namespace

uint64_t Hash64(std::string_view data, uint64_t seed) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const size_t len = data.size();
  const unsigned char* const end = p + len;
  uint64_t acc;

  if (len >= 32) {
    // Step 1-2: four accumulators consume 32-byte stripes.
    uint64_t acc1 = seed + kPrime1 + kPrime2;
    uint64_t acc2 = seed + kPrime2;
    uint64_t acc3 = seed;
    uint64_t acc4 = seed - kPrime1;
    const unsigned char* const limit = end - 32;
    do {
      acc1 = Round(acc1, Load64(p));
      acc2 = Round(acc2, Load64(p + 8));
      acc3 = Round(acc3, Load64(p + 16));
      acc4 = Round(acc4, Load64(p + 24));
      p += 32;
    } while (p <= limit);
    // Step 3: converge.
    acc = std::rotl(acc1, 1) + std::rotl(acc2, 7) + std::rotl(acc3, 12) + std::rotl(acc4, 18);
    acc = MergeAccumulator(acc, acc1);
    acc = MergeAccumulator(acc, acc2);
    acc = MergeAccumulator(acc, acc3);
    acc = MergeAccumulator(acc, acc4);
  } else {
    // Special case for short inputs: no stripes.
    acc = seed + kPrime5;
  }

  // Step 4: add the input length.
  acc += static_cast<uint64_t>(len);

  // Step 5: consume the remaining (< 32) bytes: 8, then 4, then 1 at a time.
  while (end - p >= 8) {
    acc ^= Round(0, Load64(p));
    acc = std::rotl(acc, 27) * kPrime1 + kPrime4;
    p += 8;
  }
  if (end - p >= 4) {
    acc ^= static_cast<uint64_t>(Load32(p)) * kPrime1;
    acc = std::rotl(acc, 23) * kPrime2 + kPrime3;
    p += 4;
  }
  while (p < end) {
    acc ^= static_cast<uint64_t>(*p) * kPrime5;
    acc = std::rotl(acc, 11) * kPrime1;
    ++p;
  }

  // Step 6: final avalanche.
  acc ^= acc >> 33;
  acc *= kPrime2;
  acc ^= acc >> 29;
  acc *= kPrime3;
  acc ^= acc >> 32;
  return acc;
}

uint64_t Mix64(uint64_t salt, uint64_t key) {
  // XOR with a fixed value, adding a constant and the splitmix64 finalizer
  // are each bijections, so the whole is a bijection in `key` for a fixed
  // salt: distinct keys of one table never collide before sharding. The salt
  // is rotated by 32 so that small table ids and small keys (both common)
  // touch different bits. The golden-ratio increment (splitmix64's gamma)
  // keeps Mix64(0, 0) from being the fixed point 0.
  uint64_t z = key ^ std::rotl(salt, 32);
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace brook
