// The metrics endpoint under connections that never send a request: civetweb
// gives each connection a worker thread until its request has arrived, so
// with too few workers and its default 30 s request timeout a handful of idle
// TCP connections (2 did it with the 2 workers Brook used to ask for) blocked
// every scrape for 30 s. metrics/exposer.cc now asks for kExposerThreads
// workers and a kExposerRequestTimeoutMs request timeout.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "metrics/exposer.h"
#include "tests/testing/raw_tcp.h"

namespace brook::metrics {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::RawConnection;

std::vector<std::unique_ptr<RawConnection>> Hold(const std::string& address, int n) {
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < n; ++i) {
    std::string error;
    auto conn = RawConnection::Connect(address, milliseconds(3000), &error);
    EXPECT_NE(conn, nullptr) << "connection " << i << ": " << error;
    if (conn) held.push_back(std::move(conn));
  }
  return held;
}

// Milliseconds a scrape took; -1 (and a test failure) if it failed or took
// longer than `limit`.
int64_t TimedScrape(const std::string& address, milliseconds limit) {
  const auto start = Clock::now();
  std::string error;
  auto r = testing::BoundedHttpGet(address, "/metrics", limit, &error);
  EXPECT_TRUE(r.has_value()) << error;
  if (!r) return -1;
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("brook_build_info"), std::string::npos);
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

TEST(MetricsExposerSlowClientsTest, IdleConnectionsFewerThanTheWorkersCostScrapesNothing) {
  auto exposer = MetricsExposer::Start("127.0.0.1:0");
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const std::string address = (*exposer)->address();
  auto held = Hold(address, kExposerThreads / 2);
  // Answered at once, not after the held connections time out.
  for (int i = 0; i < 3; ++i) {
    const int64_t ms = TimedScrape(address, milliseconds(kExposerRequestTimeoutMs / 2));
    EXPECT_GE(ms, 0);
  }
}

TEST(MetricsExposerSlowClientsTest, ManyIdleAndDribblingConnectionsOnlyDelayScrapesBriefly) {
  auto exposer = MetricsExposer::Start("127.0.0.1:0");
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const std::string address = (*exposer)->address();
  // Past the worker count: half send nothing, half a byte a second of a
  // request that never ends.
  constexpr int kHeld = 60;
  auto idle = Hold(address, kHeld / 2);
  auto dribbling = Hold(address, kHeld / 2);
  absl::Notification stop;
  std::thread dribbler([&] {
    const std::string bytes = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaa";
    for (size_t k = 0; !stop.HasBeenNotified(); ++k) {
      for (auto& c : dribbling) c->SendByteNow(bytes[std::min(k, bytes.size() - 1)]);
      stop.WaitForNotificationWithTimeout(absl::Seconds(1));
    }
  });
  // Each held connection has at most the request timeout; they are taken
  // kExposerThreads at a time, so a scrape waits about
  // ceil(kHeld / kExposerThreads) timeouts at most (the old settings: minutes).
  const int64_t bound_ms =
      ((kHeld + kExposerThreads - 1) / kExposerThreads) * kExposerRequestTimeoutMs + 2000;
  for (int i = 0; i < 2; ++i) {
    const int64_t ms = TimedScrape(address, milliseconds(bound_ms));
    EXPECT_GE(ms, 0);
  }
  stop.Notify();
  dribbler.join();
}

TEST(MetricsExposerSlowClientsTest, AnUnfinishedRequestIsDroppedAfterTheRequestTimeout) {
  auto exposer = MetricsExposer::Start("127.0.0.1:0");
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  std::string error;
  auto silent = RawConnection::Connect((*exposer)->address(), milliseconds(3000), &error);
  ASSERT_NE(silent, nullptr) << error;
  auto dribbling = RawConnection::Connect((*exposer)->address(), milliseconds(3000), &error);
  ASSERT_NE(dribbling, nullptr) << error;
  ASSERT_TRUE(dribbling->Send("GET /metrics HTTP/1.1\r\nX-Slow: "));
  const auto start = Clock::now();
  const auto limit = milliseconds(kExposerRequestTimeoutMs + 3000);
  // The dribbler keeps sending (every 200 ms) and is still cut off: the
  // timeout bounds the whole request, not the gap between bytes.
  bool closed = false;
  for (int i = 0; !closed && Clock::now() - start < limit; ++i) {
    dribbling->SendByteNow('a');
    closed = dribbling->ReadUntilClosed(milliseconds(200));
  }
  EXPECT_TRUE(closed) << "a dribbled request held its connection past the request timeout";
  const auto left = std::chrono::duration_cast<milliseconds>(limit - (Clock::now() - start));
  EXPECT_TRUE(silent->ReadUntilClosed(std::max(left, milliseconds(0))))
      << "a silent connection was held past the request timeout";
  EXPECT_LT(Clock::now() - start, limit);
}

}  // namespace
}  // namespace brook::metrics
