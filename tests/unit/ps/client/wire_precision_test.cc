// TableOptions::wire through every PsClient (local, gRPC in process, gRPC
// over 127.0.0.1) on 3 shards: a bf16 table's pulls are its fp32 twin's rows
// rounded to bf16 and its pushes apply bf16-rounded gradients; an fp16
// table's tiny gradients survive thanks to the scale; PullBatch / PushBatch
// over tables of mixed precision equal the per-table calls; the payload
// bytes counted halve; and re-declaring a table with another precision is
// the same table.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ps/client/ps_client.h"
#include "ps/wire/precision.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/unit/ps/client/cluster_testing.h"

namespace brook::ps {
namespace {

using testing_cluster::Cluster;
using testing_cluster::Kind;
using testing_cluster::MakeCluster;

constexpr int kWireShards = 3;
constexpr int kWireDim = 8;

TableOptions WireTable(const std::string& name, WirePrecision wire) {
  TableOptions t;
  t.name = name;
  t.dim = kWireDim;
  t.seed = 17;  // the same for every table: equal initial rows
  t.initializer.kind = InitializerKind::kUniform;
  t.initializer.low = -0.3f;
  t.initializer.high = 0.3f;
  t.optimizer.kind = OptimizerKind::kSgd;
  t.optimizer.learning_rate = 1.0f;
  t.wire = wire;
  return t;
}

std::vector<uint64_t> WireKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys(n);
  for (auto& k : keys) k = rng() % 5000;  // repeats included
  return keys;
}

std::vector<float> RoundedToBf16(std::vector<float> v) {
  for (float& x : v) x = wire::Bf16ToFloat(wire::FloatToBf16(x));
  return v;
}

class WirePrecisionTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    cluster_ = MakeCluster(GetParam(), kWireShards);
    ASSERT_NE(cluster_, nullptr);
    client_ = cluster_->client.get();
  }
  std::vector<float> Pull(const std::string& table, const std::vector<uint64_t>& keys) {
    std::vector<float> out(keys.size() * kWireDim);
    const absl::Status s = client_->Pull(table, keys, absl::MakeSpan(out));
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }
  std::unique_ptr<Cluster> cluster_;
  PsClient* client_ = nullptr;
};

INSTANTIATE_TEST_SUITE_P(Clients, WirePrecisionTest,
                         ::testing::Values(Kind::kLocal, Kind::kGrpcInProcess, Kind::kGrpcTcp),
                         testing_cluster::KindName);

TEST_P(WirePrecisionTest, Bf16PullsAndPushesRoundEachValue) {
  BROOK_ASSERT_OK(client_->CreateTable(WireTable("full", WirePrecision::kFp32)));
  BROOK_ASSERT_OK(client_->CreateTable(WireTable("half", WirePrecision::kBf16)));
  EXPECT_EQ(client_->WireOf("half"), WirePrecision::kBf16);
  EXPECT_EQ(client_->WireOf("full"), WirePrecision::kFp32);
  const std::vector<uint64_t> keys = WireKeys(700, 1);
  const std::vector<float> full = Pull("full", keys);
  EXPECT_EQ(Pull("half", keys), RoundedToBf16(full));

  // Gradients of distinct keys (duplicates would be summed before rounding).
  std::vector<uint64_t> unique;
  for (uint64_t k = 0; k < 300; ++k) unique.push_back(k * 7 + 1);
  std::vector<float> grads(unique.size() * kWireDim);
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<float> u(-0.01f, 0.01f);
  for (float& g : grads) g = u(rng);
  const std::vector<float> w0 = Pull("full", unique);
  BROOK_ASSERT_OK(client_->Push("half", unique, grads, 1));
  // The PS applies the bf16 gradient to its fp32 weight; the pull rounds that.
  std::vector<float> want(w0.size());
  const std::vector<float> sent = RoundedToBf16(grads);
  for (size_t i = 0; i < want.size(); ++i) want[i] = w0[i] - sent[i];
  EXPECT_EQ(Pull("half", unique), RoundedToBf16(want));
  // The weights on the PS stay fp32: fp32 reads of them see more than bf16 holds.
  BROOK_ASSERT_OK(client_->CreateTable(WireTable("half", WirePrecision::kFp32)));
  EXPECT_EQ(client_->WireOf("half"), WirePrecision::kFp32);
  EXPECT_EQ(Pull("half", unique), want);
}

TEST_P(WirePrecisionTest, Fp16ScaleKeepsTinyGradients) {
  TableOptions t = testing::CounterTable("tiny", kWireDim);  // zero rows, SGD lr 1
  t.wire = WirePrecision::kFp16;
  BROOK_ASSERT_OK(client_->CreateTable(t));
  std::vector<uint64_t> keys = {3, 30, 300, 3000};
  std::vector<float> grads(keys.size() * kWireDim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 1e-9f * static_cast<float>(i + 1);
  BROOK_ASSERT_OK(client_->Push("tiny", keys, grads, 1));
  const std::vector<float> rows = Pull("tiny", keys);
  for (size_t i = 0; i < grads.size(); ++i) {
    // Plain fp16 would flush 1e-9 to 0 both ways.
    EXPECT_NEAR(rows[i], -grads[i], grads[i] * 2e-3) << i;
  }
}

TEST_P(WirePrecisionTest, BatchesOfMixedPrecisionEqualPerTableCalls) {
  BROOK_ASSERT_OK(client_->CreateTable(WireTable("a", WirePrecision::kBf16)));
  BROOK_ASSERT_OK(client_->CreateTable(WireTable("b", WirePrecision::kFp32)));
  BROOK_ASSERT_OK(client_->CreateTable(WireTable("c", WirePrecision::kFp16)));
  // Twins trained by single calls.
  BROOK_ASSERT_OK(client_->CreateTable(WireTable("a2", WirePrecision::kBf16)));
  BROOK_ASSERT_OK(client_->CreateTable(WireTable("b2", WirePrecision::kFp32)));
  BROOK_ASSERT_OK(client_->CreateTable(WireTable("c2", WirePrecision::kFp16)));
  const std::vector<uint64_t> keys = WireKeys(400, 4);
  std::vector<float> grads(keys.size() * kWireDim);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  for (float& g : grads) g = u(rng);
  BROOK_ASSERT_OK(client_->PushBatch({{"a", keys, grads}, {"b", keys, grads}, {"c", keys, grads}},
                                     {}, 1, 1.0f));
  for (const char* twin : {"a2", "b2", "c2"}) {
    BROOK_ASSERT_OK(client_->Push(twin, keys, grads, 1));
  }
  std::vector<float> a(keys.size() * kWireDim), b(a.size()), c(a.size());
  BROOK_ASSERT_OK(client_->PullBatch({{"a", keys, absl::MakeSpan(a)},
                                      {"b", keys, absl::MakeSpan(b)},
                                      {"c", keys, absl::MakeSpan(c)}},
                                     {}));
  const std::vector<float> b2 = Pull("b2", keys);
  EXPECT_EQ(a, Pull("a2", keys));
  EXPECT_EQ(b, b2);
  EXPECT_EQ(c, Pull("c2", keys));
  EXPECT_NE(a, b);  // rounded
  // fp16 rows are within fp16's precision of the fp32 ones.
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], b2[i], 1e-3f) << i;
}

TEST_P(WirePrecisionTest, PayloadBytesHalve) {
  BROOK_ASSERT_OK(client_->CreateTable(WireTable("full", WirePrecision::kFp32)));
  BROOK_ASSERT_OK(client_->CreateTable(WireTable("half", WirePrecision::kBf16)));
  std::vector<uint64_t> keys(1000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i % 500;  // 500 unique
  const std::vector<float> grads(keys.size() * kWireDim, 0.01f);
  const uint64_t unique = 500, key_bytes = unique * 8;
  PsTraffic t0 = client_->Traffic();
  Pull("full", keys);
  BROOK_ASSERT_OK(client_->Push("full", keys, grads, 1));
  PsTraffic t1 = client_->Traffic();
  EXPECT_EQ(t1.pull_bytes - t0.pull_bytes, key_bytes + unique * kWireDim * 4);
  EXPECT_EQ(t1.push_bytes - t0.push_bytes, key_bytes + unique * kWireDim * 4);
  Pull("half", keys);
  BROOK_ASSERT_OK(client_->Push("half", keys, grads, 1));
  PsTraffic t2 = client_->Traffic();
  EXPECT_EQ(t2.pull_bytes - t1.pull_bytes, key_bytes + unique * kWireDim * 2);
  EXPECT_EQ(t2.push_bytes - t1.push_bytes, key_bytes + unique * kWireDim * 2);
}

}  // namespace
}  // namespace brook::ps
