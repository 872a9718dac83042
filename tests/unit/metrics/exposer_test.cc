#include "metrics/exposer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/version.h"
#include "metrics/collector.h"
#include "metrics/rpc_metrics.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "tests/testing/http_get.h"

namespace brook::metrics {
namespace {

std::string Scrape(const MetricsExposer& exposer) {
  std::string error;
  auto r = testing::HttpGet("127.0.0.1", exposer.port(), "/metrics", 5000, &error);
  EXPECT_TRUE(r.has_value()) << error;
  if (!r) return "";
  EXPECT_EQ(r->status, 200) << r->headers;
  return r->body;
}

TEST(MetricsExposerTest, ServesBuildInfoAndStartTimeOnAnEphemeralPort) {
  auto exposer = MetricsExposer::Start("127.0.0.1:0");
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  EXPECT_GT((*exposer)->port(), 0);
  EXPECT_EQ((*exposer)->address(), "127.0.0.1:" + std::to_string((*exposer)->port()));
  const std::string body = Scrape(**exposer);
  EXPECT_NE(body.find(std::string("brook_build_info{commit=\"") + GitCommit() + "\",version=\"" +
                      Version() + "\"} 1"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("# TYPE process_start_time_seconds gauge"), std::string::npos) << body;
}

TEST(MetricsExposerTest, ProcessStartTimeIsInThePastAndRecent) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double start = ProcessStartTimeSeconds();
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 24 * 3600);  // the test binary started less than a day ago
}

TEST(MetricsExposerTest, BadAddressIsInvalidArgument) {
  auto exposer = MetricsExposer::Start("no-port");
  EXPECT_EQ(exposer.status().code(), absl::StatusCode::kInvalidArgument);
  // What civetweb cannot bind is said plainly, before it tries (it would
  // say "null context when constructing CivetServer").
  for (const char* address : {"[::1]:0", "[::]:0", "127.1:0", "1.2.3:0", "::1:0"}) {
    auto bad = MetricsExposer::Start(address);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_NE(bad.status().message().find("IPv4 address in full"), std::string::npos)
        << bad.status();
    EXPECT_EQ(MetricsExposer::CheckAddress(address).code(), absl::StatusCode::kInvalidArgument);
  }
  for (const char* address : {"127.0.0.1:0", "0.0.0.0:0", "localhost:0"}) {
    EXPECT_TRUE(MetricsExposer::CheckAddress(address).ok()) << address;
  }
}

TEST(MetricsExposerTest, TakenPortIsUnavailable) {
  auto first = MetricsExposer::Start("127.0.0.1:0");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = MetricsExposer::Start("127.0.0.1:" + std::to_string((*first)->port()));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

TEST(MetricsExposerTest, CollectorRunsOnEveryScrapeAndVanishesWhenDestroyed) {
  auto exposer = MetricsExposer::Start("127.0.0.1:0");
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  int scrapes = 0;
  auto collector = std::make_shared<FunctionCollector>([&scrapes] {
    ++scrapes;
    FamilySet set;
    auto* rows = set.Gauge("brook_test_rows", "Rows in a test table");
    set.Add(rows, {{"table", "emb"}}, 42);
    auto* total = set.Counter("brook_test_things_total", "Things");
    set.Add(total, {{"table", "emb"}}, static_cast<double>(scrapes));
    return set.Take();
  });
  (*exposer)->RegisterCollectable(collector);
  std::string body = Scrape(**exposer);
  EXPECT_NE(body.find("brook_test_rows{table=\"emb\"} 42"), std::string::npos) << body;
  EXPECT_NE(body.find("brook_test_things_total{table=\"emb\"} 1"), std::string::npos) << body;
  body = Scrape(**exposer);
  EXPECT_NE(body.find("brook_test_things_total{table=\"emb\"} 2"), std::string::npos) << body;
  collector.reset();
  body = Scrape(**exposer);
  EXPECT_EQ(body.find("brook_test_rows"), std::string::npos) << body;
}

TEST(RpcMetricsTest, CountsByMethodAndCodeAndObservesDurations) {
  auto exposer = MetricsExposer::Start("127.0.0.1:0");
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  RpcMetrics rpc((*exposer)->registry(), "brook_test", {"Pull", "Push"});
  rpc.Record(0, 0, 0.001);
  rpc.Record(0, 0, 0.002);
  rpc.Record(0, 5, 0.0001);  // NOT_FOUND
  rpc.Record(1, 14, 0.5);    // UNAVAILABLE
  rpc.Record(1, 99, 0.5);    // out of range -> UNKNOWN
  const std::string body = Scrape(**exposer);
  EXPECT_NE(body.find("brook_test_requests_total{code=\"OK\",method=\"Pull\"} 2"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("brook_test_requests_total{code=\"NOT_FOUND\",method=\"Pull\"} 1"),
            std::string::npos);
  EXPECT_NE(body.find("brook_test_requests_total{code=\"UNAVAILABLE\",method=\"Push\"} 1"),
            std::string::npos);
  EXPECT_NE(body.find("brook_test_requests_total{code=\"UNKNOWN\",method=\"Push\"} 1"),
            std::string::npos);
  // Push's OK series exists (pre-created) at 0.
  EXPECT_NE(body.find("brook_test_requests_total{code=\"OK\",method=\"Push\"} 0"),
            std::string::npos);
  EXPECT_NE(body.find("brook_test_request_duration_seconds_count{method=\"Pull\"} 3"),
            std::string::npos);
  EXPECT_NE(body.find("brook_test_request_duration_seconds_bucket{method=\"Push\",le=\"0.5\"} 2"),
            std::string::npos);
}

TEST(RpcMetricsTest, StatusCodeNamesMatchGrpc) {
  EXPECT_EQ(StatusCodeName(0), "OK");
  EXPECT_EQ(StatusCodeName(3), "INVALID_ARGUMENT");
  EXPECT_EQ(StatusCodeName(8), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(16), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(17), "UNKNOWN");
  EXPECT_EQ(StatusCodeName(-1), "UNKNOWN");
}

TEST(MetricsExposerTest, ScrapePassesPromtoolCheckMetrics) {
  const std::string promtool = testing::FindPromtool();
  if (promtool.empty()) {
    GTEST_SKIP() << "SKIPPED: promtool not installed (Debian package 'prometheus'; "
                    "scripts/setup.sh installs it)";
  }
  auto exposer = MetricsExposer::Start("127.0.0.1:0");
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  RpcMetrics rpc((*exposer)->registry(), "brook_test", {"Pull"});
  rpc.Record(0, 0, 0.001);
  auto collector = std::make_shared<FunctionCollector>([] {
    FamilySet set;
    set.Add(set.Counter("brook_test_rows_pulled_total", "Rows pulled"), {{"table", "a"}}, 3);
    set.Add(set.Gauge("brook_test_table_rows", "Rows held"), {{"table", "a"}}, 3);
    return set.Take();
  });
  (*exposer)->RegisterCollectable(collector);
  const std::string body = Scrape(**exposer);
  std::string output;
  EXPECT_EQ(testing::PromtoolCheckMetrics(body, &output), 0) << output << "\n--- scrape:\n" << body;
}

}  // namespace
}  // namespace brook::metrics
