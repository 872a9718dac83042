#include "ps/initializer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace brook::ps {
namespace {

std::vector<float> Row(const Initializer& init, uint64_t key, int dim) {
  std::vector<float> v(dim);
  init.Fill(key, absl::MakeSpan(v));
  return v;
}

InitializerOptions Uniform(float lo, float hi) {
  InitializerOptions o;
  o.kind = InitializerKind::kUniform;
  o.low = lo;
  o.high = hi;
  return o;
}

InitializerOptions TruncNormal(float mean, float stddev) {
  InitializerOptions o;
  o.kind = InitializerKind::kTruncatedNormal;
  o.mean = mean;
  o.stddev = stddev;
  return o;
}

TEST(InitializerTest, IsAPureFunctionOfSeedAndKey) {
  for (const auto& opts : {Uniform(-1, 1), TruncNormal(0, 1)}) {
    const Initializer a(opts, 42), b(opts, 42), other_seed(opts, 43);
    EXPECT_EQ(Row(a, 7, 33), Row(b, 7, 33));           // same on any PS
    EXPECT_EQ(Row(a, 7, 33), Row(a, 7, 33));           // and every time
    EXPECT_NE(Row(a, 7, 33), Row(a, 8, 33));           // keys differ
    EXPECT_NE(Row(a, 7, 33), Row(other_seed, 7, 33));  // seeds differ
    // A prefix of a longer row equals the shorter row (element i depends
    // only on i), so dims share their leading values.
    const auto long_row = Row(a, 7, 64);
    const auto short_row = Row(a, 7, 33);
    if (opts.kind == InitializerKind::kUniform) {
      EXPECT_TRUE(std::equal(short_row.begin(), short_row.end(), long_row.begin()));
    }
  }
}

TEST(InitializerTest, GoldenValuesArePinned) {
  // Part of the data format (initializer.h): these must never change. The
  // values come from initializer_reference.py, an independent Python
  // implementation of the documented recipe.
  const Initializer u(Uniform(-0.05f, 0.05f), 42);
  const auto r = Row(u, 7, 4);
  const Initializer n(TruncNormal(0, 1), 42);
  const auto z = Row(n, 7, 4);
  const float want_u[] = {-0.010410862974822521f, -0.02835593931376934f, 0.026263410225510597f,
                          0.039282895624637604f};
  const float want_n[] = {0.10795294493436813f, -1.357047200202942f, -0.12805315852165222f,
                          -0.12052881717681885f};
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(r[i], want_u[i]) << i;
    EXPECT_FLOAT_EQ(z[i], want_n[i]) << i;
  }
}

TEST(InitializerTest, ZerosAndConstant) {
  InitializerOptions o;
  o.kind = InitializerKind::kZeros;
  EXPECT_EQ(Row(Initializer(o, 1), 5, 3), std::vector<float>(3, 0.0f));
  o.kind = InitializerKind::kConstant;
  o.value = 0.25f;
  EXPECT_EQ(Row(Initializer(o, 1), 5, 3), std::vector<float>(3, 0.25f));
}

TEST(InitializerTest, UniformCoversRangeWithRightMoments) {
  const float lo = -0.5f, hi = 1.5f;
  const Initializer init(Uniform(lo, hi), 9);
  double sum = 0, sq = 0;
  int n = 0;
  std::vector<int> hist(10, 0);
  for (uint64_t key = 0; key < 20000; ++key) {
    for (float v : Row(init, key, 16)) {
      ASSERT_GE(v, lo);
      ASSERT_LT(v, hi);
      sum += v;
      sq += double{v} * v;
      ++hist[std::min(9, static_cast<int>((v - lo) / (hi - lo) * 10))];
      ++n;
    }
  }
  const double mean = sum / n;
  const double var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.01);
  EXPECT_NEAR(var, (hi - lo) * (hi - lo) / 12.0, 0.01);
  for (int c : hist) EXPECT_NEAR(c, n / 10.0, n / 10.0 * 0.05);
}

TEST(InitializerTest, TruncatedNormalStaysWithinTwoStddev) {
  const float mean = 0.3f, sd = 0.02f;
  const Initializer init(TruncNormal(mean, sd), 11);
  double sum = 0, sq = 0;
  int n = 0, beyond_one = 0;
  for (uint64_t key = 0; key < 20000; ++key) {
    for (float v : Row(init, key, 16)) {
      ASSERT_LE(std::abs(v - mean), 2 * sd * (1 + 1e-5)) << v;
      sum += v;
      sq += double{v} * v;
      beyond_one += std::abs(v - mean) > sd ? 1 : 0;
      ++n;
    }
  }
  const double m = sum / n;
  const double sdev = std::sqrt(sq / n - m * m);
  EXPECT_NEAR(m, mean, 0.002 * sd * 10);
  // A normal truncated at +-2 sigma has std 0.8796 sigma.
  EXPECT_NEAR(sdev / sd, 0.8796, 0.01);
  // P(|z| > 1 | |z| <= 2) = (0.9545 - 0.6827) / 0.9545 = 0.2848.
  EXPECT_NEAR(static_cast<double>(beyond_one) / n, 0.2848, 0.01);
}

}  // namespace
}  // namespace brook::ps
