#include "sharding/sharding.h"

#include <map>
#include <random>

#include <gtest/gtest.h>

namespace brook::sharding {
namespace {

TEST(JumpConsistentHash, MatchesPaperReferenceValues) {
  // One bucket always gets everything.
  for (uint64_t k = 0; k < 1000; ++k) EXPECT_EQ(JumpConsistentHash(k, 1), 0);
  // Independently computed with a direct transcription in Python of the
  // paper's C++ (see tests/unit/sharding/jump_hash_reference.py).
  EXPECT_EQ(JumpConsistentHash(0, 10), 0);
  EXPECT_EQ(JumpConsistentHash(1, 10), 6);
  EXPECT_EQ(JumpConsistentHash(0xDEADBEEF, 100), 87);
  EXPECT_EQ(JumpConsistentHash(0xFFFFFFFFFFFFFFFFull, 1000), 313);
}

TEST(JumpConsistentHash, MovesOnlyKeysToTheNewBucket) {
  std::mt19937_64 rng(1);
  int moved = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    uint64_t k = rng();
    int a = JumpConsistentHash(k, 7), b = JumpConsistentHash(k, 8);
    if (a != b) {
      ++moved;
      EXPECT_EQ(b, 7) << "a key may only move to the added bucket";
    }
  }
  EXPECT_NEAR(moved / double(n), 1.0 / 8, 0.01);
}

TEST(ShardForKey, BalancedAcrossShardsEvenForSequentialKeys) {
  std::map<int, int> counts;
  const uint64_t table = TableId("emb");
  for (uint64_t k = 0; k < 90000; ++k) ++counts[ShardForKey(table, k, 3)];
  ASSERT_EQ(counts.size(), 3u);
  for (auto [s, c] : counts) EXPECT_NEAR(c, 30000, 900) << "shard " << s;
}

TEST(ShardForKey, TablesSpreadTheSameKeysDifferently) {
  int same = 0;
  for (uint64_t k = 0; k < 10000; ++k)
    same += ShardForKey(TableId("a"), k, 4) == ShardForKey(TableId("b"), k, 4);
  EXPECT_NEAR(same / 10000.0, 0.25, 0.03);
}

TEST(PartitionKeys, GroupsPositionsByShardInInputOrder) {
  std::vector<uint64_t> keys = {5, 17, 5, 99, 1234567, 42};
  std::vector<std::vector<uint32_t>> by_shard;
  PartitionKeys(7, keys, 3, &by_shard);
  ASSERT_EQ(by_shard.size(), 3u);
  size_t total = 0;
  for (int s = 0; s < 3; ++s) {
    for (size_t j = 0; j < by_shard[s].size(); ++j) {
      EXPECT_EQ(ShardForKey(7, keys[by_shard[s][j]], 3), s);
      if (j) {
        EXPECT_LT(by_shard[s][j - 1], by_shard[s][j]);
      }
    }
    total += by_shard[s].size();
  }
  EXPECT_EQ(total, keys.size());
}

TEST(PlaceDenseVariables, LargestFirstOntoLeastLoaded) {
  std::vector<DenseVariable> vars = {{"small", 10}, {"big", 1000}, {"mid", 500}, {"mid2", 400}};
  auto p = PlaceDenseVariables(vars, 2);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)[1], 0);  // big -> shard 0
  EXPECT_EQ((*p)[2], 1);  // mid -> shard 1
  EXPECT_EQ((*p)[3], 1);  // mid2 -> shard 1 (500 < 1000)
  EXPECT_EQ((*p)[0], 1);  // small -> shard 1 (load 900 < 1000)
}

TEST(PlaceDenseVariables, RejectsDuplicatesAndBadShardCount) {
  EXPECT_EQ(PlaceDenseVariables(std::vector<DenseVariable>{{"a", 1}, {"a", 2}}, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceDenseVariables({}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlanWorkUnits, SplitsByRecordCountAndKeepsUnknownFilesWhole) {
  std::vector<DataFile> files = {{"a", 250}, {"b", 0}, {"c", 100}};
  auto units = PlanWorkUnits(files, 100);
  ASSERT_EQ(units.size(), 5u);
  EXPECT_EQ(units[0].path, "a");
  EXPECT_EQ(units[0].begin, 0u);
  EXPECT_EQ(units[0].end, 100u);
  EXPECT_EQ(units[2].begin, 200u);
  EXPECT_EQ(units[2].end, 250u);
  EXPECT_EQ(units[3].path, "b");
  EXPECT_EQ(units[3].end, 0u);
  EXPECT_EQ(units[4].path, "c");
  for (uint32_t i = 0; i < units.size(); ++i) EXPECT_EQ(units[i].id, i);
}

}  // namespace
}  // namespace brook::sharding
