// GrpcPsClient against fault-injecting servers: retries keep the sequence so
// the PS dedups (exactly-once effect), backoff stays inside the deadline,
// non-retryable codes return at once, large calls are split, and a wrong
// address order is caught by the shard route check.
#include "ps/client/grpc_ps_client.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "brook/v1/ps.grpc.pb.h"
#include "common/rpc/status_mapping.h"
#include "ps/rpc/ps_handlers.h"
#include "ps/rpc/ps_server.h"
#include "ps/rpc/ps_service.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/test_util.h"
#include "tests/testing/tmpfs.h"

namespace brook::ps {
namespace {

using testing::CounterTable;

// Runs the production handlers, then lies about the outcome.
class FlakyService final : public v1::ParameterServer::CallbackService {
 public:
  enum class Mode {
    kLoseFirstPushReply,  // apply the push, answer UNAVAILABLE the first time
    kTimeOutFirstPush,    // apply, then stall past the attempt deadline once
    kFailFirstPull,       // UNAVAILABLE without serving, once per request
    kAlwaysUnavailable,   // every call
    kSlowPulls,           // every pull served after 800 ms (a silent PS)
  };
  FlakyService(ParameterServer* ps, Mode mode) : handlers_(ps), mode_(mode) {}

  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx, const v1::PullRequest* req,
                                 v1::PullResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    const int n = ++pull_attempts_;
    if (mode_ == Mode::kSlowPulls) std::this_thread::sleep_for(std::chrono::milliseconds(800));
    if (mode_ == Mode::kAlwaysUnavailable || (mode_ == Mode::kFailFirstPull && n == 1)) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "injected"));
    } else {
      reactor->Finish(brook::rpc::ToGrpcStatus(handlers_.Pull(*req, resp)));
    }
    return reactor;
  }

  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx, const v1::PushRequest* req,
                                 v1::PushResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (mode_ == Mode::kAlwaysUnavailable) {
      ++push_attempts_;
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "injected"));
      return reactor;
    }
    absl::Status st = handlers_.Push(*req, resp);
    int attempt;
    {
      std::lock_guard<std::mutex> lock(mu_);
      attempt = ++attempts_by_id_[{req->client_id(), req->sequence()}];
      if (resp->duplicate()) ++duplicates_;
    }
    ++push_attempts_;
    if (st.ok() && attempt == 1 && mode_ == Mode::kLoseFirstPushReply) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "reply lost"));
    } else if (st.ok() && attempt == 1 && mode_ == Mode::kTimeOutFirstPush) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      reactor->Finish(brook::rpc::ToGrpcStatus(st));
    } else {
      reactor->Finish(brook::rpc::ToGrpcStatus(st));
    }
    return reactor;
  }

  // Served as is, for the batch tests.
  grpc::ServerUnaryReactor* CreateDense(grpc::CallbackServerContext* ctx,
                                        const v1::CreateDenseRequest* req,
                                        v1::CreateDenseResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(brook::rpc::ToGrpcStatus(handlers_.CreateDense(*req, resp)));
    return reactor;
  }
  grpc::ServerUnaryReactor* PullBatch(grpc::CallbackServerContext* ctx,
                                      const v1::PullBatchRequest* req,
                                      v1::PullBatchResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(brook::rpc::ToGrpcStatus(handlers_.PullBatch(*req, resp)));
    return reactor;
  }

  // Batches: the attempt count is kept under the first part's sequence.
  grpc::ServerUnaryReactor* PushBatch(grpc::CallbackServerContext* ctx,
                                      const v1::PushBatchRequest* req,
                                      v1::PushBatchResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    absl::Status st = handlers_.PushBatch(*req, resp);
    const uint64_t first =
        req->tables_size() > 0 ? req->tables(0).sequence() : req->dense(0).sequence();
    int attempt;
    {
      std::lock_guard<std::mutex> lock(mu_);
      attempt = ++attempts_by_id_[{req->client_id(), first}];
      for (bool d : resp->table_duplicate()) duplicates_ += d ? 1 : 0;
      for (bool d : resp->dense_duplicate()) duplicates_ += d ? 1 : 0;
    }
    ++push_attempts_;
    if (st.ok() && attempt == 1 && mode_ == Mode::kLoseFirstPushReply) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "reply lost"));
    } else {
      reactor->Finish(brook::rpc::ToGrpcStatus(st));
    }
    return reactor;
  }

  std::map<std::pair<uint64_t, uint64_t>, int> attempts_by_id() {
    std::lock_guard<std::mutex> lock(mu_);
    return attempts_by_id_;
  }
  int duplicates() {
    std::lock_guard<std::mutex> lock(mu_);
    return duplicates_;
  }
  int push_attempts() const { return push_attempts_; }
  int pull_attempts() const { return pull_attempts_; }

 private:
  rpc::PsHandlers handlers_;
  const Mode mode_;
  std::atomic<int> push_attempts_{0};
  std::atomic<int> pull_attempts_{0};
  std::mutex mu_;
  std::map<std::pair<uint64_t, uint64_t>, int> attempts_by_id_;
  int duplicates_ = 0;
};

// One flaky shard on loopback TCP.
struct FlakyShard {
  FlakyShard(FlakyService::Mode mode) : ps(ParameterServerOptions{}), service(&ps, mode) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&service);
    server = b.BuildAndStart();
  }
  ~FlakyShard() { server->Shutdown(std::chrono::system_clock::now()); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }

  ParameterServer ps;
  FlakyService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

std::unique_ptr<GrpcPsClient> Client(std::vector<std::string> addresses,
                                     absl::Duration deadline = absl::Seconds(10),
                                     absl::Duration attempt = absl::Seconds(5)) {
  GrpcPsClientOptions o;
  o.addresses = std::move(addresses);
  o.deadline = deadline;
  o.attempt_timeout = attempt;
  o.initial_backoff = absl::Milliseconds(5);
  o.max_backoff = absl::Milliseconds(50);
  auto c = GrpcPsClient::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(GrpcPsClientTest, LostPushReplyIsRetriedWithTheSameSequenceAndAppliedOnce) {
  FlakyShard shard(FlakyService::Mode::kLoseFirstPushReply);
  ASSERT_NE(shard.server, nullptr);
  BROOK_ASSERT_OK(shard.ps.CreateTable(CounterTable("emb", 2)));
  auto client = Client({shard.address()});
  for (int step = 0; step < 5; ++step) {
    BROOK_ASSERT_OK(
        client->Push("emb", std::vector<uint64_t>{1, 2, 1}, std::vector<float>(6, -1.0f), step));
  }
  std::vector<float> rows(4);
  BROOK_ASSERT_OK(client->Pull("emb", std::vector<uint64_t>{1, 2}, absl::MakeSpan(rows)));
  EXPECT_EQ(rows, (std::vector<float>{10, 10, 5, 5}));  // key 1 twice per step, summed
  // Each push went out twice with one (client, sequence); the retry was a duplicate.
  auto attempts = shard.service.attempts_by_id();
  EXPECT_EQ(attempts.size(), 5u);
  for (const auto& [id, n] : attempts) {
    EXPECT_EQ(id.first, client->client_id());
    EXPECT_EQ(n, 2);
  }
  EXPECT_EQ(shard.service.duplicates(), 5);
  EXPECT_EQ(client->retries(), 5u);
  EXPECT_EQ(shard.ps.Stats().tables[0].duplicate_pushes, 5u);
}

TEST(GrpcPsClientTest, LostPushBatchReplyIsRetriedWithTheSameSequencesAndAppliedOnce) {
  FlakyShard shard(FlakyService::Mode::kLoseFirstPushReply);
  ASSERT_NE(shard.server, nullptr);
  BROOK_ASSERT_OK(shard.ps.CreateTable(CounterTable("a", 2)));
  BROOK_ASSERT_OK(shard.ps.CreateTable(CounterTable("b", 1)));
  auto client = Client({shard.address()});
  BROOK_ASSERT_OK(client->CreateDense({testing::CounterDense("w", {2})}));
  const std::vector<uint64_t> ka = {1, 2, 1}, kb = {3};
  const std::vector<float> ga(6, -1.0f), gb(1, -1.0f), gw(2, -1.0f);
  // Only the pushes' retries are counted: on a loaded machine the set-up
  // call above may need one of its own.
  const uint64_t retries_before = client->retries();
  for (int step = 0; step < 4; ++step) {
    BROOK_ASSERT_OK(client->PushBatch({{"a", ka, ga}, {"b", kb, gb}}, {{"w", gw}}, step, 1.0f));
  }
  const uint64_t push_retries = client->retries() - retries_before;
  std::vector<float> a(4), b(1), w(2);
  BROOK_ASSERT_OK(client->PullBatch(
      {{"a", std::vector<uint64_t>{1, 2}, absl::MakeSpan(a)}, {"b", kb, absl::MakeSpan(b)}},
      {{"w", absl::MakeSpan(w)}}));
  EXPECT_EQ(a, (std::vector<float>{8, 8, 4, 4}));  // key 1 twice per step, summed
  EXPECT_EQ(b, std::vector<float>{4});
  EXPECT_EQ(w, (std::vector<float>{4, 4}));
  // Each batch went out twice with the same sequences; the retry's three
  // parts were all duplicates.
  auto attempts = shard.service.attempts_by_id();
  EXPECT_EQ(attempts.size(), 4u);
  for (const auto& [id, n] : attempts) EXPECT_EQ(n, 2);
  EXPECT_EQ(shard.service.duplicates(), 4 * 3);
  EXPECT_EQ(push_retries, 4u);
  EXPECT_EQ(shard.ps.Stats().tables[0].duplicate_pushes, 4u);
}

TEST(GrpcPsClientTest, PushThatTimesOutAfterApplyingIsNotAppliedTwice) {
  FlakyShard shard(FlakyService::Mode::kTimeOutFirstPush);
  ASSERT_NE(shard.server, nullptr);
  BROOK_ASSERT_OK(shard.ps.CreateTable(CounterTable("emb", 1)));
  auto client = Client({shard.address()}, absl::Seconds(10), absl::Milliseconds(100));
  BROOK_ASSERT_OK(client->Push("emb", std::vector<uint64_t>{7}, std::vector<float>{-1}, 0));
  std::vector<float> row(1);
  BROOK_ASSERT_OK(client->Pull("emb", std::vector<uint64_t>{7}, absl::MakeSpan(row)));
  EXPECT_EQ(row[0], 1.0f);
  EXPECT_GE(client->retries(), 1u);
  for (const auto& [id, n] : shard.service.attempts_by_id()) EXPECT_GE(n, 2);
}

// A partitioned PS refuses nothing: a call without a reply past
// silent_notice is reported as a fault while it waits (the trainer's job
// event), and the report ends with the reply.
TEST(GrpcPsClientTest, ACallWithoutAReplyPastTheNoticeIsReportedWhileItWaits) {
  FlakyShard shard(FlakyService::Mode::kSlowPulls);
  ASSERT_NE(shard.server, nullptr);
  BROOK_ASSERT_OK(shard.ps.CreateTable(CounterTable("emb", 1)));
  GrpcPsClientOptions o;
  o.addresses = {shard.address()};
  o.silent_notice = absl::Milliseconds(150);
  auto client = GrpcPsClient::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_FALSE((*client)->retrying().has_value());
  absl::Status pulled;
  std::thread puller([&] {
    std::vector<float> row(1);
    pulled = (*client)->Pull("emb", std::vector<uint64_t>{7}, absl::MakeSpan(row));
  });
  std::optional<PsRetryEpisode> seen;
  for (int i = 0; i < 60 && !seen.has_value(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    seen = (*client)->retrying();
  }
  puller.join();
  BROOK_EXPECT_OK(pulled);
  ASSERT_TRUE(seen.has_value()) << "no report while the pull waited";
  EXPECT_TRUE(seen->silent);
  EXPECT_FALSE(seen->out_of_space);
  EXPECT_EQ(seen->address, shard.address());
  EXPECT_NE(seen->error.find("no reply for"), std::string::npos) << seen->error;
  EXPECT_FALSE((*client)->retrying().has_value()) << "the report outlived the reply";
  EXPECT_EQ((*client)->retries(), 0u);  // it waited; nothing was re-sent
}

TEST(GrpcPsClientTest, UnavailablePullIsRetried) {
  FlakyShard shard(FlakyService::Mode::kFailFirstPull);
  ASSERT_NE(shard.server, nullptr);
  BROOK_ASSERT_OK(shard.ps.CreateTable(CounterTable("emb", 2)));
  auto client = Client({shard.address()});
  std::vector<float> rows(2, -1);
  BROOK_ASSERT_OK(client->Pull("emb", std::vector<uint64_t>{3}, absl::MakeSpan(rows)));
  EXPECT_EQ(rows, (std::vector<float>{0, 0}));
  EXPECT_EQ(shard.service.pull_attempts(), 2);
  EXPECT_EQ(client->retries(), 1u);
}

TEST(GrpcPsClientTest, RetriesStopAtTheDeadline) {
  FlakyShard shard(FlakyService::Mode::kAlwaysUnavailable);
  ASSERT_NE(shard.server, nullptr);
  BROOK_ASSERT_OK(shard.ps.CreateTable(CounterTable("emb", 2)));
  auto client = Client({shard.address()}, absl::Milliseconds(400), absl::Milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  absl::Status st = client->Push("emb", std::vector<uint64_t>{1}, std::vector<float>{1, 1}, 0);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  // The last attempt's error: UNAVAILABLE, or DEADLINE_EXCEEDED when a loaded
  // machine let that attempt run into its own timeout.
  EXPECT_TRUE(st.code() == absl::StatusCode::kUnavailable ||
              st.code() == absl::StatusCode::kDeadlineExceeded)
      << st;
  EXPECT_NE(st.message().find("attempts"), absl::string_view::npos) << st;
  EXPECT_LT(elapsed, std::chrono::seconds(2));
  EXPECT_GT(shard.service.push_attempts(), 2);
}

TEST(GrpcPsClientTest, NonRetryableErrorsReturnAtOnce) {
  rpc::PsServerOptions o;
  o.metrics_listen = "";
  auto server = rpc::PsServer::Start(o);
  ASSERT_TRUE(server.ok());
  auto client = Client({(*server)->address()});
  std::vector<float> rows(2);
  BROOK_EXPECT_CODE(client->Pull("missing", std::vector<uint64_t>{1}, absl::MakeSpan(rows)),
                    absl::StatusCode::kNotFound);
  EXPECT_EQ(client->retries(), 0u);
}

TEST(GrpcPsClientTest, UnreachableShardFailsWithinTheDeadline) {
  // Port 1 on loopback: nothing listens there, connections are refused.
  auto client = Client({"127.0.0.1:1"}, absl::Milliseconds(500), absl::Milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> rows(2);
  absl::Status st = client->Pull("emb", std::vector<uint64_t>{1}, absl::MakeSpan(rows));
  EXPECT_TRUE(absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st)) << st;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_FALSE(client->WaitForReady(absl::Milliseconds(300)).ok());
}

// A full disk under the PS's WAL is transient: the push is retried with the
// same sequence until space returns, applied once, and retrying() says so
// while it lasts (a real tmpfs filled by a file, then emptied).
TEST(GrpcPsClientTest, OutOfSpaceIsRetriedUntilSpaceReturnsAndAppliedOnce) {
  brook::testing::TempDir dir;
  std::string why;
  // Only the WAL's directory is on the small filesystem: the PS's RocksDB
  // tier (not written here) stays off it.
  std::filesystem::create_directories(dir.Join("data"));
  auto fs = brook::testing::ScopedTmpfs::Mount(dir.Join("data/wal"), 8 << 20, &why);
  if (fs == nullptr) GTEST_SKIP() << "SKIPPED: " << why;
  rpc::PsServerOptions o;
  o.metrics_listen = "";
  o.ps.data_dir = dir.Join("data");
  o.ps.rocksdb.block_cache_bytes = 1 << 20;
  o.ps.rocksdb.write_buffer_bytes = 1 << 20;
  auto server = rpc::PsServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client({(*server)->address()}, absl::Seconds(30), absl::Seconds(5));
  BROOK_ASSERT_OK(client->CreateTable(CounterTable("emb", 64)));
  // 64 KiB of gradients: more than the slack in the WAL file's last page.
  std::vector<uint64_t> keys(256);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = 7919 * i + 1;
  const std::vector<float> minus_one(keys.size() * 64, -1.0f);
  BROOK_ASSERT_OK(client->Push("emb", keys, minus_one, 0));

  // Fill the filesystem to the last byte.
  const std::string filler = fs->path() + "/filler";  // beside the WAL's segments
  {
    FILE* f = std::fopen(filler.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const std::vector<char> block(64 << 10, 'x');
    while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
    }
    std::fclose(f);
    f = std::fopen(filler.c_str(), "ab");  // the last partial block
    while (std::fputc('x', f) != EOF && std::fflush(f) == 0) {
    }
    std::fclose(f);
  }
  absl::Status pushed;
  std::thread pusher([&] { pushed = client->Push("emb", keys, minus_one, 1); });
  bool seen = false;
  for (int i = 0; i < 300 && !seen; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::optional<GrpcPsClient::RetryEpisode> e = client->retrying();
    seen = e.has_value() && e->out_of_space && e->shard == 0 &&
           e->error.find("No space left on device") != std::string::npos;
  }
  EXPECT_TRUE(seen) << "retrying() never reported the full disk";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::remove(filler.c_str());  // space returns
  pusher.join();
  BROOK_EXPECT_OK(pushed);
  EXPECT_GT(client->retries(), 0u);
  EXPECT_FALSE(client->retrying().has_value());
  std::vector<float> rows(keys.size() * 64);
  BROOK_ASSERT_OK(client->Pull("emb", keys, absl::MakeSpan(rows)));
  EXPECT_EQ(rows, std::vector<float>(rows.size(), 2.0f)) << "the retried push counted twice";
}

// RESOURCE_EXHAUSTED for a limit (here the key limit; a memory budget is the
// same) is final: returned at once, never retried, however long the window.
TEST(GrpcPsClientTest, KeyLimitResourceExhaustedIsFatalAtOnce) {
  rpc::PsServerOptions o;
  o.metrics_listen = "";
  o.ps.max_keys_per_request = 4;
  auto server = rpc::PsServer::Start(o);
  ASSERT_TRUE(server.ok());
  auto client = Client({(*server)->address()}, absl::Seconds(60));
  BROOK_ASSERT_OK(client->CreateTable(CounterTable("emb", 2)));
  const auto start = std::chrono::steady_clock::now();
  const std::vector<uint64_t> keys = {1, 2, 3, 4, 5, 6, 7, 8};
  BROOK_EXPECT_CODE(client->Push("emb", keys, std::vector<float>(16, 1.0f), 0),
                    absl::StatusCode::kResourceExhausted);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(client->retries(), 0u);
  EXPECT_FALSE(client->retrying().has_value());
}

// Cancel() ends a call that is retrying an unreachable PS, and a
// WaitForReady, at once instead of after their minute-long windows.
TEST(GrpcPsClientTest, CancelEndsRetryingCallsAtOnce) {
  auto client = Client({"127.0.0.1:1"}, absl::Seconds(60), absl::Seconds(20));
  absl::Status pulled, ready;
  std::thread puller([&] {
    std::vector<float> rows(2);
    pulled = client->Pull("emb", std::vector<uint64_t>{1}, absl::MakeSpan(rows));
  });
  std::thread waiter([&] { ready = client->WaitForReady(absl::Seconds(60)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_TRUE(client->retrying().has_value());
  EXPECT_FALSE(client->retrying()->out_of_space);
  const auto start = std::chrono::steady_clock::now();
  client->Cancel();
  puller.join();
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_TRUE(absl::IsCancelled(pulled)) << pulled;
  EXPECT_TRUE(absl::IsCancelled(ready)) << ready;
  std::vector<float> rows(2);
  EXPECT_TRUE(
      absl::IsCancelled(client->Pull("emb", std::vector<uint64_t>{1}, absl::MakeSpan(rows))));
}

TEST(GrpcPsClientTest, SwappedAddressesAreFailedPrecondition) {
  std::vector<std::unique_ptr<rpc::PsServer>> servers;
  for (int i = 0; i < 2; ++i) {
    rpc::PsServerOptions o;
    o.metrics_listen = "";
    o.ps.shard_index = i;
    o.ps.num_shards = 2;
    auto s = rpc::PsServer::Start(o);
    ASSERT_TRUE(s.ok());
    servers.push_back(std::move(*s));
  }
  auto client = Client({servers[1]->address(), servers[0]->address()});
  BROOK_ASSERT_OK(client->WaitForReady(absl::Seconds(10)));
  BROOK_ASSERT_OK(client->CreateTable(CounterTable("emb", 2)));
  std::vector<uint64_t> keys(20);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  std::vector<float> rows(keys.size() * 2);
  BROOK_EXPECT_CODE(client->Pull("emb", keys, absl::MakeSpan(rows)),
                    absl::StatusCode::kFailedPrecondition);
  BROOK_EXPECT_CODE(client->Push("emb", keys, rows, 0), absl::StatusCode::kFailedPrecondition);
}

TEST(GrpcPsClientTest, LargeCallsAreSplitIntoSeveralRequestsPerShard) {
  std::vector<std::unique_ptr<rpc::PsServer>> servers;
  GrpcPsClientOptions o;
  for (int i = 0; i < 2; ++i) {
    rpc::PsServerOptions so;
    so.metrics_listen = "";
    so.ps.shard_index = i;
    so.ps.num_shards = 2;
    auto s = rpc::PsServer::Start(so);
    ASSERT_TRUE(s.ok());
    o.addresses.push_back((*s)->address());
    servers.push_back(std::move(*s));
  }
  o.max_request_bytes = 1000;  // 8 + 4 x 4 bytes per key: 41 keys per request
  auto client = GrpcPsClient::Create(o);
  ASSERT_TRUE(client.ok());
  BROOK_ASSERT_OK((*client)->CreateTable(CounterTable("emb", 4)));
  std::mt19937_64 rng(3);
  std::vector<uint64_t> keys(2000);
  for (auto& k : keys) k = rng() % 700;
  std::vector<float> grads(keys.size() * 4);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = -static_cast<float>(i % 4 + 1);
  BROOK_ASSERT_OK((*client)->Push("emb", keys, grads, 0));
  std::vector<float> rows(keys.size() * 4);
  BROOK_ASSERT_OK((*client)->Pull("emb", keys, absl::MakeSpan(rows)));
  std::map<uint64_t, int> count;
  for (uint64_t k : keys) ++count[k];
  for (size_t i = 0; i < keys.size(); ++i) {
    for (int d = 0; d < 4; ++d) {
      ASSERT_EQ(rows[i * 4 + d], static_cast<float>(count[keys[i]] * (d + 1))) << i;
    }
  }
}

TEST(GrpcPsClientTest, LargeBatchesAreSplitIntoSeveralRequestsPerShard) {
  std::vector<std::unique_ptr<rpc::PsServer>> servers;
  GrpcPsClientOptions o;
  for (int i = 0; i < 2; ++i) {
    rpc::PsServerOptions so;
    so.metrics_listen = "";
    so.ps.shard_index = i;
    so.ps.num_shards = 2;
    auto s = rpc::PsServer::Start(so);
    ASSERT_TRUE(s.ok());
    o.addresses.push_back((*s)->address());
    servers.push_back(std::move(*s));
  }
  o.max_request_bytes = 1000;  // 41 keys of dim 4 per request; the dense part goes alone
  auto client = GrpcPsClient::Create(o);
  ASSERT_TRUE(client.ok());
  BROOK_ASSERT_OK((*client)->CreateTable(CounterTable("a", 4)));
  BROOK_ASSERT_OK((*client)->CreateTable(CounterTable("b", 1)));
  BROOK_ASSERT_OK((*client)->CreateDense({testing::CounterDense("w", {300})}));
  std::mt19937_64 rng(4);
  std::vector<uint64_t> ka(2000), kb(50);
  for (auto& k : ka) k = rng() % 700;
  for (auto& k : kb) k = rng() % 20;
  std::vector<float> ga(ka.size() * 4), gb(kb.size(), -1.0f), gw(300);
  for (size_t i = 0; i < ga.size(); ++i) ga[i] = -static_cast<float>(i % 4 + 1);
  for (size_t i = 0; i < gw.size(); ++i) gw[i] = -static_cast<float>(i);
  BROOK_ASSERT_OK((*client)->PushBatch({{"a", ka, ga}, {"b", kb, gb}}, {{"w", gw}}, 0, 1.0f));
  std::vector<float> ra(ka.size() * 4), rb(kb.size()), w(300);
  BROOK_ASSERT_OK((*client)->PullBatch(
      {{"a", ka, absl::MakeSpan(ra)}, {"b", kb, absl::MakeSpan(rb)}}, {{"w", absl::MakeSpan(w)}}));
  std::map<uint64_t, int> count_a, count_b;
  for (uint64_t k : ka) ++count_a[k];
  for (uint64_t k : kb) ++count_b[k];
  for (size_t i = 0; i < ka.size(); ++i) {
    for (int d = 0; d < 4; ++d) {
      ASSERT_EQ(ra[i * 4 + d], static_cast<float>(count_a[ka[i]] * (d + 1))) << i;
    }
  }
  for (size_t i = 0; i < kb.size(); ++i) ASSERT_EQ(rb[i], static_cast<float>(count_b[kb[i]]));
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(w[i], static_cast<float>(i));
}

TEST(GrpcPsClientTest, BadOptionsAreInvalidArgument) {
  GrpcPsClientOptions o;
  EXPECT_EQ(GrpcPsClient::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.addresses = {"127.0.0.1:1"};
  o.channels_per_shard = 0;
  EXPECT_EQ(GrpcPsClient::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.channels_per_shard = 2;
  o.max_request_bytes = o.max_message_bytes;
  EXPECT_EQ(GrpcPsClient::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_request_bytes = 1 << 20;
  o.deadline = absl::ZeroDuration();
  EXPECT_EQ(GrpcPsClient::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GrpcPsClientTest, WaitForReadySeesADrainingServerAsNotServing) {
  rpc::PsServerOptions so;
  so.metrics_listen = "";
  auto server = rpc::PsServer::Start(so);
  ASSERT_TRUE(server.ok());
  auto client = Client({(*server)->address()});
  BROOK_ASSERT_OK(client->WaitForReady(absl::Seconds(10)));
  (*server)->service()->SetServing(false);
  BROOK_EXPECT_CODE(client->WaitForReady(absl::Milliseconds(200)), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace brook::ps

namespace brook::ps {
namespace {

// The chief gives a job's checkpoints and exports the job's retry window:
// a checkpoint of a PS that refuses connections gives up after it, not after
// the client's default (minutes).
TEST(GrpcPsClientTest, SetAdminRetryWindowBoundsACheckpointOfAnUnreachablePs) {
  GrpcPsClientOptions o;
  o.addresses = {"127.0.0.1:1"};  // nothing listens on port 1
  o.initial_backoff = absl::Milliseconds(5);
  o.max_backoff = absl::Milliseconds(50);
  absl::StatusOr<std::unique_ptr<GrpcPsClient>> client = GrpcPsClient::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  (*client)->SetAdminRetryWindow(absl::Milliseconds(500));
  brook::testing::TempDir dir;
  CheckpointOptions c;
  c.dir = dir.Join("ckpt");
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<CheckpointInfo>> done = (*client)->Checkpoint(c);
  EXPECT_FALSE(done.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_NE(done.status().message().find("127.0.0.1:1"), std::string::npos) << done.status();
}

}  // namespace
}  // namespace brook::ps
