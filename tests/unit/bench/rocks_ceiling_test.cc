#include "bench/rocks_ceiling.h"

#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace brook::bench {
namespace {

TEST(RocksCeilingTest, MeasuresBothRatesOnATinyTable) {
  brook::testing::TempDir dir;
  storage::RocksDbOptions options;
  options.block_cache_bytes = 1 << 20;
  options.write_buffer_bytes = 4 << 20;
  auto ceiling = MeasureRocksCeiling(dir.Join("db"), options, /*rows=*/2000, /*row_bytes=*/64,
                                     /*batch=*/128, /*seconds=*/0.1, /*seed=*/7);
  ASSERT_TRUE(ceiling.ok()) << ceiling.status();
  EXPECT_GT(ceiling->multiget_rows_per_s, 0);
  EXPECT_GT(ceiling->writebatch_rows_per_s, 0);
  EXPECT_GT(ceiling->populate_seconds, 0);
  // A second run over the same directory would measure leftover data.
  auto again = MeasureRocksCeiling(dir.Join("db"), options, 2000, 64, 128, 0.1, 7);
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, again.status().code());
}

TEST(RocksCeilingTest, RejectsABatchLargerThanTheTable) {
  brook::testing::TempDir dir;
  auto ceiling = MeasureRocksCeiling(dir.Join("db"), {}, 10, 64, 11, 0.1, 1);
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, ceiling.status().code());
}

}  // namespace
}  // namespace brook::bench
