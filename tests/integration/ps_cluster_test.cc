// Three real `brook ps` processes on 127.0.0.1 (ports picked at run time),
// driven by GrpcPsClient from four threads with overlapping keys. SGD with
// lr 1 and gradient -1 turns every row into a counter, so the final state is
// independent of interleaving and must equal a single-threaded reference
// ParameterServer fed the same pushes. Then SIGTERM: each exits 0, quickly.
// Children are killed by RAII if anything fails; every wait is bounded.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "absl/synchronization/notification.h"
#include "brook/v1/ps.grpc.pb.h"
#include "ps/client/grpc_ps_client.h"
#include "ps/parameter_server.h"
#include "tests/testing/http_get.h"
#include "tests/testing/process.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kShards = 3;
constexpr int kThreads = 4;
constexpr int kSteps = 40;
constexpr int kBatch = 256;
constexpr int kDim = 8;

// The keys and dense pushes of thread t, step s: deterministic, overlapping
// across threads (a shared hot range plus a per-thread tail), with repeats.
std::vector<uint64_t> BatchKeys(int thread, int step) {
  std::mt19937_64 rng(1000 * thread + step);
  std::vector<uint64_t> keys(kBatch);
  for (auto& k : keys) {
    k = (rng() % 3 == 0) ? 1'000'000 + thread * 10'000 + rng() % 500 : rng() % 200;
  }
  return keys;
}

class PsClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < kShards; ++i) {
      std::string error;
      auto ps = testing::StartBrookPs(i, kShards, {"--threads", "2"}, milliseconds(20000), &error);
      ASSERT_TRUE(ps.has_value()) << error;
      procs_.push_back(std::move(*ps));
    }
  }
  std::vector<testing::PsProcess> procs_;  // killed on destruction if still running
};

TEST_F(PsClusterTest, FourThreadsOfOverlappingPushesMatchASingleThreadedReference) {
  ps::GrpcPsClientOptions options;
  for (const auto& p : procs_) options.addresses.push_back(p.address);
  options.deadline = absl::Seconds(30);
  auto client_or = ps::GrpcPsClient::Create(options);
  ASSERT_TRUE(client_or.ok()) << client_or.status();
  ps::GrpcPsClient& client = **client_or;
  BROOK_ASSERT_OK(client.WaitForReady(absl::Seconds(20)));
  BROOK_ASSERT_OK(client.CreateTable(testing::CounterTable("emb", kDim)));
  std::vector<ps::DenseOptions> dense = {testing::CounterDense("w", {4, 4}),
                                         testing::CounterDense("b", {4})};
  BROOK_ASSERT_OK(client.CreateDense(dense));

  std::vector<absl::Status> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> rows(kBatch * kDim);
      const std::vector<float> grads(kBatch * kDim, -1.0f);
      for (int step = 0; step < kSteps && errors[t].ok(); ++step) {
        const std::vector<uint64_t> keys = BatchKeys(t, step);
        errors[t] = client.Pull("emb", keys, absl::MakeSpan(rows));
        if (!errors[t].ok()) break;
        // Counters never go down and are whole numbers.
        for (float v : rows) {
          if (v < 0 || v != static_cast<float>(static_cast<int64_t>(v))) {
            errors[t] = absl::InternalError("pulled a non-counter value");
          }
        }
        if (errors[t].ok()) errors[t] = client.Push("emb", keys, grads, step);
        if (errors[t].ok()) errors[t] = client.PushDense("w", std::vector<float>(16, -1.0f), step);
        if (errors[t].ok() && step % 2 == 0) {
          errors[t] = client.PushDense("b", std::vector<float>(4, -0.5f), step);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) BROOK_ASSERT_OK(errors[t]);

  // The reference: one ParameterServer, the same pushes, one thread,
  // duplicates summed as the client does.
  ps::ParameterServer reference{ps::ParameterServerOptions()};
  BROOK_ASSERT_OK(reference.CreateTable(testing::CounterTable("emb", kDim)));
  std::set<uint64_t> touched;
  for (int t = 0; t < kThreads; ++t) {
    for (int step = 0; step < kSteps; ++step) {
      std::map<uint64_t, float> counts;
      for (uint64_t k : BatchKeys(t, step)) counts[k] -= 1.0f;
      std::vector<uint64_t> keys;
      std::vector<float> grads;
      for (const auto& [k, g] : counts) {
        keys.push_back(k);
        grads.insert(grads.end(), kDim, g);
        touched.insert(k);
      }
      BROOK_ASSERT_OK(reference.Push("emb", keys, grads, ps::PushContext{}));
    }
  }
  std::vector<uint64_t> all(touched.begin(), touched.end());
  std::vector<float> got(all.size() * kDim), want(all.size() * kDim);
  BROOK_ASSERT_OK(client.Pull("emb", all, absl::MakeSpan(got)));
  BROOK_ASSERT_OK(reference.Pull("emb", all, absl::MakeSpan(want)));
  EXPECT_EQ(got, want);

  std::vector<float> w(16), b(4);
  BROOK_ASSERT_OK(client.PullDense("w", absl::MakeSpan(w)));
  BROOK_ASSERT_OK(client.PullDense("b", absl::MakeSpan(b)));
  EXPECT_EQ(w, std::vector<float>(16, kThreads * kSteps * 1.0f));
  EXPECT_EQ(b, std::vector<float>(4, kThreads * (kSteps / 2) * 0.5f));

  // Rows are spread over all shards, none lost or duplicated, and no push
  // was applied twice.
  auto stats = client.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  uint64_t rows = 0;
  for (const auto& s : *stats) {
    ASSERT_EQ(s.tables.size(), 1u);
    EXPECT_GT(s.tables[0].rows, 0u);
    rows += s.tables[0].rows;
  }
  EXPECT_EQ(rows, touched.size());

  // Each PS's /metrics page answers and counts the pushes.
  for (const auto& p : procs_) {
    std::string error;
    auto r = testing::HttpGet(p.metrics_address, "/metrics", 5000, &error);
    ASSERT_TRUE(r.has_value()) << error;
    EXPECT_NE(r->body.find("brook_ps_requests_total{code=\"OK\",method=\"Push\"}"),
              std::string::npos);
  }
}

TEST_F(PsClusterTest, SigtermDrainsAndExitsZeroWithinSeconds) {
  // A client that is connected to every shard (and stays so) must not hold
  // up the drain.
  ps::GrpcPsClientOptions options;
  for (const auto& p : procs_) options.addresses.push_back(p.address);
  options.deadline = absl::Seconds(2);
  auto client = ps::GrpcPsClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  BROOK_ASSERT_OK((*client)->CreateTable(testing::CounterTable("emb", 4)));
  const std::vector<uint64_t> keys = BatchKeys(0, 0);
  BROOK_ASSERT_OK((*client)->Push("emb", keys, std::vector<float>(keys.size() * 4, -1.0f), 0));
  for (auto& p : procs_) ASSERT_TRUE(p.process->Signal(SIGTERM));
  for (auto& p : procs_) {
    const auto start = std::chrono::steady_clock::now();
    std::optional<int> code = p.process->Wait(milliseconds(10000));
    ASSERT_TRUE(code.has_value()) << "brook ps " << p.address << " did not exit within 10 s";
    EXPECT_EQ(*code, 0);
    EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5));
  }
  // Stopped shards refuse service; the client reports it within its deadline.
  std::vector<float> rows(keys.size() * 4);
  const absl::Status st = (*client)->Pull("emb", keys, absl::MakeSpan(rows));
  EXPECT_TRUE(absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st)) << st;
}

TEST_F(PsClusterTest, SigintAlsoStopsCleanly) {
  ASSERT_TRUE(procs_[0].process->Signal(SIGINT));
  std::optional<int> code = procs_[0].process->Wait(milliseconds(10000));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
}

TEST(PsCommandTest, FlagsComeFromTheEnvironmentToo) {
  setenv("BROOK_PS_NUM_SHARDS", "2", 1);
  setenv("BROOK_PS_SHARD_INDEX", "1", 1);
  std::string error;
  auto child = testing::ChildProcess::Start(
      {testing::BrookBinary(), "ps", "--listen", "127.0.0.1:0", "--metrics-listen", ""}, &error);
  unsetenv("BROOK_PS_NUM_SHARDS");
  unsetenv("BROOK_PS_SHARD_INDEX");
  ASSERT_NE(child, nullptr) << error;
  auto line = child->WaitForLine("brook ps listening on ", milliseconds(20000));
  ASSERT_TRUE(line.has_value()) << child->stdout_text();
  std::string address, metrics;
  ASSERT_TRUE(testing::ParsePsListeningLine(*line, &address, &metrics)) << *line;
  EXPECT_EQ(metrics, "");
  // Through the callback API: a sync-API client leaves its socket unread
  // between calls (until gRPC's 5 s backup poller), so the server's graceful
  // GOAWAY ping would wait that long to be acknowledged.
  auto stub = v1::ParameterServer::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  v1::StatsResponse stats;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
  ctx.set_wait_for_ready(true);
  v1::StatsRequest req;
  absl::Notification done;
  grpc::Status status;
  stub->async()->Stats(&ctx, &req, &stats, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(stats.shard_index(), 1);
  EXPECT_EQ(stats.num_shards(), 2);
  const auto stop_start = std::chrono::steady_clock::now();
  ASSERT_TRUE(child->Signal(SIGTERM));
  auto code = child->Wait(milliseconds(10000));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
  // A connected client does not hold up the drain.
  EXPECT_LT(std::chrono::steady_clock::now() - stop_start, seconds(3));
}

TEST(PsCommandTest, BadShardIndexIsAUsageError) {
  auto r = testing::RunCommand({testing::BrookBinary(), "ps", "--listen", "127.0.0.1:0",
                                "--shard-index", "5", "--num-shards", "2"},
                               30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("shard index"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace brook
