// Behaviour every PsClient must share, run against LocalPsClient and
// GrpcPsClient (in-process channels and loopback TCP): results equal a
// single ParameterServer fed the same steps (dedup, gradient summing and
// reassembly are invisible), dense placement, size checks, concurrency.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "ps/client/grpc_ps_client.h"
#include "ps/client/local_ps_client.h"
#include "ps/rpc/ps_server.h"
#include "sharding/sharding.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/unit/ps/client/cluster_testing.h"

namespace brook::ps {
namespace {

using testing::CounterDense;
using testing::CounterTable;

constexpr int kShards = 3;

using testing_cluster::Cluster;
using testing_cluster::Kind;
using testing_cluster::MakeCluster;
using testing_cluster::ReferencePush;

class PsClientTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    cluster_ = MakeCluster(GetParam(), kShards);
    ASSERT_NE(cluster_, nullptr);
    client_ = cluster_->client.get();
  }
  std::unique_ptr<Cluster> cluster_;
  PsClient* client_ = nullptr;
  ParameterServer reference_{ParameterServerOptions()};
};

INSTANTIATE_TEST_SUITE_P(Clients, PsClientTest,
                         ::testing::Values(Kind::kLocal, Kind::kGrpcInProcess, Kind::kGrpcTcp),
                         testing_cluster::KindName);

TEST_P(PsClientTest, RandomStepsWithDuplicateKeysMatchASingleServer) {
  constexpr int kDim = 8;
  TableOptions t;
  t.name = "emb";
  t.dim = kDim;
  t.seed = 17;
  t.initializer.kind = InitializerKind::kUniform;
  t.optimizer.kind = OptimizerKind::kAdagrad;
  t.optimizer.learning_rate = 0.1f;
  BROOK_ASSERT_OK(client_->CreateTable(t));
  BROOK_ASSERT_OK(reference_.CreateTable(t));

  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> grad(-1, 1);
  std::set<uint64_t> touched;
  for (int step = 0; step < 15; ++step) {
    // Skewed keys: many repeats within a batch, across shards.
    std::vector<uint64_t> keys(300);
    for (auto& k : keys) {
      k = (rng() % 4 == 0) ? rng() : (rng() % 64) * (rng() % 64);
      touched.insert(k);
    }
    std::vector<float> got(keys.size() * kDim), want(keys.size() * kDim);
    BROOK_ASSERT_OK(client_->Pull("emb", keys, absl::MakeSpan(got)));
    BROOK_ASSERT_OK(reference_.Pull("emb", keys, absl::MakeSpan(want)));
    ASSERT_EQ(got, want) << "step " << step;
    std::vector<float> grads(keys.size() * kDim);
    for (auto& g : grads) g = grad(rng);
    BROOK_ASSERT_OK(client_->Push("emb", keys, grads, step));
    BROOK_ASSERT_OK(ReferencePush(reference_, "emb", keys, grads, kDim, step));
  }
  std::vector<uint64_t> all(touched.begin(), touched.end());
  std::vector<float> got(all.size() * kDim), want(all.size() * kDim);
  BROOK_ASSERT_OK(client_->Pull("emb", all, absl::MakeSpan(got)));
  BROOK_ASSERT_OK(reference_.Pull("emb", all, absl::MakeSpan(want)));
  EXPECT_EQ(got, want);

  // Every shard holds only its keys, and together they hold the reference's rows.
  uint64_t rows = 0;
  for (int s = 0; s < kShards; ++s) rows += cluster_->shard(s)->Stats().tables.at(0).rows;
  EXPECT_EQ(rows, reference_.Stats().tables.at(0).rows);
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->size(), static_cast<size_t>(kShards));
  uint64_t via_client = 0;
  for (const ServerStats& s : *stats) {
    via_client += s.tables.at(0).rows;
    EXPECT_EQ(s.tables.at(0).duplicate_pushes, 0u);
  }
  EXPECT_EQ(via_client, rows);
}

TEST_P(PsClientTest, ConcurrentCounterPushesFromFourThreadsAllLand) {
  constexpr int kDim = 2;
  BROOK_ASSERT_OK(client_->CreateTable(CounterTable("c", kDim)));
  constexpr int kThreads = 4, kSteps = 25;
  std::vector<std::thread> threads;
  std::vector<absl::Status> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int step = 0; step < kSteps && errors[t].ok(); ++step) {
        std::vector<uint64_t> keys(64);
        for (auto& k : keys) k = rng() % 50;  // overlapping across threads
        std::vector<float> rows(keys.size() * kDim);
        errors[t] = client_->Pull("c", keys, absl::MakeSpan(rows));
        if (errors[t].ok()) {
          errors[t] = client_->Push("c", keys, std::vector<float>(keys.size() * kDim, -1.0f), step);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& e : errors) BROOK_ASSERT_OK(e);
  std::vector<uint64_t> all(50);
  for (uint64_t k = 0; k < 50; ++k) all[k] = k;
  std::vector<float> rows(all.size() * kDim);
  BROOK_ASSERT_OK(client_->Pull("c", all, absl::MakeSpan(rows)));
  double total = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(rows[i * kDim], rows[i * kDim + 1]);
    total += rows[i * kDim];
  }
  EXPECT_EQ(total, kThreads * kSteps * 64.0);
}

TEST_P(PsClientTest, DenseVariablesArePlacedWholeAndRoundTrip) {
  std::vector<DenseOptions> vars = {CounterDense("w0", {4, 8}), CounterDense("b0", {8}),
                                    CounterDense("w1", {8, 1}), CounterDense("b1", {1})};
  BROOK_ASSERT_OK(client_->CreateDense(vars));
  BROOK_ASSERT_OK(client_->CreateDense(vars));  // idempotent
  std::vector<sharding::DenseVariable> dv;
  for (const auto& v : vars) dv.push_back({v.name, v.num_floats()});
  auto placement = sharding::PlaceDenseVariables(dv, kShards);
  ASSERT_TRUE(placement.ok());
  for (size_t i = 0; i < vars.size(); ++i) {
    for (int s = 0; s < kShards; ++s) {
      std::vector<float> out(vars[i].num_floats());
      const absl::Status st = cluster_->shard(s)->PullDense(vars[i].name, absl::MakeSpan(out));
      EXPECT_EQ(st.ok(), s == (*placement)[i]) << vars[i].name << " on shard " << s << ": " << st;
    }
  }
  std::vector<float> g(32);
  for (size_t i = 0; i < g.size(); ++i) g[i] = -static_cast<float>(i);
  BROOK_ASSERT_OK(client_->PushDense("w0", g, 1));
  BROOK_ASSERT_OK(client_->PushDense("w0", g, 2));
  std::vector<float> w(32);
  BROOK_ASSERT_OK(client_->PullDense("w0", absl::MakeSpan(w)));
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(w[i], 2.0f * i);

  BROOK_EXPECT_CODE(client_->PullDense("w0", absl::MakeSpan(w).subspan(1)),
                    absl::StatusCode::kInvalidArgument);
  BROOK_EXPECT_CODE(client_->PushDense("w0", std::vector<float>(31), 3),
                    absl::StatusCode::kInvalidArgument);
  BROOK_EXPECT_CODE(client_->PullDense("never", absl::MakeSpan(w)), absl::StatusCode::kNotFound);
  // Redeclaring with another size would move/resize: refused.
  BROOK_EXPECT_CODE(client_->CreateDense({CounterDense("b1", {2})}),
                    absl::StatusCode::kFailedPrecondition);
  BROOK_EXPECT_CODE(client_->CreateDense({CounterDense("x", {0})}),
                    absl::StatusCode::kInvalidArgument);
}

TEST_P(PsClientTest, SizeMismatchesAreInvalidArgumentAndSendNothing) {
  BROOK_ASSERT_OK(client_->CreateTable(CounterTable("emb", 4)));
  std::vector<uint64_t> keys = {1, 2, 3};
  std::vector<float> out(11);
  BROOK_EXPECT_CODE(client_->Pull("emb", keys, absl::MakeSpan(out)),
                    absl::StatusCode::kInvalidArgument);
  BROOK_EXPECT_CODE(client_->Push("emb", keys, std::vector<float>(13), 0),
                    absl::StatusCode::kInvalidArgument);
  BROOK_EXPECT_CODE(client_->Push("emb", {}, std::vector<float>(4), 0),
                    absl::StatusCode::kInvalidArgument);
  // The dim inferred from the buffer is checked by the PS against the table.
  std::vector<float> wrong_dim(keys.size() * 5);
  BROOK_EXPECT_CODE(client_->Pull("emb", keys, absl::MakeSpan(wrong_dim)),
                    absl::StatusCode::kInvalidArgument);
  BROOK_EXPECT_CODE(client_->Push("emb", keys, wrong_dim, 0), absl::StatusCode::kInvalidArgument);
  BROOK_EXPECT_OK(client_->Pull("emb", {}, {}));
  BROOK_EXPECT_OK(client_->Push("emb", {}, {}, 0));
  for (int s = 0; s < kShards; ++s) {
    EXPECT_EQ(cluster_->shard(s)->Stats().tables.at(0).rows_pushed, 0u);
  }
}

TEST_P(PsClientTest, TableLifecycleAcrossShards) {
  BROOK_ASSERT_OK(client_->CreateTable(CounterTable("emb", 4)));
  BROOK_ASSERT_OK(client_->CreateTable(CounterTable("emb", 4)));
  BROOK_EXPECT_CODE(client_->CreateTable(CounterTable("emb", 8)), absl::StatusCode::kAlreadyExists);
  BROOK_EXPECT_CODE(client_->CreateTable(CounterTable("bad", 0)),
                    absl::StatusCode::kInvalidArgument);
  for (int s = 0; s < kShards; ++s) EXPECT_EQ(cluster_->shard(s)->Stats().tables.size(), 1u);
  std::vector<float> out(4);
  BROOK_EXPECT_CODE(client_->Pull("missing", std::vector<uint64_t>{1}, absl::MakeSpan(out)),
                    absl::StatusCode::kNotFound);
  BROOK_ASSERT_OK(client_->DropTable("emb"));
  BROOK_EXPECT_CODE(client_->DropTable("emb"), absl::StatusCode::kNotFound);
  for (int s = 0; s < kShards; ++s) EXPECT_TRUE(cluster_->shard(s)->Stats().tables.empty());
}

// A follower's two reads: the change log since a cursor, and every row.
TEST_P(PsClientTest, FollowerReadsTheChangesAndScansEveryRow) {
  constexpr int kDim = 3;
  BROOK_ASSERT_OK(client_->CreateTable(CounterTable("job/emb", kDim)));
  BROOK_ASSERT_OK(client_->CreateDense({CounterDense("job/w", {2})}));
  absl::StatusOr<ChangeSet> start = client_->ChangesSince("job/", ChangeCursor{}, 100);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_TRUE(start->full_sync_needed);
  ASSERT_EQ(start->cursor.next.size(), size_t{kShards});

  std::vector<uint64_t> keys(10000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 7919 + 3;
  BROOK_ASSERT_OK(client_->Push("job/emb", keys, std::vector<float>(keys.size() * kDim, -1.0f), 1));
  BROOK_ASSERT_OK(client_->PushDense("job/w", std::vector<float>(2, -1.0f), 1));
  absl::StatusOr<ChangeSet> c = client_->ChangesSince("job/", start->cursor, 100000);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->full_sync_needed);
  std::vector<uint64_t> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(c->tables.size(), 1u);
  EXPECT_EQ(c->tables[0].first, "emb");
  EXPECT_EQ(c->tables[0].second, sorted);
  EXPECT_EQ(c->dense, std::vector<std::string>{"w"});

  std::map<uint64_t, std::vector<float>> rows;
  size_t chunks = 0;
  BROOK_ASSERT_OK(client_->ScanRows(
      "job/emb", [&](absl::Span<const uint64_t> k, absl::Span<const float> w) -> absl::Status {
        ++chunks;
        EXPECT_LE(k.size(), PsClient::kScanChunkRows);
        EXPECT_EQ(w.size(), k.size() * kDim);
        for (size_t i = 0; i < k.size(); ++i) {
          rows[k[i]] = std::vector<float>(w.begin() + i * kDim, w.begin() + (i + 1) * kDim);
        }
        return absl::OkStatus();
      }));
  EXPECT_GT(chunks, 1u);
  ASSERT_EQ(rows.size(), keys.size());
  for (uint64_t k : keys) EXPECT_EQ(rows[k], std::vector<float>(kDim, 1.0f)) << k;

  // The caller's error ends the scan (over gRPC: the stream is cancelled).
  int calls = 0;
  const absl::Status stopped = client_->ScanRows("job/emb", [&](auto, auto) {
    ++calls;
    return absl::AbortedError("enough");
  });
  EXPECT_EQ(stopped.code(), absl::StatusCode::kAborted) << stopped;
  EXPECT_EQ(calls, 1);
  BROOK_EXPECT_CODE(client_->ScanRows("missing", [](auto, auto) { return absl::OkStatus(); }),
                    absl::StatusCode::kNotFound);
  // The scan after a cancelled one works (the server let go of it).
  size_t rows_again = 0;
  BROOK_ASSERT_OK(client_->ScanRows("job/emb", [&](absl::Span<const uint64_t> k, auto) {
    rows_again += k.size();
    return absl::OkStatus();
  }));
  EXPECT_EQ(rows_again, keys.size());
}

TEST_P(PsClientTest, ClientIdIsRandomAndNonZero) {
  EXPECT_NE(client_->client_id(), 0u);
  EXPECT_EQ(client_->num_shards(), kShards);
}

}  // namespace
}  // namespace brook::ps
