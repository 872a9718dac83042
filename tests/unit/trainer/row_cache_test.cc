// RowCache: a row is served for refresh_steps - 1 steps after its pull and
// never later; re-inserting refreshes it; past capacity CLOCK keeps the rows
// that were served and evicts the others, and the index stays consistent.
#include "trainer/row_cache.h"

#include <gtest/gtest.h>

#include <vector>

namespace brook::trainer {
namespace {

std::vector<float> Rows(const std::vector<uint64_t>& keys, int dim, float base) {
  std::vector<float> rows;
  for (uint64_t k : keys) {
    for (int j = 0; j < dim; ++j) rows.push_back(base + static_cast<float>(k * 10 + j));
  }
  return rows;
}

TEST(RowCacheTest, NeverServesARowOlderThanRefreshStepsMinusOne) {
  constexpr int kDim = 3;
  for (int64_t refresh : {1, 2, 5}) {
    RowCache cache(kDim, 100, refresh);
    const std::vector<uint64_t> keys = {7, 9};
    cache.Insert(keys, Rows(keys, kDim, 0.5f), /*step=*/10);
    for (int64_t step = 10; step < 10 + refresh + 3; ++step) {
      std::vector<float> out(keys.size() * kDim, -1);
      std::vector<uint32_t> missing;
      cache.Lookup(keys, step, absl::MakeSpan(out), &missing);
      if (step - 10 < refresh) {
        EXPECT_TRUE(missing.empty()) << "refresh " << refresh << " step " << step;
        EXPECT_EQ(out, Rows(keys, kDim, 0.5f));
      } else {
        EXPECT_EQ(missing, (std::vector<uint32_t>{0, 1}))
            << "refresh " << refresh << " step " << step;
        EXPECT_EQ(out, std::vector<float>(keys.size() * kDim, -1));  // untouched
      }
    }
  }
}

TEST(RowCacheTest, ReinsertingRefreshesTheRowAndItsAge) {
  RowCache cache(2, 10, 3);
  const std::vector<uint64_t> key = {4};
  cache.Insert(key, Rows(key, 2, 0), 0);
  cache.Insert(key, Rows(key, 2, 100), 2);
  std::vector<float> out(2);
  std::vector<uint32_t> missing;
  cache.Lookup(key, 4, absl::MakeSpan(out), &missing);
  EXPECT_TRUE(missing.empty());
  EXPECT_EQ(out, Rows(key, 2, 100));
  EXPECT_EQ(cache.size(), 1);
  EXPECT_EQ(cache.hits(), 1);
}

TEST(RowCacheTest, ClockKeepsServedRowsPastCapacity) {
  RowCache cache(1, 4, 1000);
  const std::vector<uint64_t> first = {1, 2, 3, 4};
  cache.Insert(first, Rows(first, 1, 0), 0);
  // Rows 1 and 3 are served; 2 and 4 are not.
  std::vector<float> out(2);
  std::vector<uint32_t> missing;
  cache.Lookup(std::vector<uint64_t>{1, 3}, 1, absl::MakeSpan(out), &missing);
  ASSERT_TRUE(missing.empty());
  const std::vector<uint64_t> more = {5, 6};
  cache.Insert(more, Rows(more, 1, 0), 1);
  EXPECT_EQ(cache.size(), 4);
  const std::vector<uint64_t> all = {1, 2, 3, 4, 5, 6};
  std::vector<float> rows(all.size(), -1);
  missing.clear();
  cache.Lookup(all, 2, absl::MakeSpan(rows), &missing);
  EXPECT_EQ(missing, (std::vector<uint32_t>{1, 3}));  // 2 and 4 made room
  EXPECT_EQ(rows, (std::vector<float>{10, -1, 30, -1, 50, 60}));
  EXPECT_EQ(cache.misses(), 2);
  // Many more inserts than slots keep the size at capacity.
  for (uint64_t k = 100; k < 200; ++k) {
    const std::vector<uint64_t> one = {k};
    cache.Insert(one, Rows(one, 1, 0), 3);
  }
  EXPECT_EQ(cache.size(), 4);
  std::vector<float> last(1);
  missing.clear();
  cache.Lookup(std::vector<uint64_t>{199}, 3, absl::MakeSpan(last), &missing);
  EXPECT_TRUE(missing.empty());
  EXPECT_EQ(last[0], 1990);
}

}  // namespace
}  // namespace brook::trainer
