// A figure and its ceiling measured in alternating slices, so that their
// ratio holds on a shared, noisy machine.
//
// Measured one after the other, a figure and its ceiling see different
// neighbours: on the 2-core VMs these benchmarks run on, the same binary's
// in-process pull read 66% of its gather ceiling in one run and 36% a minute
// later, because the ceiling itself moved 34 -> 63 M rows/s between runs.
// Cutting both into short slices, A B B A A B ..., puts each pair of slices
// under nearly the same load; the median of the per-pair ratios is the
// figure's verdict, and the lowest and highest pair show how much the machine
// moved under it.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "bench/bench_util.h"

namespace brook::bench {

struct RatioSpread {
  double median = 0;
  double low = 0;
  double high = 0;
};

// The ratios a[i] / b[i]: their median (the mean of the middle two for an
// even count), lowest and highest. Pairs whose b is not positive are left
// out (a slice that completed no call); all zeros if none is left.
// REQUIRES: a.size() == b.size().
RatioSpread SliceRatios(absl::Span<const double> a, absl::Span<const double> b);

struct PairedRates {
  // Each over all its slices: calls per second and cores busy, the means of
  // equal-length slices.
  MeasuredRate a;
  MeasuredRate b;
  RatioSpread ratio;  // of a's calls per second to b's, slice pair by pair
  int slices = 0;
};

// Which side runs first in slice pair `i`: pairs alternate A B, B A, so that
// a drift in the machine's speed across a pair favours neither side.
inline bool PairRunsAFirst(int i) { return i % 2 == 0; }

// Runs fa and fb (as MeasureCallRate's fn) on `threads` threads for `seconds`
// each in all, cut into `slices` slice pairs.
// REQUIRES: slices >= 1, seconds > 0.
template <typename FnA, typename FnB>
absl::StatusOr<PairedRates> MeasurePairedCallRates(int threads, double seconds, int slices, FnA fa,
                                                   FnB fb) {
  const double slice_seconds = seconds / slices;
  std::vector<double> rate_a, rate_b, cores_a, cores_b;
  for (int i = 0; i < slices; ++i) {
    for (int side = 0; side < 2; ++side) {
      const bool run_a = (side == 0) == PairRunsAFirst(i);
      absl::StatusOr<MeasuredRate> r = run_a ? MeasureCallRate(threads, slice_seconds, fa)
                                             : MeasureCallRate(threads, slice_seconds, fb);
      if (!r.ok()) return r.status();
      (run_a ? rate_a : rate_b).push_back(r->calls_per_second);
      (run_a ? cores_a : cores_b).push_back(r->cores_busy);
    }
  }
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  PairedRates out;
  out.a = {mean(rate_a), mean(cores_a)};
  out.b = {mean(rate_b), mean(cores_b)};
  out.ratio = SliceRatios(rate_a, rate_b);
  out.slices = slices;
  return out;
}

}  // namespace brook::bench
