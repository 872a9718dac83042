// ps/wire/precision.h: bf16 and fp16 round to nearest even (ties, carries
// into the exponent, subnormals, overflow to Inf, NaN), the bulk paths (F16C
// where the CPU has it) agree bit for bit with the one-value reference, the
// fp16 scale keeps tiny gradients from underflowing, and bad payloads and
// scales are refused with their name.
#include "ps/wire/precision.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace brook::ps::wire {
namespace {

float F(uint32_t bits) { return std::bit_cast<float>(bits); }

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(-2.0f), 0xc000);
  // 1 + 2^-8 is halfway between bf16 1.0 (even) and 1 + 2^-7: stays 1.0.
  EXPECT_EQ(FloatToBf16(F(0x3f808000)), 0x3f80);
  // 1 + 3 x 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: goes up.
  EXPECT_EQ(FloatToBf16(F(0x3f818000)), 0x3f82);
  // Just past halfway rounds up; just below rounds down.
  EXPECT_EQ(FloatToBf16(F(0x3f808001)), 0x3f81);
  EXPECT_EQ(FloatToBf16(F(0x3f807fff)), 0x3f80);
  // The largest float rounds up past bf16's largest finite value: Inf.
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the low bits must not become Inf.
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(F(0x7f800001)))));
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  // Float subnormals round the same way: a tie goes to the even neighbour.
  EXPECT_EQ(FloatToBf16(F(0x00018000)), 0x0002);
  EXPECT_EQ(FloatToBf16(F(0x00008000)), 0x0000);
}

TEST(Fp16Test, RoundsToNearestEven) {
  EXPECT_EQ(FloatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFp16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToFp16(65504.0f), 0x7bff);  // largest finite
  // 65520 is halfway between 65504 (odd mantissa) and 65536 (Inf): Inf.
  EXPECT_EQ(FloatToFp16(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToFp16(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToFp16(1e6f), 0x7c00);
  EXPECT_EQ(FloatToFp16(-1e6f), 0xfc00);
  // 1 + 2^-11 is halfway between 1.0 (even) and 1 + 2^-10: stays.
  EXPECT_EQ(FloatToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Subnormals: 2^-24 is the smallest; half of it ties to 0 (even).
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(FloatToFp16(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(FloatToFp16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(Fp16ToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Fp16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(Fp16ToFloat(0x3555), Fp16ToFloat(FloatToFp16(Fp16ToFloat(0x3555))));
}

TEST(Fp16Test, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToFp16(f), h) << std::hex << h;
  }
}

TEST(Bf16Test, EveryBf16RoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToBf16(f), h) << std::hex << h;
  }
}

// Random values over many binades, specials included, at odd lengths and
// odd destination offsets: the bulk encoders equal the reference.
TEST(EncodeValuesTest, BulkPathsEqualTheReference) {
  std::mt19937_64 rng(3);
  std::vector<float> values(1031);
  for (float& v : values) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    v = F((bits & 0x8fffffffu) | (static_cast<uint32_t>(100 + rng() % 60) << 23));
  }
  values[5] = std::numeric_limits<float>::infinity();
  values[6] = -std::numeric_limits<float>::infinity();
  values[7] = 0;
  values[8] = 65520.0f;
  for (WirePrecision p : {WirePrecision::kBf16, WirePrecision::kFp16}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{257}, values.size()}) {
      const float scale = p == WirePrecision::kFp16 ? 0.25f : 1.0f;
      std::vector<char> buf(2 * n + 1);
      EncodeValues(p, absl::MakeConstSpan(values.data(), n), scale, buf.data() + 1);
      std::vector<float> back(n);
      DecodeValues(p, buf.data() + 1, n, scale, back.data());
      for (size_t i = 0; i < n; ++i) {
        uint16_t got;
        std::memcpy(&got, buf.data() + 1 + 2 * i, 2);
        const uint16_t want =
            p == WirePrecision::kBf16 ? FloatToBf16(values[i]) : FloatToFp16(values[i] * scale);
        ASSERT_EQ(got, want) << WirePrecisionName(p) << " value " << values[i] << " at " << i;
        const float decoded =
            p == WirePrecision::kBf16 ? Bf16ToFloat(want) : Fp16ToFloat(want) * (1.0f / scale);
        ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(decoded)) << i;
      }
    }
  }
}

TEST(Fp16ScaleTest, PutsTheLargestFiniteValueInTheTopBinade) {
  const std::vector<float> small = {1e-9f, -3e-10f, 0.0f, std::numeric_limits<float>::quiet_NaN(),
                                    std::numeric_limits<float>::infinity()};
  const float scale = Fp16Scale(small);
  EXPECT_GE(1e-9f * scale, 16384.0f);
  EXPECT_LT(1e-9f * scale, 32768.0f);
  int exponent = 0;
  EXPECT_EQ(std::frexp(scale, &exponent), 0.5f);  // a power of two
  EXPECT_EQ(Fp16Scale(std::vector<float>{0.0f, 0.0f}), 1.0f);
  EXPECT_EQ(Fp16Scale(std::vector<float>{}), 1.0f);
  const float big = Fp16Scale(std::vector<float>{1e30f});
  EXPECT_LT(1e30f * big, 32768.0f);
  EXPECT_GE(1e30f * big, 16384.0f);
}

// Gradients around 1e-9 underflow to 0 in plain fp16 (its smallest step is
// 6e-8); with the scale they come back within fp16's relative precision.
TEST(Fp16ScaleTest, TinyGradientsSurviveARoundTrip) {
  std::vector<float> grads = {1e-9f, -2.5e-9f, 3.3e-10f, 7e-9f};
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(1e-9f)), 0.0f);
  std::vector<float> sent = grads;
  RoundTrip(WirePrecision::kFp16, absl::MakeSpan(sent));
  for (size_t i = 0; i < grads.size(); ++i) {
    EXPECT_NEAR(sent[i], grads[i], std::fabs(grads[i]) * 1e-3) << i;
  }
  std::vector<float> bf = grads;
  RoundTrip(WirePrecision::kBf16, absl::MakeSpan(bf));
  for (size_t i = 0; i < grads.size(); ++i) {
    EXPECT_NEAR(bf[i], grads[i], std::fabs(grads[i]) * 4e-3) << i;
  }
  std::vector<float> same = grads;
  RoundTrip(WirePrecision::kFp32, absl::MakeSpan(same));
  EXPECT_EQ(same, grads);
}

TEST(DecodeFloatsAsTest, RefusesBadLengthsScalesAndPrecisions) {
  std::vector<float> scratch;
  const std::string three(3, '\0');
  absl::StatusOr<absl::Span<const float>> odd =
      DecodeFloatsAs(WirePrecision::kBf16, three, 1, &scratch, "grads of table 'x'");
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("grads of table 'x'"), std::string::npos);
  EXPECT_NE(odd.status().message().find("bf16"), std::string::npos);
  const std::string four(4, '\0');
  for (float bad : {3.0f, -2.0f, std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_FALSE(DecodeFloatsAs(WirePrecision::kFp16, four, bad, &scratch, "grads").ok()) << bad;
  }
  // 0 is an unset scale: 1.
  absl::StatusOr<absl::Span<const float>> ok =
      DecodeFloatsAs(WirePrecision::kFp16, four, 0, &scratch, "grads");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 2u);
  EXPECT_FALSE(WirePrecisionFromNumber(3, "pull").ok());
  EXPECT_FALSE(WirePrecisionFromNumber(-1, "pull").ok());
  EXPECT_EQ(*WirePrecisionFromNumber(1, "pull"), WirePrecision::kBf16);
  EXPECT_EQ(WirePrecisionFromName("fp16"), WirePrecision::kFp16);
  EXPECT_EQ(WirePrecisionFromName("half"), std::nullopt);
}

}  // namespace
}  // namespace brook::ps::wire
