#include "ps/initializer.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/hash.h"

namespace brook::ps {
namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ULL;

// Counter-based: draw j depends only on (state, j).
inline uint64_t Draw(uint64_t state, uint64_t j) {
  uint64_t z = state + (j + 1) * kGamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

void FillUniform(uint64_t state, float low, float high, absl::Span<float> out) {
  const double lo = low;
  const double span = static_cast<double>(high) - lo;
  constexpr double kScale = 1.0 / (1 << 24);
  // The largest float below `high`: rounding lo + span*u to float can land
  // on `high` itself, which [low, high) excludes.
  const float below_high = std::nextafter(high, low);
  const size_t n = out.size();
  for (size_t i = 0; i < n; i += 2) {
    const uint64_t x = Draw(state, i / 2);
    const double u0 = static_cast<double>(x >> 40) * kScale;
    out[i] = std::min(static_cast<float>(lo + span * u0), below_high);
    if (i + 1 < n) {
      const double u1 = static_cast<double>((x >> 16) & 0xFFFFFF) * kScale;
      out[i + 1] = std::min(static_cast<float>(lo + span * u1), below_high);
    }
  }
}

void FillTruncatedNormal(uint64_t state, float mean, float stddev, absl::Span<float> out) {
  constexpr double k53 = 1.0 / (1ull << 53);
  constexpr double kTwoPi = 2.0 * std::numbers::pi;
  uint64_t j = 0;  // next draw
  size_t i = 0;
  while (i < out.size()) {
    // u1 in (0, 1] so log(u1) is finite; u2 in [0, 1).
    const double u1 = static_cast<double>((Draw(state, j) >> 11) + 1) * k53;
    const double u2 = static_cast<double>(Draw(state, j + 1) >> 11) * k53;
    j += 2;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double z[2] = {r * std::cos(kTwoPi * u2), r * std::sin(kTwoPi * u2)};
    for (double v : z) {
      if (std::abs(v) > 2.0 || i >= out.size()) continue;
      out[i++] = static_cast<float>(mean + stddev * v);
    }
  }
}

}  // namespace

Initializer::Initializer(const InitializerOptions& options, uint64_t seed)
    : options_(options), seed_(seed) {}

void Initializer::Fill(uint64_t key, absl::Span<float> out) const {
  switch (options_.kind) {
    case InitializerKind::kZeros:
      std::fill(out.begin(), out.end(), 0.0f);
      return;
    case InitializerKind::kConstant:
      std::fill(out.begin(), out.end(), options_.value);
      return;
    case InitializerKind::kUniform:
      FillUniform(Mix64(seed_, key), options_.low, options_.high, out);
      return;
    case InitializerKind::kTruncatedNormal:
      FillTruncatedNormal(Mix64(seed_, key), options_.mean, options_.stddev, out);
      return;
  }
}

}  // namespace brook::ps
