// A real `brook ps` under a node-wide memory limit (--memory-limit) and
// configured by TF_CONFIG: 52 tables, each allowed 1 GiB by its own budget,
// share the limit; past it a memory-only PS refuses new rows naming the
// limit and the flag, and its RSS stays under the limit plus a stated
// overhead (read from /proc/PID/status); a PS with --data-dir moves the rows
// past it to RocksDB instead. TF_CONFIG gives the listen port, shard index
// and shard count unless flags do.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ps/client/grpc_ps_client.h"
#include "tests/testing/http_get.h"
#include "tests/testing/process.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using namespace std::chrono_literals;
using testing::BrookBinary;
using testing::ChildProcess;

constexpr int kTables = 52;
constexpr int kDim = 16;
constexpr size_t kBatch = 4096;
// An Adagrad row of dim 16 as the limit counts it: 16 B header, 32 floats,
// 12 B of index.
constexpr uint64_t kRowCharge = 16 + 32 * 4 + 12;

// VmRSS of `pid` in bytes; 0 if it cannot be read.
uint64_t RssBytes(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    uint64_t kib = 0;
    std::string digits;
    for (char c : line) {
      if (c >= '0' && c <= '9') digits += c;
    }
    return absl::SimpleAtoi(digits, &kib) ? kib << 10 : 0;
  }
  return 0;
}

// One series' value on a /metrics page (a failed scrape fails the test).
std::optional<double> Metric(const std::string& metrics_address, const std::string& series) {
  std::string error;
  std::optional<double> v = testing::ScrapeMetric(metrics_address, series, &error);
  EXPECT_TRUE(v.has_value() || error.empty()) << error;
  return v;
}

std::unique_ptr<ps::GrpcPsClient> Client(const std::string& address) {
  ps::GrpcPsClientOptions options;
  options.addresses = {address};
  options.deadline = absl::Seconds(30);
  auto client = ps::GrpcPsClient::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

ps::TableOptions Table(int i) {
  ps::TableOptions t;
  t.name = absl::StrCat("C", i);
  t.dim = kDim;
  t.optimizer.kind = ps::OptimizerKind::kAdagrad;
  t.optimizer.learning_rate = 0.1f;
  return t;  // memory_budget_bytes: the 1 GiB default, 52 GiB in all
}

// Pushes new keys to the tables in turn, kBatch at a time, until a push
// fails or `max_rows` rows were sent; returns the failure (OK if none) and
// the rows pushed in *rows.
absl::Status PushNewKeys(ps::GrpcPsClient& client, uint64_t max_rows, uint64_t* rows) {
  std::vector<uint64_t> keys(kBatch);
  const std::vector<float> grads(kBatch * kDim, 0.5f);
  *rows = 0;
  for (uint64_t round = 0; *rows < max_rows; ++round) {
    for (int t = 0; t < kTables && *rows < max_rows; ++t) {
      for (size_t i = 0; i < kBatch; ++i) keys[i] = round * kBatch + i;
      absl::Status s = client.Push(absl::StrCat("C", t), keys, grads, static_cast<int64_t>(round));
      if (!s.ok()) return s;
      *rows += kBatch;
    }
  }
  return absl::OkStatus();
}

TEST(PsMemoryLimitTest, FiftyTwoTablesShareTheLimitAndRssStaysUnderItPlusTheOverhead) {
  constexpr uint64_t kLimit = 256ull << 20;
  std::string error;
  auto ps = testing::StartBrookPs(0, 1, {"--memory-limit", "256MiB"}, 30s, &error);
  ASSERT_TRUE(ps.has_value()) << error;
  auto client = Client(ps->address);
  ASSERT_NE(client, nullptr);
  for (int t = 0; t < kTables; ++t) ASSERT_TRUE(client->CreateTable(Table(t)).ok());
  const uint64_t rss_before = RssBytes(ps->process->pid());
  ASSERT_GT(rss_before, 0u);

  uint64_t rows = 0;
  const absl::Status refused = PushNewKeys(*client, 4 * kLimit / kRowCharge, &rows);
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("memory limit of 268435456 bytes (brook ps --memory-limit)"),
            std::string::npos)
      << refused;
  // The limit, not a table's budget, stopped it: near the limit's row count.
  EXPECT_GE(rows * kRowCharge, kLimit - kTables * kBatch * kRowCharge);
  EXPECT_LE(rows * kRowCharge, kLimit);

  EXPECT_EQ(Metric(ps->metrics_address, "brook_ps_memory_limit_bytes"), double(kLimit));
  const std::optional<double> used = Metric(ps->metrics_address, "brook_ps_memory_used_bytes");
  ASSERT_TRUE(used.has_value());
  EXPECT_LE(*used, double(kLimit));
  EXPECT_GE(*used, double(rows * kRowCharge));
  EXPECT_GE(Metric(ps->metrics_address, "brook_ps_memory_limit_rejections_total").value_or(0), 1);

  // RSS grew by at most the limit plus the stated overhead: per table the
  // arena's last chunk (up to one 2 MiB huge page) and its stripes' partly
  // used blocks (16 x 16 KiB), and 32 MiB for gRPC buffers and malloc.
  const uint64_t rss_after = RssBytes(ps->process->pid());
  const uint64_t overhead = kTables * ((2ull << 20) + (256ull << 10)) + (32ull << 20);
  EXPECT_LE(rss_after - std::min(rss_after, rss_before), kLimit + overhead)
      << "RSS " << (rss_before >> 20) << " MiB -> " << (rss_after >> 20) << " MiB";
  std::cerr << "memory-limit test: RSS " << (rss_before >> 20) << " MiB -> " << (rss_after >> 20)
            << " MiB with " << rows << " rows (" << ((rows * kRowCharge) >> 20)
            << " MiB counted) in " << kTables << " tables\n";

  // Rows held still train; the PS answers pulls of refused keys from their
  // initial values.
  std::vector<uint64_t> keys(kBatch);
  for (size_t i = 0; i < kBatch; ++i) keys[i] = i;
  EXPECT_TRUE(client->Push("C0", keys, std::vector<float>(kBatch * kDim, 0.5f), 99).ok());
  std::vector<float> out(kDim);
  EXPECT_TRUE(
      client->Pull("C51", std::vector<uint64_t>{uint64_t{1} << 40}, absl::MakeSpan(out)).ok());
  // Dropping a table gives its rows back to the node.
  ASSERT_TRUE(client->DropTable("C0").ok());
  EXPECT_LT(Metric(ps->metrics_address, "brook_ps_memory_used_bytes").value_or(1e18), *used);
}

TEST(PsMemoryLimitTest, WithADataDirRowsPastTheLimitGoToRocksDb) {
  constexpr uint64_t kLimit = 16ull << 20;
  testing::TempDir dir;
  std::string error;
  auto ps = testing::StartBrookPs(
      0, 1,
      {"--memory-limit", "16MiB", "--data-dir", dir.path(), "--no-wal", "--rocksdb-cache-mib", "8"},
      30s, &error);
  ASSERT_TRUE(ps.has_value()) << error;
  auto client = Client(ps->address);
  ASSERT_NE(client, nullptr);
  for (int t = 0; t < kTables; ++t) ASSERT_TRUE(client->CreateTable(Table(t)).ok());
  uint64_t rows = 0;
  // Three rounds of new keys over every table, six times what the limit
  // holds: every push is accepted.
  ASSERT_TRUE(PushNewKeys(*client, 3 * kTables * kBatch, &rows).ok());
  const std::optional<double> used = Metric(ps->metrics_address, "brook_ps_memory_used_bytes");
  ASSERT_TRUE(used.has_value());
  // Within the limit between pushes, although one batch of every table
  // (52 x 4096 rows, 32 MiB counted) would not be: a write that leaves the
  // node past it moves rows out at once, the ones just written included.
  EXPECT_LE(*used, double(kLimit));
  EXPECT_GE(*used, double(kLimit / 2));
  EXPECT_EQ(Metric(ps->metrics_address, "brook_ps_memory_limit_rejections_total"), 0.0);
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  uint64_t moved = 0;
  for (const ps::TableStats& t : (*stats)[0].tables) moved += t.tier_evictions;
  EXPECT_GE(moved, rows - kLimit / kRowCharge - kTables * kBatch);
}

// A free TCP port on 127.0.0.1 (closed again: a small race, fine here).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

std::string PsTfConfig(int port, const std::string& type = "ps") {
  return absl::StrCat(R"({"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2", "127.0.0.1:)",
                      port, R"("], "worker": ["127.0.0.1:3", "127.0.0.1:4"]}, "task": {"type": ")",
                      type, R"(", "index": 1}})");
}

TEST(PsTfConfigTest, ListenPortShardAndShardCountComeFromTfConfigAndFlagsWin) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  std::string error;
  // 0.0.0.0 is no loopback address: the PS needs a token (or mutual TLS) there.
  auto ps = ChildProcess::Start({"/usr/bin/env", "TF_CONFIG=" + PsTfConfig(port),
                                 "BROOK_PS_TOKEN=ps-tf-config-test-token-0123", BrookBinary(), "ps",
                                 "--metrics-listen", "127.0.0.1:0"},
                                &error);
  ASSERT_NE(ps, nullptr) << error;
  auto line = ps->WaitForLine("brook ps listening on", 30s);
  ASSERT_TRUE(line.has_value()) << "no listening line";
  std::string address, metrics;
  ASSERT_TRUE(testing::ParsePsListeningLine(*line, &address, &metrics)) << *line;
  EXPECT_EQ(address, absl::StrCat("0.0.0.0:", port));
  EXPECT_EQ(Metric(metrics, "brook_ps_shard_info{num_shards=\"2\",shard_index=\"1\"}"), 1.0);
  ps->Signal(SIGTERM);
  EXPECT_EQ(ps->Wait(30s), 0);

  // Flags override TF_CONFIG.
  auto flagged = ChildProcess::Start(
      {"/usr/bin/env", "TF_CONFIG=" + PsTfConfig(port), BrookBinary(), "ps", "--listen",
       "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--num-shards", "3", "--shard-index", "2"},
      &error);
  ASSERT_NE(flagged, nullptr) << error;
  line = flagged->WaitForLine("brook ps listening on", 30s);
  ASSERT_TRUE(line.has_value()) << "no listening line";
  ASSERT_TRUE(testing::ParsePsListeningLine(*line, &address, &metrics)) << *line;
  EXPECT_NE(address, absl::StrCat("127.0.0.1:", port));
  EXPECT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
  EXPECT_EQ(Metric(metrics, "brook_ps_shard_info{num_shards=\"3\",shard_index=\"2\"}"), 1.0);
}

TEST(PsTfConfigTest, ATaskThatIsNotAPsIsAUsageErrorNamingIt) {
  auto r = testing::RunCommand({"/usr/bin/env", "TF_CONFIG=" + PsTfConfig(7070, "worker"),
                                BrookBinary(), "ps", "--check-config"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("TF_CONFIG: task.type is \"worker\" but `brook ps` runs a PS task"),
            std::string::npos)
      << r.output;
  // With every flag TF_CONFIG goes unread (brook local's PS in a TFJob pod).
  auto flagged = testing::RunCommand({"/usr/bin/env", "TF_CONFIG=" + PsTfConfig(7070, "worker"),
                                      BrookBinary(), "ps", "--listen", "127.0.0.1:0",
                                      "--shard-index", "0", "--num-shards", "1", "--check-config"});
  EXPECT_EQ(flagged.exit_code, 0) << flagged.output;
  auto bad =
      testing::RunCommand({"/usr/bin/env", "TF_CONFIG={\"cluster\": {\"ps\": [\"nohostport\"]}}",
                           BrookBinary(), "ps", "--check-config"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("TF_CONFIG: cluster.ps"), std::string::npos) << bad.output;
  auto limit =
      testing::RunCommand({BrookBinary(), "ps", "--memory-limit", "8 gigs", "--check-config"});
  EXPECT_EQ(limit.exit_code, 2) << limit.output;
  EXPECT_NE(limit.output.find("--memory-limit: \"8 gigs\" is not a size"), std::string::npos)
      << limit.output;
}

// Settings that cannot mean what they say: a limit smaller than any table,
// RocksDB sizes for a PS without the RocksDB tier.
TEST(PsFlagsTest, NonsenseSizesAreRefusedOrWarnedAbout) {
  auto tiny = testing::RunCommand({BrookBinary(), "ps", "--memory-limit", "1", "--check-config"});
  EXPECT_EQ(tiny.exit_code, 2) << tiny.output;
  EXPECT_NE(tiny.output.find("--memory-limit 1: 1 bytes is below 1 MiB"), std::string::npos)
      << tiny.output;
  auto ok = testing::RunCommand({BrookBinary(), "ps", "--memory-limit", "1MiB", "--check-config"});
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  auto no_tier =
      testing::RunCommand({BrookBinary(), "ps", "--rocksdb-cache-mib", "16", "--check-config"});
  EXPECT_EQ(no_tier.exit_code, 0) << no_tier.output;
  EXPECT_NE(no_tier.output.find("which only a --data-dir has: ignored"), std::string::npos)
      << no_tier.output;
  auto tier = testing::RunCommand({BrookBinary(), "ps", "--rocksdb-write-buffer-mib", "16",
                                   "--data-dir", "/nonexistent/x", "--check-config"});
  EXPECT_EQ(tier.output.find("ignored"), std::string::npos) << tier.output;
}

}  // namespace
}  // namespace brook
