// PullBatch / PushBatch through every PsClient (local, gRPC in process, gRPC
// over 127.0.0.1) on 3 shards: a batch gives exactly what the per-table calls
// give (duplicate keys within and across tables, a table twice, dense
// variables), the learning-rate scale equals a table configured with the
// scaled rate, and a bad part that reaches every shard changes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ps/client/ps_client.h"
#include "sharding/sharding.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/unit/ps/client/cluster_testing.h"

namespace brook::ps {
namespace {

using testing_cluster::Cluster;
using testing_cluster::Kind;
using testing_cluster::MakeCluster;

constexpr int kShards = 3;

TableOptions Table(const std::string& name, int dim, OptimizerKind kind, float lr) {
  TableOptions t;
  t.name = name;
  t.dim = dim;
  t.seed = 31;
  t.initializer.kind = InitializerKind::kUniform;
  t.optimizer.kind = kind;
  t.optimizer.learning_rate = lr;
  return t;
}

DenseOptions Dense(const std::string& name, std::vector<int64_t> shape, float lr) {
  DenseOptions d;
  d.name = name;
  d.shape = std::move(shape);
  d.initializer.kind = InitializerKind::kConstant;  // equal whatever the name
  d.initializer.value = 0.1f;
  d.optimizer.kind = OptimizerKind::kAdagrad;
  d.optimizer.learning_rate = lr;
  return d;
}

// Skewed keys: repeats within the list, spread over every shard.
std::vector<uint64_t> Keys(std::mt19937_64& rng, size_t n) {
  std::vector<uint64_t> keys(n);
  for (auto& k : keys) k = (rng() % 3 == 0) ? rng() % 100000 : (rng() % 12) * (rng() % 12);
  return keys;
}

std::vector<float> Grads(std::mt19937_64& rng, size_t n) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> g(n);
  for (auto& x : g) x = u(rng);
  return g;
}

class PsClientBatchTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    cluster_ = MakeCluster(GetParam(), kShards);
    ASSERT_NE(cluster_, nullptr);
    client_ = cluster_->client.get();
  }
  std::vector<float> Pull(const std::string& table, const std::vector<uint64_t>& keys, int dim) {
    std::vector<float> out(keys.size() * dim);
    const absl::Status s = client_->Pull(table, keys, absl::MakeSpan(out));
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }
  std::vector<float> PullDense(const std::string& name, size_t n) {
    std::vector<float> out(n);
    const absl::Status s = client_->PullDense(name, absl::MakeSpan(out));
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }
  std::unique_ptr<Cluster> cluster_;
  PsClient* client_ = nullptr;
};

INSTANTIATE_TEST_SUITE_P(Clients, PsClientBatchTest,
                         ::testing::Values(Kind::kLocal, Kind::kGrpcInProcess, Kind::kGrpcTcp),
                         testing_cluster::KindName);

TEST_P(PsClientBatchTest, PullBatchEqualsPullPerTableAndPullDense) {
  BROOK_ASSERT_OK(client_->CreateTable(Table("user", 8, OptimizerKind::kAdagrad, 0.1f)));
  BROOK_ASSERT_OK(client_->CreateTable(Table("item", 4, OptimizerKind::kSgd, 0.1f)));
  BROOK_ASSERT_OK(client_->CreateDense(
      {Dense("w0", {4, 8}, 0.1f), Dense("b0", {8}, 0.1f), Dense("w1", {8, 1}, 0.1f)}));
  std::mt19937_64 rng(5);
  // Train some rows first, so pulls see trained and initial rows.
  const std::vector<uint64_t> trained = Keys(rng, 200);
  BROOK_ASSERT_OK(client_->Push("user", trained, Grads(rng, trained.size() * 8), 1));
  BROOK_ASSERT_OK(client_->Push("item", trained, Grads(rng, trained.size() * 4), 1));
  BROOK_ASSERT_OK(client_->PushDense("w0", Grads(rng, 32), 1));

  const std::vector<uint64_t> user = Keys(rng, 300), item = Keys(rng, 150);
  std::vector<uint64_t> user_again(trained.begin(), trained.begin() + 40);
  user_again.push_back(user[0]);
  std::vector<float> u(user.size() * 8), i(item.size() * 4), u2(user_again.size() * 8);
  std::vector<float> w0(32), b0(8), w1(8);
  BROOK_ASSERT_OK(client_->PullBatch(
      {{"user", user, absl::MakeSpan(u)},
       {"item", item, absl::MakeSpan(i)},
       {"user", user_again, absl::MakeSpan(u2)},
       {"item", {}, {}}},
      {{"w0", absl::MakeSpan(w0)}, {"b0", absl::MakeSpan(b0)}, {"w1", absl::MakeSpan(w1)}}));
  EXPECT_EQ(u, Pull("user", user, 8));
  EXPECT_EQ(i, Pull("item", item, 4));
  EXPECT_EQ(u2, Pull("user", user_again, 8));
  EXPECT_EQ(w0, PullDense("w0", 32));
  EXPECT_EQ(b0, PullDense("b0", 8));
  EXPECT_EQ(w1, PullDense("w1", 8));
  EXPECT_NE(w0, std::vector<float>(32, 0.1f));  // the pushed variable came back trained
  BROOK_ASSERT_OK(client_->PullBatch({}, {}));
}

TEST_P(PsClientBatchTest, PushBatchEqualsPushesPerTableAndDense) {
  // Twins: "x1" trained by batches, "x2" by single calls; same options and
  // seed, so equal rows mean equal updates (their keys route differently).
  for (const char* suffix : {"1", "2"}) {
    BROOK_ASSERT_OK(
        client_->CreateTable(Table(std::string("u") + suffix, 8, OptimizerKind::kAdam, 0.01f)));
    BROOK_ASSERT_OK(
        client_->CreateTable(Table(std::string("i") + suffix, 4, OptimizerKind::kFtrl, 0.1f)));
  }
  BROOK_ASSERT_OK(client_->CreateDense({Dense("d1", {6}, 0.1f), Dense("d2", {6}, 0.1f)}));
  std::mt19937_64 rng(9);
  std::set<uint64_t> touched;
  for (int step = 1; step <= 6; ++step) {
    const std::vector<uint64_t> ku = Keys(rng, 120), ki = Keys(rng, 80), ki2 = Keys(rng, 30);
    touched.insert(ku.begin(), ku.end());
    touched.insert(ki.begin(), ki.end());
    touched.insert(ki2.begin(), ki2.end());
    const std::vector<float> gu = Grads(rng, ku.size() * 8), gi = Grads(rng, ki.size() * 4),
                             gi2 = Grads(rng, ki2.size() * 4), gd = Grads(rng, 6);
    // "i1" twice in one batch: two parts, applied one after the other.
    BROOK_ASSERT_OK(client_->PushBatch({{"u1", ku, gu}, {"i1", ki, gi}, {"i1", ki2, gi2}},
                                       {{"d1", gd}}, step, 1.0f));
    BROOK_ASSERT_OK(client_->Push("u2", ku, gu, step));
    BROOK_ASSERT_OK(client_->Push("i2", ki, gi, step));
    BROOK_ASSERT_OK(client_->Push("i2", ki2, gi2, step));
    BROOK_ASSERT_OK(client_->PushDense("d2", gd, step));
  }
  const std::vector<uint64_t> all(touched.begin(), touched.end());
  EXPECT_EQ(Pull("u1", all, 8), Pull("u2", all, 8));
  EXPECT_EQ(Pull("i1", all, 4), Pull("i2", all, 4));
  EXPECT_EQ(PullDense("d1", 6), PullDense("d2", 6));
  uint64_t pushed = 0;
  for (int s = 0; s < kShards; ++s) {
    for (const TableStats& t : cluster_->shard(s)->Stats().tables) {
      if (t.name == "u1") pushed += t.rows_pushed;
    }
  }
  EXPECT_GT(pushed, 0u);
}

// Two trainers training the same work unit's epoch (the second after the
// first was presumed dead) push its steps under one stream: a step is
// applied once, whoever pushes it first; without the stream it would count
// twice.
TEST_P(PsClientBatchTest, AStreamStepIsAppliedOnceWhicheverClientPushesIt) {
  BROOK_ASSERT_OK(client_->CreateTable(testing::CounterTable("a", 2)));
  BROOK_ASSERT_OK(client_->CreateTable(testing::CounterTable("b", 1)));
  BROOK_ASSERT_OK(client_->CreateDense({testing::CounterDense("d", {3})}));
  std::unique_ptr<PsClient> other = testing_cluster::SecondClient(GetParam(), *cluster_);
  ASSERT_NE(other, nullptr);
  BROOK_ASSERT_OK(other->CreateDense({testing::CounterDense("d", {3})}));
  ASSERT_NE(other->client_id(), client_->client_id());
  std::vector<uint64_t> keys(100);
  std::iota(keys.begin(), keys.end(), 1);  // every shard gets some
  const std::vector<float> ga(keys.size() * 2, -1.0f), gb(keys.size(), -1.0f), gd(3, -1.0f);
  auto push = [&](PsClient* c, uint64_t stream, uint64_t step) {
    return c->PushBatch({{"a", keys, ga}, {"b", keys, gb}}, {{"d", gd}}, 1, 1.0f,
                        PushStream{.id = stream, .step = step});
  };
  BROOK_ASSERT_OK(push(client_, 77, 0));
  BROOK_ASSERT_OK(push(other.get(), 77, 0));  // the next holder re-pushes step 0
  BROOK_ASSERT_OK(push(other.get(), 77, 1));
  BROOK_ASSERT_OK(push(client_, 77, 0));  // the old holder, late
  BROOK_ASSERT_OK(push(client_, 78, 0));  // another unit: its own stream
  EXPECT_EQ(Pull("a", keys, 2), std::vector<float>(keys.size() * 2, 3.0f));
  EXPECT_EQ(Pull("b", keys, 1), std::vector<float>(keys.size(), 3.0f));
  EXPECT_EQ(PullDense("d", 3), std::vector<float>(3, 3.0f));
  uint64_t duplicates = 0;
  for (int s = 0; s < kShards; ++s) {
    for (const TableStats& t : cluster_->shard(s)->Stats().tables) duplicates += t.duplicate_pushes;
  }
  EXPECT_EQ(duplicates, 2u * 2 * kShards);  // two repeats x two tables x every shard
  // Without a stream, the same push from the two clients counts twice.
  BROOK_ASSERT_OK(push(client_, 0, 0));
  BROOK_ASSERT_OK(push(other.get(), 0, 0));
  EXPECT_EQ(Pull("b", keys, 1), std::vector<float>(keys.size(), 5.0f));
  // A stream step that does not fit its sequence bits is refused, nothing sent.
  EXPECT_EQ(push(client_, 79, uint64_t{1} << 60).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Pull("b", keys, 1), std::vector<float>(keys.size(), 5.0f));
}

TEST_P(PsClientBatchTest, LearningRateScaleEqualsATableWithTheScaledRate) {
  const float lr = 0.05f, scale = 0.2f;
  BROOK_ASSERT_OK(client_->CreateTable(Table("scaled", 4, OptimizerKind::kAdagrad, lr)));
  BROOK_ASSERT_OK(client_->CreateTable(Table("twin", 4, OptimizerKind::kAdagrad, lr * scale)));
  BROOK_ASSERT_OK(client_->CreateTable(Table("plain", 4, OptimizerKind::kAdagrad, lr)));
  BROOK_ASSERT_OK(client_->CreateDense({Dense("ds", {5}, lr), Dense("dt", {5}, lr * scale)}));
  std::mt19937_64 rng(13);
  std::set<uint64_t> touched;
  for (int step = 1; step <= 5; ++step) {
    const std::vector<uint64_t> k = Keys(rng, 100);
    touched.insert(k.begin(), k.end());
    const std::vector<float> g = Grads(rng, k.size() * 4), gd = Grads(rng, 5);
    BROOK_ASSERT_OK(client_->PushBatch({{"scaled", k, g}}, {{"ds", gd}}, step, scale));
    BROOK_ASSERT_OK(client_->PushBatch({{"twin", k, g}, {"plain", k, g}}, {{"dt", gd}}, step, 1));
  }
  const std::vector<uint64_t> all(touched.begin(), touched.end());
  const std::vector<float> twin = Pull("twin", all, 4);
  EXPECT_EQ(Pull("scaled", all, 4), twin);
  EXPECT_NE(Pull("plain", all, 4), twin);
  EXPECT_EQ(PullDense("ds", 5), PullDense("dt", 5));
}

TEST_P(PsClientBatchTest, BadBatchesAreRefusedAndChangeNothing) {
  BROOK_ASSERT_OK(client_->CreateTable(Table("a", 4, OptimizerKind::kSgd, 1)));
  BROOK_ASSERT_OK(client_->CreateTable(Table("b", 2, OptimizerKind::kSgd, 1)));
  BROOK_ASSERT_OK(client_->CreateDense({Dense("w", {3}, 1)}));
  // 60 distinct keys: every part below reaches every one of the 3 shards.
  std::vector<uint64_t> keys(60);
  for (size_t k = 0; k < keys.size(); ++k) keys[k] = k * 7919;
  for (const char* table : {"a", "b", "zz"}) {
    std::set<int32_t> shards;
    for (uint64_t k : keys) {
      shards.insert(sharding::ShardForKey(sharding::TableId(table), k, kShards));
    }
    ASSERT_EQ(shards.size(), static_cast<size_t>(kShards)) << table;
  }
  const std::vector<float> ga(keys.size() * 4, 0.5f), gb(keys.size() * 2, 0.5f), gw(3, 0.5f);
  std::vector<float> nan_grads = gb;
  for (size_t k = 0; k < nan_grads.size(); k += 2) {
    nan_grads[k] = std::numeric_limits<float>::quiet_NaN();
  }
  auto state = [&] {
    std::vector<float> out = Pull("a", keys, 4);
    const std::vector<float> b = Pull("b", keys, 2), w = PullDense("w", 3);
    out.insert(out.end(), b.begin(), b.end());
    out.insert(out.end(), w.begin(), w.end());
    return out;
  };
  const std::vector<float> before = state();
  const std::vector<float> wrong_dim(keys.size() * 3, 0.5f);
  struct Case {
    const char* what;
    std::vector<TablePush> tables;
    std::vector<DensePush> dense;
    float scale;
    absl::StatusCode code;
  };
  const std::vector<Case> cases = {
      {"unknown table",
       {{"a", keys, ga}, {"zz", keys, gb}},
       {{"w", gw}},
       1,
       absl::StatusCode::kNotFound},
      {"wrong dim",
       {{"a", keys, ga}, {"b", keys, wrong_dim}},
       {{"w", gw}},
       1,
       absl::StatusCode::kInvalidArgument},
      {"NaN gradients",
       {{"a", keys, ga}, {"b", keys, nan_grads}},
       {{"w", gw}},
       1,
       absl::StatusCode::kInvalidArgument},
      {"buffer not keys x dim",
       {{"a", keys, ga}, {"b", keys, absl::MakeSpan(gb).subspan(1)}},
       {{"w", gw}},
       1,
       absl::StatusCode::kInvalidArgument},
      {"undeclared dense", {{"a", keys, ga}}, {{"v", gw}}, 1, absl::StatusCode::kNotFound},
      {"dense size",
       {{"a", keys, ga}},
       {{"w", absl::MakeSpan(gw).subspan(1)}},
       1,
       absl::StatusCode::kInvalidArgument},
      {"zero scale", {{"a", keys, ga}}, {{"w", gw}}, 0, absl::StatusCode::kInvalidArgument},
      {"NaN scale",
       {{"a", keys, ga}},
       {{"w", gw}},
       std::numeric_limits<float>::quiet_NaN(),
       absl::StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    const absl::Status s = client_->PushBatch(c.tables, c.dense, 1, c.scale);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s;
    EXPECT_EQ(state(), before) << c.what;
  }
  std::vector<float> rows(keys.size() * 4);
  const absl::Status missing = client_->PullBatch(
      {{"a", keys, absl::MakeSpan(rows)}, {"zz", keys, absl::MakeSpan(rows)}}, {});
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_NE(missing.message().find("zz"), absl::string_view::npos) << missing;
  // And a good batch then applies.
  BROOK_ASSERT_OK(client_->PushBatch({{"a", keys, ga}, {"b", keys, gb}}, {{"w", gw}}, 1, 1));
  EXPECT_NE(state(), before);
}

}  // namespace
}  // namespace brook::ps
