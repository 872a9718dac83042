#include "ps/wire/precision.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "brook/v1/ps.pb.h"
#include "common/status_macros.h"
#include "ps/wire/wire.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace brook::ps::wire {
namespace {

// The float32 bit tricks below are F. Giesen's ("half to float done quick",
// float_to_half_fast3_rtne): exact, round-to-nearest-even, branch-light.
constexpr uint32_t kF32Infinity = 255u << 23;
constexpr uint32_t kF16MaxPlusOne = (127u + 16u) << 23;  // 65536.0f: Inf from here
constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;

float Bits(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

#if defined(__x86_64__)
// 8 values an instruction, rounding exactly as the one-value functions do:
// F16C's _MM_FROUND_TO_NEAREST_INT is ties-to-even, and the AVX2 bf16 code
// is FloatToBf16's arithmetic on 8 lanes. Unaligned loads and stores: a
// payload sits at any byte of a message.
__attribute__((target("avx,f16c"))) void EncodeFp16Simd(const float* src, size_t n, float scale,
                                                        char* dst) {
  const __m256 s = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(src + i), s);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) {
    const uint16_t h = FloatToFp16(src[i] * scale);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

__attribute__((target("avx,f16c"))) void DecodeFp16Simd(const char* src, size_t n, float inv_scale,
                                                        float* dst) {
  const __m256 s = _mm256_set1_ps(inv_scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(h), s));
  }
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = Fp16ToFloat(h) * inv_scale;
  }
}

__attribute__((target("avx2"))) void EncodeBf16Simd(const float* src, size_t n, char* dst) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i infinity = _mm256_set1_epi32(static_cast<int>(kF32Infinity));
  const __m256i round = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, round), odd), 16);
    const __m256i nan_bits = _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet);
    // |u| > Inf as signed ints: the sign is masked off, so both are >= 0.
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), infinity);
    const __m256i out = _mm256_blendv_epi8(rounded, nan_bits, is_nan);
    // 8 x 32 -> 8 x 16 bits: packus works per 128-bit lane, then the lanes' low
    // halves are put side by side. Values are < 2^16, so packus keeps them.
    const __m256i packed = _mm256_packus_epi32(out, out);
    const __m256i ordered = _mm256_permute4x64_epi64(packed, 0x08);  // qwords 0, 2
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), _mm256_castsi256_si128(ordered));
  }
  for (; i < n; ++i) {
    const uint16_t h = FloatToBf16(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

__attribute__((target("avx2"))) void DecodeBf16Simd(const char* src, size_t n, float* dst) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    const __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), u);
  }
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = Bf16ToFloat(h);
  }
}

bool HasF16c() {
  // CPUID.1:ECX.F16C; clang 14 has no "f16c" for __builtin_cpu_supports.
  // "avx" there also checks that the OS saves the YMM registers.
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    return (ecx & bit_F16C) != 0 && __builtin_cpu_supports("avx");
  }();
  return has;
}
bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

}  // namespace

uint16_t FloatToBf16(float value) {
  uint32_t u = Bits(value);
  if ((u & 0x7fffffffu) > kF32Infinity) return static_cast<uint16_t>((u >> 16) | 0x40u);  // qNaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float Bf16ToFloat(uint16_t bits) { return Bits(static_cast<uint32_t>(bits) << 16); }

uint16_t FloatToFp16(float value) {
  uint32_t f = Bits(value);
  const uint32_t sign = f & 0x80000000u;
  f ^= sign;
  uint32_t out;
  if (f >= kF16MaxPlusOne) {
    out = f > kF32Infinity ? 0x7e00u : 0x7c00u;  // NaN -> qNaN, too large -> Inf
  } else if (f < (113u << 23)) {
    // Below fp16's smallest normal: let the FPU round the subnormal.
    out = Bits(Bits(f) + Bits(kDenormMagic)) - kDenormMagic;
  } else {
    const uint32_t mant_odd = (f >> 13) & 1u;
    f += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu;
    f += mant_odd;
    out = f >> 13;  // a carry into the exponent rounds up to Inf correctly
  }
  return static_cast<uint16_t>(out | (sign >> 16));
}

float Fp16ToFloat(uint16_t bits) {
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;
  uint32_t o = (static_cast<uint32_t>(bits) & 0x7fffu) << 13;
  const uint32_t exp = kShiftedExp & o;
  o += (127u - 15u) << 23;
  float result;
  if (exp == kShiftedExp) {
    result = Bits(o + ((128u - 16u) << 23));  // Inf / NaN
  } else if (exp == 0) {
    result = Bits(o + (1u << 23)) - Bits(113u << 23);  // zero / subnormal
  } else {
    result = Bits(o);
  }
  return Bits(Bits(result) | ((static_cast<uint32_t>(bits) & 0x8000u) << 16));
}

float Fp16Scale(absl::Span<const float> values) {
  float max_abs = 0;
  for (float v : values) {
    const float a = std::fabs(v);
    // NaN compares false; Inf is left out explicitly.
    if (a > max_abs && a <= std::numeric_limits<float>::max()) max_abs = a;
  }
  if (max_abs == 0) return 1.0f;
  int exponent = 0;
  std::frexp(max_abs, &exponent);  // max_abs = f x 2^exponent, f in [0.5, 1)
  // max_abs x 2^(15 - exponent) = f x 2^15, in [2^14, 2^15).
  const int shift = std::clamp(15 - exponent, -126, 127);
  return std::ldexp(1.0f, shift);
}

void EncodeValues(WirePrecision precision, absl::Span<const float> values, float scale, char* dst) {
  const size_t n = values.size();
  const float* src = values.data();
  switch (precision) {
    case WirePrecision::kFp32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case WirePrecision::kBf16:
#if defined(__x86_64__)
      if (HasAvx2()) return EncodeBf16Simd(src, n, dst);
#endif
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = FloatToBf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case WirePrecision::kFp16:
#if defined(__x86_64__)
      if (HasF16c()) return EncodeFp16Simd(src, n, scale, dst);
#endif
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = FloatToFp16(src[i] * scale);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
  }
}

void DecodeValues(WirePrecision precision, const char* src, size_t n, float scale, float* dst) {
  switch (precision) {
    case WirePrecision::kFp32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case WirePrecision::kBf16:
#if defined(__x86_64__)
      if (HasAvx2()) return DecodeBf16Simd(src, n, dst);
#endif
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = Bf16ToFloat(h);
      }
      return;
    case WirePrecision::kFp16: {
      const float inv = 1.0f / scale;  // exact: scale is a power of two
#if defined(__x86_64__)
      if (HasF16c()) return DecodeFp16Simd(src, n, inv, dst);
#endif
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = Fp16ToFloat(h) * inv;
      }
      return;
    }
  }
}

static_assert(v1::WIRE_PRECISION_FP32 == static_cast<int>(WirePrecision::kFp32));
static_assert(v1::WIRE_PRECISION_BF16 == static_cast<int>(WirePrecision::kBf16));
static_assert(v1::WIRE_PRECISION_FP16 == static_cast<int>(WirePrecision::kFp16));

int WirePrecisionNumber(WirePrecision precision) { return static_cast<int>(precision); }

absl::StatusOr<WirePrecision> WirePrecisionFromNumber(int number, std::string_view what) {
  if (number >= 0 && number <= static_cast<int>(WirePrecision::kFp16)) {
    return static_cast<WirePrecision>(number);
  }
  return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": wire precision ", number,
                                                 " is none of fp32 (0), bf16 (1), fp16 (2)"));
}

float EncodeFloatsAs(WirePrecision precision, absl::Span<const float> values, std::string* out) {
  const float scale = precision == WirePrecision::kFp16 ? Fp16Scale(values) : 1.0f;
  out->resize(values.size() * WireValueBytes(precision));
  EncodeValues(precision, values, scale, out->data());
  return scale;
}

absl::StatusOr<absl::Span<const float>> DecodeFloatsAs(WirePrecision precision,
                                                       std::string_view bytes, float scale,
                                                       std::vector<float>* scratch,
                                                       std::string_view what) {
  if (precision == WirePrecision::kFp32) return DecodeFloats(bytes, scratch, what);
  RETURN_IF_ERROR(CheckScale(&scale, what));
  const size_t size = WireValueBytes(precision);
  if (bytes.size() % size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": ", bytes.size(),
                                                   " bytes is not a multiple of ", size, " (",
                                                   std::string(WirePrecisionName(precision)), ")"));
  }
  const size_t n = bytes.size() / size;
  if (scratch->size() < n) scratch->resize(n);  // grows only: a reused one costs nothing
  DecodeValues(precision, bytes.data(), n, scale, scratch->data());
  return absl::Span<const float>(scratch->data(), n);
}

void RoundTrip(WirePrecision precision, absl::Span<float> values) {
  if (precision == WirePrecision::kFp32 || values.empty()) return;
  std::string bytes;
  const float scale = EncodeFloatsAs(precision, values, &bytes);
  DecodeValues(precision, bytes.data(), values.size(), scale, values.data());
}

absl::Status CheckScale(float* scale, std::string_view what) {
  if (*scale == 0) {
    *scale = 1.0f;
    return absl::OkStatus();
  }
  int exponent = 0;
  const float fraction = std::isfinite(*scale) ? std::frexp(*scale, &exponent) : 0;
  if (*scale > 0 && fraction == 0.5f) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(what), ": scale ", *scale, " is not a finite power of two > 0"));
}

}  // namespace brook::ps::wire
