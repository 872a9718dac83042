#include "cli/progress.h"

#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace brook::cli {
namespace {

using ::testing::HasSubstr;

TEST(ProgressTest, CountsAndDurationsAreShort) {
  EXPECT_EQ(FormatCount(0), "0");
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(1234), "1.23K");
  EXPECT_EQ(FormatCount(12345), "12.3K");
  EXPECT_EQ(FormatCount(410000), "410K");
  EXPECT_EQ(FormatCount(3e6), "3.00M");
  EXPECT_EQ(FormatCount(2.5e9), "2.50G");
  EXPECT_EQ(FormatDuration(4.4), "4s");
  EXPECT_EQ(FormatDuration(185), "3m05s");
  EXPECT_EQ(FormatDuration(7620), "2h07m");
}

TEST(ProgressTest, KnownTotalShowsPercentRateAndEta) {
  ProgressState s{.label = "brook data gen",
                  .unit = "examples",
                  .done = 1'200'000,
                  .total = 3'000'000,
                  .seconds = 4.0};
  EXPECT_EQ(FormatProgressLine(s),
            "brook data gen: 1.20M / 3.00M examples (40%), 300K examples/s, ETA 6s");
  s.done = s.total;
  s.seconds = 10;
  EXPECT_EQ(FormatProgressLine(s),
            "brook data gen: 3.00M / 3.00M examples (100%), 300K examples/s, done in 10s");
}

TEST(ProgressTest, BytesGiveTheFractionWhenItemsHaveNoTotal) {
  ProgressState s{.label = "brook data convert",
                  .unit = "rows",
                  .done = 50'000,
                  .bytes_done = 25'000'000,
                  .bytes_total = 100'000'000,
                  .seconds = 2.0};
  EXPECT_EQ(FormatProgressLine(s),
            "brook data convert: 50.0K rows (25% of 100.0 MB), 25.0K rows/s, ETA 6s");
  ProgressState unknown{
      .label = "brook data stats", .unit = "examples", .done = 40, .seconds = 0.5};
  EXPECT_EQ(FormatProgressLine(unknown), "brook data stats: 40 examples, 80 examples/s");
}

TEST(ProgressTest, TtyRewritesOneLineInPlace) {
  std::ostringstream out;
  ProgressPrinter p({.label = "x",
                     .unit = "rows",
                     .total = 100,
                     .mode = ProgressMode::kTty,
                     .tty_interval = absl::Seconds(1),
                     .out = &out});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  p.Start(t0, /*background=*/false);
  p.items()->store(10);
  p.Tick(t0 + absl::Milliseconds(500));  // too soon
  EXPECT_EQ(out.str(), "");
  p.Tick(t0 + absl::Seconds(1));
  EXPECT_EQ(out.str(), "\r\033[Kx: 10 / 100 rows (10%), 10 rows/s, ETA 9s");
  p.items()->store(100);
  p.Finish(t0 + absl::Seconds(2));
  EXPECT_THAT(out.str(), HasSubstr("\r\033[Kx: 100 / 100 rows (100%), 50 rows/s, done in 2s\n"));
}

TEST(ProgressTest, LogModePrintsEveryIntervalAndNothingForAShortRun) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  {
    std::ostringstream out;
    ProgressPrinter p({.label = "x",
                       .unit = "rows",
                       .mode = ProgressMode::kLog,
                       .log_interval = absl::Seconds(5),
                       .out = &out});
    p.Start(t0, false);
    p.items()->store(3);
    p.Tick(t0 + absl::Seconds(1));
    p.Finish(t0 + absl::Seconds(2));
    EXPECT_EQ(out.str(), "");  // a quick run's stderr stays clean
  }
  std::ostringstream out;
  ProgressPrinter p({.label = "x",
                     .unit = "rows",
                     .mode = ProgressMode::kLog,
                     .log_interval = absl::Seconds(5),
                     .out = &out});
  p.Start(t0, false);
  p.items()->store(500);
  p.Tick(t0 + absl::Seconds(5));
  p.items()->store(1000);
  p.Tick(t0 + absl::Seconds(7));  // not yet
  p.Tick(t0 + absl::Seconds(10));
  p.Finish(t0 + absl::Seconds(11));
  EXPECT_EQ(out.str(),
            "x: 500 rows, 100 rows/s\n"
            "x: 1.00K rows, 100 rows/s\n"
            "x: 1.00K rows, 90 rows/s\n");
}

}  // namespace
}  // namespace brook::cli
