// PsServer over real loopback TCP: binding :0, the /metrics page (names,
// values, promtool), TTL eviction on its timer, drain on Shutdown.
#include "ps/rpc/ps_server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "ps/client/grpc_ps_client.h"
#include "ps/rpc/ps_service.h"
#include "tests/testing/http_get.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/test_util.h"

namespace brook::ps::rpc {
namespace {

using testing::CounterTable;

std::unique_ptr<PsServer> StartOrDie(PsServerOptions options = {}) {
  auto server = PsServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

std::unique_ptr<GrpcPsClient> ClientFor(const PsServer& server) {
  GrpcPsClientOptions o;
  o.addresses = {server.address()};
  o.deadline = absl::Seconds(10);
  auto client = GrpcPsClient::Create(o);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

std::string Scrape(const PsServer& server) {
  std::string error;
  auto r = brook::testing::HttpGet(server.metrics_address(), "/metrics", 5000, &error);
  EXPECT_TRUE(r.has_value()) << error;
  return r ? r->body : "";
}

// A metric without labels as scraped; -1 when the page lacks it.
double Scraped(const PsServer& server, const std::string& metric) {
  const std::string body = Scrape(server);
  const std::string name = "\n" + metric + " ";
  const size_t at = body.find(name);
  EXPECT_NE(at, std::string::npos) << metric << " not in " << body;
  return at == std::string::npos ? -1 : std::stod(body.substr(at + name.size()));
}

double SplitRequests(const PsServer& server) {
  return Scraped(server, "brook_ps_split_requests_total");
}

TEST(PsServerTest, BindsEphemeralPortsAndServes) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  EXPECT_GT(server->metrics_port(), 0);
  EXPECT_EQ(server->address(), "127.0.0.1:" + std::to_string(server->port()));
  auto client = ClientFor(*server);
  ASSERT_NE(client, nullptr);
  BROOK_ASSERT_OK(client->WaitForReady(absl::Seconds(10)));
  BROOK_ASSERT_OK(client->CreateTable(CounterTable("emb", 8)));
  std::vector<uint64_t> keys = {1, 2, 3};
  std::vector<float> rows(keys.size() * 8, -1.0f);
  BROOK_ASSERT_OK(client->Pull("emb", keys, absl::MakeSpan(rows)));
  EXPECT_EQ(rows, std::vector<float>(24, 0.0f));
}

TEST(PsServerTest, BadOptionsAreInvalidArgument) {
  PsServerOptions o;
  o.ps.shard_index = 3;
  o.ps.num_shards = 3;
  EXPECT_EQ(PsServer::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = PsServerOptions();
  o.listen = "nocolon";
  EXPECT_EQ(PsServer::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = PsServerOptions();
  o.threads = -1;
  EXPECT_EQ(PsServer::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PsServerTest, AnOpenServerOffLoopbackIsRefusedUnlessAllowed) {
  PsServerOptions o;
  o.listen = "0.0.0.0:0";
  const absl::Status open = o.Validate();
  EXPECT_EQ(open.code(), absl::StatusCode::kInvalidArgument) << open;
  EXPECT_NE(open.message().find("--allow-unauthenticated"), std::string::npos) << open;
  o.allow_unauthenticated = true;
  EXPECT_TRUE(o.Validate().ok());
  o.allow_unauthenticated = false;
  o.auth_token = "0123456789abcdef0123";
  EXPECT_TRUE(o.Validate().ok());
  o.auth_token = "short";
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PsServerTest, TakenPortIsUnavailable) {
  auto first = StartOrDie();
  ASSERT_NE(first, nullptr);
  PsServerOptions o;
  o.listen = first->address();
  EXPECT_EQ(PsServer::Start(o).status().code(), absl::StatusCode::kUnavailable);
  o = PsServerOptions();
  o.metrics_listen = first->metrics_address();
  EXPECT_EQ(PsServer::Start(o).status().code(), absl::StatusCode::kUnavailable);
}

TEST(PsServerTest, MetricsOffMeansNoMetricsPort) {
  PsServerOptions o;
  o.metrics_listen = "";
  auto server = StartOrDie(o);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->metrics_port(), 0);
  EXPECT_EQ(server->metrics_address(), "");
}

TEST(PsServerTest, MetricsPageHasRequestAndTableMetrics) {
  PsServerOptions o;
  o.ps.shard_index = 0;
  o.ps.num_shards = 1;
  o.threads = 2;
  auto server = StartOrDie(o);
  ASSERT_NE(server, nullptr);
  auto client = ClientFor(*server);
  ASSERT_NE(client, nullptr);
  BROOK_ASSERT_OK(client->CreateTable(CounterTable("emb", 4)));
  std::vector<uint64_t> keys = {1, 2, 3, 2};
  std::vector<float> rows(keys.size() * 4);
  BROOK_ASSERT_OK(client->Pull("emb", keys, absl::MakeSpan(rows)));
  BROOK_ASSERT_OK(client->Push("emb", keys, std::vector<float>(keys.size() * 4, -1.0f), 1));
  std::vector<float> nan(4, std::numeric_limits<float>::quiet_NaN());
  BROOK_EXPECT_CODE(client->Push("emb", std::vector<uint64_t>{9}, nan, 2),
                    absl::StatusCode::kInvalidArgument);
  BROOK_EXPECT_CODE(client->Pull("nope", keys, absl::MakeSpan(rows)), absl::StatusCode::kNotFound);

  const std::string body = Scrape(*server);
  auto has = [&](const std::string& needle) {
    EXPECT_NE(body.find(needle), std::string::npos) << "missing: " << needle << "\n" << body;
  };
  has("brook_ps_requests_total{code=\"OK\",method=\"Pull\"} 1");
  has("brook_ps_requests_total{code=\"OK\",method=\"Push\"} 1");
  has("brook_ps_requests_total{code=\"INVALID_ARGUMENT\",method=\"Push\"} 1");
  has("brook_ps_requests_total{code=\"NOT_FOUND\",method=\"Pull\"} 1");
  has("brook_ps_request_duration_seconds_count{method=\"Pull\"} 2");
  has("brook_ps_rows_pulled_total{table=\"emb\"} 3");  // unique keys: the client dedups
  has("brook_ps_rows_pushed_total{table=\"emb\"} 3");
  has("brook_ps_table_rows{table=\"emb\"} 3");
  has("brook_ps_rejected_gradients_total{table=\"emb\"} 1");
  has("brook_ps_duplicate_pushes_total{table=\"emb\"} 0");
  has("brook_ps_admissions_total{table=\"emb\"}");
  has("brook_ps_evictions_total{table=\"emb\"} 0");
  has("brook_ps_table_memory_bytes{table=\"emb\"}");
  has("brook_ps_index_grows_total{table=\"emb\"}");
  has("brook_ps_helper_threads ");
  has("brook_ps_split_requests_total 0");  // 4 keys: too few to split
  has("brook_ps_helper_parts_total 0");
  has("brook_ps_shard_info{num_shards=\"1\",shard_index=\"0\"} 1");
  has("brook_build_info{commit=");
  has("process_start_time_seconds ");
  has("process_resident_memory_bytes ");
  has("process_open_fds ");
  // Memory only: no RocksDB tier, no RocksDB families.
  EXPECT_EQ(body.find("brook_ps_rocksdb_"), std::string::npos);
}

// A pull large enough to split runs in parts on the helpers (no other pull
// is in flight) and returns exactly the rows one unsplit lookup returns, in
// the caller's order, duplicates included.
TEST(PsServerTest, LargePullsSplitOverHelpersReturnTheRowsOfOneLookup) {
  PsServerOptions o;
  o.helpers = 3;
  auto server = StartOrDie(o);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->helpers(), 3);
  auto client = ClientFor(*server);
  ASSERT_NE(client, nullptr);
  constexpr int kDim = 8;
  BROOK_ASSERT_OK(client->CreateTable(CounterTable("emb", kDim)));
  // Distinct rows: each key's gradient is its own, and keys 0..999 stay at
  // their initial value.
  std::vector<uint64_t> keys;
  for (uint64_t k = 1000; k < 9000; ++k) keys.push_back(k * 7919);
  std::vector<float> grads(keys.size() * kDim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(i % 977) - 488.0f;
  BROOK_ASSERT_OK(client->Push("emb", keys, grads, 1));
  const double splits_before_pull = SplitRequests(*server);
  for (uint64_t k = 0; k < 1000; ++k) keys.push_back(k * 7919);
  for (size_t i = 0; i < 500; ++i) keys.push_back(keys[i * 13]);  // repeats
  std::vector<float> over_grpc(keys.size() * kDim, -1.0f);
  BROOK_ASSERT_OK(client->Pull("emb", keys, absl::MakeSpan(over_grpc)));
  std::vector<float> one_lookup(keys.size() * kDim);
  BROOK_ASSERT_OK(server->parameter_server()->Pull("emb", keys, absl::MakeSpan(one_lookup)));
  EXPECT_EQ(over_grpc, one_lookup);

  EXPECT_NE(Scrape(*server).find("brook_ps_helper_threads 3"), std::string::npos);
  EXPECT_EQ(SplitRequests(*server), splits_before_pull + 1) << "the pull was not split";
  BROOK_EXPECT_CODE(client->Pull("nope", keys, absl::MakeSpan(over_grpc)),
                    absl::StatusCode::kNotFound);
}

// A push large enough to split is applied in parts on the helpers and leaves
// the rows a PS without helpers holds after the same pushes: Adagrad, with
// admission (the first push only counts most keys) and clipping.
TEST(PsServerTest, LargePushesSplitOverHelpersApplyAsOnePush) {
  PsServerOptions with_helpers;
  with_helpers.helpers = 2;
  PsServerOptions without;
  without.helpers = 0;
  auto split = StartOrDie(with_helpers);
  auto whole = StartOrDie(without);
  ASSERT_NE(split, nullptr);
  ASSERT_NE(whole, nullptr);
  auto split_client = ClientFor(*split);
  auto whole_client = ClientFor(*whole);
  ASSERT_NE(split_client, nullptr);
  ASSERT_NE(whole_client, nullptr);
  constexpr int kDim = 4;
  TableOptions t = CounterTable("emb", kDim);
  t.optimizer.kind = OptimizerKind::kAdagrad;
  t.optimizer.learning_rate = 0.5f;
  t.admission_min_count = 2;
  t.gradient_clip = 0.75f;
  BROOK_ASSERT_OK(split_client->CreateTable(t));
  BROOK_ASSERT_OK(whole_client->CreateTable(t));
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; k <= 6000; ++k) keys.push_back(k * 104729);
  const double splits_before = SplitRequests(*split);
  for (int round = 0; round < 3; ++round) {
    // Round 0 admits no key; 1 admits them all; 2 updates them.
    std::vector<float> grads(keys.size() * kDim);
    for (size_t i = 0; i < grads.size(); ++i) {
      grads[i] = static_cast<float>((i * 31 + round * 7) % 401) / 200.0f - 1.0f;
    }
    BROOK_ASSERT_OK(split_client->Push("emb", keys, grads, round + 1));
    BROOK_ASSERT_OK(whole_client->Push("emb", keys, grads, round + 1));
  }
  std::vector<float> got(keys.size() * kDim), want(keys.size() * kDim);
  BROOK_ASSERT_OK(split_client->Pull("emb", keys, absl::MakeSpan(got)));
  BROOK_ASSERT_OK(whole_client->Pull("emb", keys, absl::MakeSpan(want)));
  EXPECT_EQ(got, want);
  EXPECT_NE(want, std::vector<float>(want.size(), 0.0f)) << "the pushes changed nothing";
  // 3 pushes and 1 pull of 6000 keys, each alone in the PS: all split, each
  // over the handler thread and both (idle) helpers.
  EXPECT_EQ(SplitRequests(*split), splits_before + 4);
  EXPECT_EQ(Scraped(*split, "brook_ps_helper_parts_total"), 2 * (splits_before + 4));
  EXPECT_EQ(SplitRequests(*whole), 0);
  EXPECT_EQ(Scraped(*whole, "brook_ps_helper_parts_total"), 0);
}

TEST(PsServerTest, HelpersOutOfRangeAreInvalidArgument) {
  for (int helpers : {-2, 65}) {
    PsServerOptions o;
    o.helpers = helpers;
    auto server = PsServer::Start(o);
    ASSERT_FALSE(server.ok()) << helpers;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(server.status().message().find("helpers"), std::string::npos);
  }
}

TEST(PsServerTest, MetricsPagePassesPromtool) {
  const std::string promtool = brook::testing::FindPromtool();
  if (promtool.empty()) {
    GTEST_SKIP() << "SKIPPED: promtool not installed (Debian package 'prometheus'; "
                    "scripts/setup.sh installs it)";
  }
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  auto client = ClientFor(*server);
  ASSERT_NE(client, nullptr);
  BROOK_ASSERT_OK(client->CreateTable(CounterTable("emb", 4)));
  BROOK_ASSERT_OK(client->CreateDense({brook::testing::CounterDense("w", {3})}));
  BROOK_ASSERT_OK(client->Push("emb", std::vector<uint64_t>{1}, std::vector<float>(4, -1), 1));
  BROOK_ASSERT_OK(client->PushDense("w", std::vector<float>(3, -1), 1));
  const std::string body = Scrape(*server);
  std::string output;
  EXPECT_EQ(brook::testing::PromtoolCheckMetrics(body, &output), 0) << output << "\n--- scrape:\n"
                                                                    << body;
}

TEST(PsServerTest, DataDirServerExportsTierAndCheckpointMetricsThatPassPromtool) {
  brook::testing::TempDir dir;
  PsServerOptions o;
  o.ps.data_dir = dir.Join("data");
  o.ps.rocksdb.block_cache_bytes = 4 << 20;
  auto server = StartOrDie(o);
  ASSERT_NE(server, nullptr);
  auto client = ClientFor(*server);
  ASSERT_NE(client, nullptr);
  TableOptions t = CounterTable("emb", 4);
  t.memory_budget_bytes = 100 * 4 * sizeof(float);  // 100 rows in memory
  BROOK_ASSERT_OK(client->CreateTable(t));
  std::vector<uint64_t> keys(2000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  BROOK_ASSERT_OK(client->Push("emb", keys, std::vector<float>(keys.size() * 4, -1.0f), 1));
  std::vector<float> rows(keys.size() * 4);
  BROOK_ASSERT_OK(client->Pull("emb", keys, absl::MakeSpan(rows)));
  EXPECT_EQ(rows, std::vector<float>(rows.size(), 1.0f));  // every row kept, cold or hot
  CheckpointOptions c;
  c.dir = dir.Join("ckpt");
  auto infos = client->Checkpoint(c);
  ASSERT_TRUE(infos.ok()) << infos.status();
  ASSERT_EQ(infos->size(), 1u);
  EXPECT_GT((*infos)[0].bytes, 0u);
  EXPECT_EQ((*infos)[0].shard_dir, dir.Join("ckpt") + "/shard-00000-of-00001");

  const std::string body = Scrape(*server);
  auto has = [&](const std::string& needle) {
    EXPECT_NE(body.find(needle), std::string::npos) << "missing: " << needle << "\n" << body;
  };
  has("brook_ps_tier_lookups_total{found=\"cold\",table=\"emb\"}");
  has("brook_ps_tier_lookups_total{found=\"hot\",table=\"emb\"}");
  has("brook_ps_tier_rows_moved_total{direction=\"to_rocksdb\",table=\"emb\"}");
  has("brook_ps_tier_errors_total{table=\"emb\"} 0");
  has("brook_ps_checkpoints_total 1");
  has("brook_ps_last_checkpoint_seconds{kind=\"full\"}");
  has("brook_ps_last_checkpoint_bytes{kind=\"full\"}");
  has("brook_ps_last_checkpoint_age_seconds ");
  has("brook_ps_requests_total{code=\"OK\",method=\"Checkpoint\"} 1");
  // The RocksDB tier's own health (every row stayed hot here, so the values
  // are RocksDB's idle ones; the families are what is checked).
  has("brook_ps_rocksdb_block_cache_lookups_total{result=\"hit\"}");
  has("brook_ps_rocksdb_block_cache_lookups_total{result=\"miss\"}");
  has("brook_ps_rocksdb_pending_compaction_bytes ");
  has("brook_ps_rocksdb_stall_seconds_total ");
  has("brook_ps_rocksdb_written_bytes_total ");
  const std::string promtool = brook::testing::FindPromtool();
  if (promtool.empty()) {
    std::printf("SKIPPED promtool half: promtool not installed\n");
    return;
  }
  std::string output;
  EXPECT_EQ(brook::testing::PromtoolCheckMetrics(body, &output), 0) << output << "\n" << body;
}

TEST(PsServerTest, EvictionTimerDropsRowsPastTheirStepTtl) {
  PsServerOptions o;
  o.evict_interval = absl::Milliseconds(20);
  auto server = StartOrDie(o);
  ASSERT_NE(server, nullptr);
  auto client = ClientFor(*server);
  ASSERT_NE(client, nullptr);
  TableOptions t = CounterTable("emb", 4);
  t.ttl_steps = 10;
  BROOK_ASSERT_OK(client->CreateTable(t));
  BROOK_ASSERT_OK(client->Push("emb", std::vector<uint64_t>{1}, std::vector<float>(4, -1), 0));
  BROOK_ASSERT_OK(client->Push("emb", std::vector<uint64_t>{2}, std::vector<float>(4, -1), 100));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  uint64_t rows = 0, evictions = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    ServerStats s = server->parameter_server()->Stats();
    rows = s.tables[0].rows;
    evictions = s.tables[0].evictions;
    if (evictions > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(evictions, 1u);
  EXPECT_EQ(rows, 1u);
}

TEST(PsServerTest, ShutdownDrainsAndLaterCallsFailUnavailable) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  GrpcPsClientOptions o;
  o.addresses = {server->address()};
  o.deadline = absl::Milliseconds(500);
  o.attempt_timeout = absl::Milliseconds(200);
  auto client = GrpcPsClient::Create(o);
  ASSERT_TRUE(client.ok());
  BROOK_ASSERT_OK((*client)->CreateTable(CounterTable("emb", 4)));
  const auto start = std::chrono::steady_clock::now();
  server->Shutdown(absl::Seconds(5));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(server->service()->serving());
  server->Shutdown(absl::Seconds(5));  // idempotent
  std::vector<float> rows(4);
  absl::Status st = (*client)->Pull("emb", std::vector<uint64_t>{1}, absl::MakeSpan(rows));
  EXPECT_TRUE(absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st)) << st;
}

}  // namespace
}  // namespace brook::ps::rpc
