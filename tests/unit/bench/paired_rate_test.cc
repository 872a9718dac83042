#include "bench/paired_rate.h"

#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace brook::bench {
namespace {

TEST(SliceRatiosTest, OddCountTakesTheMiddleRatio) {
  // Ratios 0.5, 2.0, 0.25: sorted 0.25, 0.5, 2.0.
  const RatioSpread r = SliceRatios({1, 4, 1}, {2, 2, 4});
  EXPECT_DOUBLE_EQ(r.median, 0.5);
  EXPECT_DOUBLE_EQ(r.low, 0.25);
  EXPECT_DOUBLE_EQ(r.high, 2.0);
}

TEST(SliceRatiosTest, EvenCountAveragesTheMiddleTwo) {
  // Ratios 0.4, 0.6, 0.1, 0.9: middle two 0.4 and 0.6.
  const RatioSpread r = SliceRatios({4, 6, 1, 9}, {10, 10, 10, 10});
  EXPECT_DOUBLE_EQ(r.median, 0.5);
  EXPECT_DOUBLE_EQ(r.low, 0.1);
  EXPECT_DOUBLE_EQ(r.high, 0.9);
}

TEST(SliceRatiosTest, PairsWithoutACeilingRateAreLeftOut) {
  // The middle pair's ceiling completed no call: its ratio is undefined, not
  // infinite, and does not pull the median.
  const RatioSpread r = SliceRatios({3, 5, 6}, {6, 0, 12});
  EXPECT_DOUBLE_EQ(r.median, 0.5);
  EXPECT_DOUBLE_EQ(r.low, 0.5);
  EXPECT_DOUBLE_EQ(r.high, 0.5);
  const RatioSpread none = SliceRatios({1}, {0});
  EXPECT_EQ(none.median, 0);
  EXPECT_EQ(none.low, 0);
  EXPECT_EQ(none.high, 0);
}

// Which side started each slice: MeasureCallRate makes one untimed warm-up
// call (iteration 0) per thread at the start of every slice.
class SliceLog {
 public:
  absl::Status Call(char side, int64_t iteration) {
    std::lock_guard<std::mutex> lock(mu_);
    if (iteration == 0) starts_ += side;
    return absl::OkStatus();
  }
  std::string starts() {
    std::lock_guard<std::mutex> lock(mu_);
    return starts_;
  }

 private:
  std::mutex mu_;
  std::string starts_;
};

TEST(MeasurePairedCallRatesTest, AlternatesWhichSideGoesFirst) {
  SliceLog log;
  auto r = MeasurePairedCallRates(
      1, 0.04, 4, [&](int, int64_t i) { return log.Call('a', i); },
      [&](int, int64_t i) { return log.Call('b', i); });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(log.starts(), "abbaabba");
  EXPECT_EQ(r->slices, 4);
  EXPECT_GT(r->a.calls_per_second, 0);
  EXPECT_GT(r->b.calls_per_second, 0);
  EXPECT_GT(r->ratio.median, 0);
  EXPECT_LE(r->ratio.low, r->ratio.median);
  EXPECT_GE(r->ratio.high, r->ratio.median);
}

TEST(MeasurePairedCallRatesTest, EachThreadStartsEverySlice) {
  SliceLog log;
  auto r = MeasurePairedCallRates(
      3, 0.02, 2, [&](int, int64_t i) { return log.Call('a', i); },
      [&](int, int64_t i) { return log.Call('b', i); });
  ASSERT_TRUE(r.ok()) << r.status();
  // Slice pairs a b, then b a; three threads warm up in each slice.
  EXPECT_EQ(log.starts(), "aaabbbbbbaaa");
}

TEST(MeasurePairedCallRatesTest, AnErrorStopsTheMeasurement) {
  SliceLog log;
  auto r = MeasurePairedCallRates(
      1, 0.04, 4, [&](int, int64_t i) { return log.Call('a', i); },
      [&](int, int64_t i) -> absl::Status {
        if (i == 2) return absl::UnavailableError("ceiling went away");
        return log.Call('b', i);
      });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "ceiling went away");
  // The first pair's B slice failed: nothing ran after it.
  EXPECT_EQ(log.starts(), "ab");
}

}  // namespace
}  // namespace brook::bench
