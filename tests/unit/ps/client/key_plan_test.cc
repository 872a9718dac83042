#include "ps/client/key_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "sharding/sharding.h"

namespace brook::ps {
namespace {

TEST(KeyPlanTest, DedupsKeysAndRoutesEachToItsShardInFirstOccurrenceOrder) {
  const uint64_t table_id = sharding::TableId("emb");
  const std::vector<uint64_t> keys = {5, 3, 5, 7, 3, 11, 5, 13, 17, 19};
  KeyPlan plan(table_id, keys, 3);
  EXPECT_EQ(plan.num_keys(), keys.size());
  EXPECT_EQ(plan.num_unique(), 7u);
  std::vector<uint64_t> first_order = {5, 3, 7, 11, 13, 17, 19};
  std::set<uint64_t> seen;
  for (int32_t s = 0; s < 3; ++s) {
    size_t last_pos = 0;
    for (uint64_t k : plan.shard_keys(s)) {
      EXPECT_EQ(sharding::ShardForKey(table_id, k, 3), s) << k;
      EXPECT_TRUE(seen.insert(k).second) << "key sent twice: " << k;
      size_t pos = std::find(first_order.begin(), first_order.end(), k) - first_order.begin();
      EXPECT_GE(pos, last_pos);
      last_pos = pos;
    }
  }
  EXPECT_EQ(seen.size(), 7u);
}

TEST(KeyPlanTest, ExpandRowsPutsEveryKeysRowBackInCallerOrder) {
  std::mt19937_64 rng(1);
  std::vector<uint64_t> keys(500);
  for (auto& k : keys) k = rng() % 100;  // many duplicates
  const size_t dim = 3;
  KeyPlan plan(42, keys, 4);
  // Shard replies where row d of key k is k * 10 + d.
  std::vector<std::vector<float>> replies(4);
  std::vector<absl::Span<const float>> views(4);
  for (int32_t s = 0; s < 4; ++s) {
    for (uint64_t k : plan.shard_keys(s)) {
      for (size_t d = 0; d < dim; ++d) replies[s].push_back(static_cast<float>(k * 10 + d));
    }
    views[s] = replies[s];
  }
  std::vector<float> out(keys.size() * dim, -1);
  plan.ExpandRows(views, dim, absl::MakeSpan(out));
  for (size_t i = 0; i < keys.size(); ++i) {
    for (size_t d = 0; d < dim; ++d) {
      ASSERT_EQ(out[i * dim + d], static_cast<float>(keys[i] * 10 + d)) << i;
    }
  }
}

TEST(KeyPlanTest, SumGradientsAddsDuplicatesInInputOrder) {
  const std::vector<uint64_t> keys = {1, 2, 1, 3, 1, 2};
  const size_t dim = 2;
  std::vector<float> grads;
  for (size_t i = 0; i < keys.size(); ++i) {
    grads.push_back(static_cast<float>(i + 1));
    grads.push_back(static_cast<float>(100 * (i + 1)));
  }
  KeyPlan plan(7, keys, 2);
  std::vector<std::vector<float>> sums(2);
  std::vector<absl::Span<float>> views(2);
  for (int32_t s = 0; s < 2; ++s) {
    sums[s].assign(plan.shard_keys(s).size() * dim, 12345.0f);  // overwritten
    views[s] = absl::MakeSpan(sums[s]);
  }
  plan.SumGradients(grads, dim, views);
  std::map<uint64_t, std::pair<float, float>> got;
  for (int32_t s = 0; s < 2; ++s) {
    for (size_t j = 0; j < plan.shard_keys(s).size(); ++j) {
      got[plan.shard_keys(s)[j]] = {sums[s][j * dim], sums[s][j * dim + 1]};
    }
  }
  EXPECT_EQ(got[1], std::make_pair(1.0f + 3 + 5, 100.0f + 300 + 500));
  EXPECT_EQ(got[2], std::make_pair(2.0f + 6, 200.0f + 600));
  EXPECT_EQ(got[3], std::make_pair(4.0f, 400.0f));
}

TEST(KeyPlanTest, EmptyKeysGiveEmptyShards) {
  KeyPlan plan(1, {}, 3);
  EXPECT_EQ(plan.num_unique(), 0u);
  for (int32_t s = 0; s < 3; ++s) EXPECT_TRUE(plan.shard_keys(s).empty());
}

TEST(KeyPlanTest, OneShardGetsEverything) {
  const std::vector<uint64_t> keys = {9, 8, 9};
  KeyPlan plan(1, keys, 1);
  EXPECT_EQ(std::vector<uint64_t>(plan.shard_keys(0).begin(), plan.shard_keys(0).end()),
            (std::vector<uint64_t>{9, 8}));
}

TEST(KeyPlanTest, FirstInputsLetRowsGoStraightToTheCallersOrder) {
  // Keys that share the dedup table's slots (multiples of a power of two,
  // repeated) as well as random ones; 3 shards.
  std::mt19937_64 rng(3);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 3000; ++i) keys.push_back((rng() % 700) << 20);
  for (int i = 0; i < 3000; ++i) keys.push_back(rng() % 2000);
  const size_t dim = 2;
  KeyPlan plan(9, keys, 3);
  std::set<uint64_t> distinct(keys.begin(), keys.end());
  EXPECT_EQ(plan.num_unique(), distinct.size());
  // What the gRPC client does: each shard's reply row to its key's first
  // position, then the repeats.
  std::vector<float> out(keys.size() * dim, -1);
  for (int32_t s = 0; s < 3; ++s) {
    const auto first = plan.shard_first_inputs(s);
    ASSERT_EQ(first.size(), plan.shard_keys(s).size());
    for (size_t j = 0; j < first.size(); ++j) {
      const uint64_t k = plan.shard_keys(s)[j];
      ASSERT_EQ(keys[first[j]], k);
      ASSERT_EQ(std::find(keys.begin(), keys.end(), k) - keys.begin(), first[j]) << k;
      out[first[j] * dim] = static_cast<float>(k);
      out[first[j] * dim + 1] = static_cast<float>(s);
    }
  }
  plan.CopyDuplicateRows(dim, absl::MakeSpan(out));
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(out[i * dim], static_cast<float>(keys[i])) << i;
    ASSERT_EQ(out[i * dim + 1], static_cast<float>(sharding::ShardForKey(9, keys[i], 3))) << i;
  }
}

TEST(KeyPlanTest, SumGradientsWithoutDuplicatesCopiesEveryRowToItsShard) {
  const std::vector<uint64_t> keys = {40, 10, 30, 20};
  KeyPlan plan(5, keys, 2);
  ASSERT_EQ(plan.num_unique(), keys.size());
  const std::vector<float> grads = {4, -4, 1, -1, 3, -3, 2, -2};
  std::vector<std::vector<float>> sums(2);
  std::vector<absl::Span<float>> views(2);
  for (int32_t s = 0; s < 2; ++s) {
    sums[s].assign(plan.shard_keys(s).size() * 2, 12345.0f);  // overwritten
    views[s] = absl::MakeSpan(sums[s]);
  }
  plan.SumGradients(grads, 2, views);
  for (int32_t s = 0; s < 2; ++s) {
    for (size_t j = 0; j < plan.shard_keys(s).size(); ++j) {
      const float g = static_cast<float>(plan.shard_keys(s)[j] / 10);
      EXPECT_EQ(sums[s][j * 2], g);
      EXPECT_EQ(sums[s][j * 2 + 1], -g);
    }
  }
}

}  // namespace
}  // namespace brook::ps
