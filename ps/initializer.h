// Initial values of embedding rows and dense variables.
//
// A row's initial value is a pure function of (seed, key): a counter-based
// generator draws element i of key k from SplitMix64(Mix64(seed, k) + i * γ),
// so the same key starts identically on any PS, after eviction, and after a
// restart, without storing anything. This is part of Brook's data format:
// changing the generator changes every model that relies on it.
//
// Exact recipe (state = Mix64(seed, key), γ = 0x9E3779B97F4A7C15,
// draw(j) = splitmix64 finalizer of state + (j + 1) * γ):
//   kZeros / kConstant: no draws.
//   kUniform: element 2j uses the top 24 bits of draw(j), element 2j+1 the
//     next 24 bits (bits 39..16); u = bits * 2^-24 in [0, 1);
//     value = low + (high - low) * u computed in double, rounded to float,
//     kept below `high`.
//   kTruncatedNormal: Box-Muller in double on consecutive draw pairs
//     (u1 from draw 2p's top 53 bits shifted into (0, 1], u2 from draw 2p+1),
//     giving two standard normals; each with |z| > 2 is discarded (TF's
//     truncated_normal redraws beyond two standard deviations) and the next
//     one taken; value = mean + stddev * z.
//
// Immutable after construction: safe for concurrent use from any thread.
#pragma once

#include <cstdint>

#include "absl/types/span.h"
#include "ps/options.h"

namespace brook::ps {

class Initializer {
 public:
  // REQUIRES: options.Validate-d by the owning TableOptions/DenseOptions.
  Initializer(const InitializerOptions& options, uint64_t seed);

  // Writes the initial value of row `key` into `out` (out.size() == dim).
  // Never allocates.
  void Fill(uint64_t key, absl::Span<float> out) const;

  const InitializerOptions& options() const { return options_; }
  uint64_t seed() const { return seed_; }

 private:
  InitializerOptions options_;
  uint64_t seed_;
};

}  // namespace brook::ps
