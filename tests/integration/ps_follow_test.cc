// A follower of real `brook ps` processes (2 shards on 127.0.0.1, ports
// picked at run time) over gRPC: an empty cursor says "copy everything";
// after pushes the change log lists exactly the pushed keys, without the
// job's prefix; ScanRows streams every row with its weights; a shard killed
// with -9 and restarted, or a change log too small for what was pushed,
// says "copy everything" again.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "ps/client/grpc_ps_client.h"
#include "ps/client/prefixed_ps_client.h"
#include "tests/testing/http_get.h"
#include "tests/testing/process.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using std::chrono::milliseconds;
using TableKeys = std::vector<std::pair<std::string, std::vector<uint64_t>>>;

constexpr int kShards = 2;
constexpr int kFollowDim = 2;

struct Cluster {
  std::vector<testing::PsProcess> ps;
  std::vector<std::string> addresses;
  std::unique_ptr<ps::GrpcPsClient> client;
};

// kShards `brook ps` processes with `extra` flags and a client over them;
// empty `error` when it worked.
Cluster StartCluster(const std::vector<std::string>& extra, std::string* error) {
  Cluster c;
  for (int i = 0; i < kShards; ++i) {
    std::optional<testing::PsProcess> p =
        testing::StartBrookPs(i, kShards, extra, milliseconds(20000), error);
    if (!p.has_value()) return c;
    c.addresses.push_back(p->address);
    c.ps.push_back(std::move(*p));
  }
  ps::GrpcPsClientOptions o;
  o.addresses = c.addresses;
  o.deadline = absl::Seconds(20);
  absl::StatusOr<std::unique_ptr<ps::GrpcPsClient>> client = ps::GrpcPsClient::Create(o);
  if (!client.ok()) {
    *error = client.status().ToString();
    return c;
  }
  c.client = std::move(*client);
  if (absl::Status s = c.client->WaitForReady(absl::Seconds(20)); !s.ok()) *error = s.ToString();
  return c;
}

std::vector<uint64_t> Keys(uint64_t from, uint64_t n) {
  std::vector<uint64_t> keys(n);
  std::iota(keys.begin(), keys.end(), from);
  return keys;
}

// Pushes gradient -1 to every key: with CounterTable each row counts its pushes.
absl::Status PushOnce(ps::PsClient& c, const std::vector<uint64_t>& keys) {
  return c.Push("t", keys, std::vector<float>(keys.size() * kFollowDim, -1.0f), 1);
}

TEST(PsFollowTest, AFollowerCopiesOnceThenReadsOnlyTheChanges) {
  std::string error;
  Cluster cluster = StartCluster({}, &error);
  ASSERT_TRUE(error.empty()) << error;
  ps::PrefixedPsClient job(cluster.client.get(), "job-1/");
  BROOK_ASSERT_OK(job.CreateTable(testing::CounterTable("t", kFollowDim)));
  BROOK_ASSERT_OK(job.CreateDense({testing::CounterDense("w", {3})}));

  // No cursor yet: copy everything, from every shard's head.
  absl::StatusOr<ps::ChangeSet> start = job.ChangesSince("", ps::ChangeCursor{}, 1000);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_TRUE(start->full_sync_needed);
  EXPECT_TRUE(start->tables.empty());
  ASSERT_EQ(start->cursor.next.size(), size_t{kShards});

  // Pushed after the cursor: listed, without the job's prefix.
  const std::vector<uint64_t> keys = Keys(1000, 100);
  BROOK_ASSERT_OK(PushOnce(job, keys));
  BROOK_ASSERT_OK(job.PushDense("w", std::vector<float>(3, -1.0f), 1));
  // Another job's pushes on the same PS are not this follower's business.
  ps::PrefixedPsClient other(cluster.client.get(), "job-2/");
  BROOK_ASSERT_OK(other.CreateTable(testing::CounterTable("t", kFollowDim)));
  BROOK_ASSERT_OK(PushOnce(other, Keys(5, 3)));

  absl::StatusOr<ps::ChangeSet> changes = job.ChangesSince("", start->cursor, 1000);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_FALSE(changes->full_sync_needed);
  EXPECT_EQ(changes->tables, (TableKeys{{"t", keys}}));
  EXPECT_EQ(changes->dense, std::vector<std::string>{"w"});

  // The full copy: every row of both shards once, with its weights.
  std::map<uint64_t, std::vector<float>> rows;
  BROOK_ASSERT_OK(job.ScanRows(
      "t", [&](absl::Span<const uint64_t> k, absl::Span<const float> w) -> absl::Status {
        EXPECT_EQ(w.size(), k.size() * kFollowDim);
        for (size_t i = 0; i < k.size(); ++i) {
          EXPECT_TRUE(rows.emplace(k[i], std::vector<float>(w.begin() + i * kFollowDim,
                                                            w.begin() + (i + 1) * kFollowDim))
                          .second)
              << k[i];
        }
        return absl::OkStatus();
      }));
  ASSERT_EQ(rows.size(), keys.size());
  for (uint64_t k : keys) EXPECT_EQ(rows[k], std::vector<float>(kFollowDim, 1.0f)) << k;
  EXPECT_EQ(job.ScanRows("absent", [](auto, auto) { return absl::OkStatus(); }).code(),
            absl::StatusCode::kNotFound);

  // Caught up; then exactly what was pushed since.
  absl::StatusOr<ps::ChangeSet> none = job.ChangesSince("", changes->cursor, 1000);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->full_sync_needed);
  EXPECT_TRUE(none->tables.empty());
  EXPECT_TRUE(none->dense.empty());
  const std::vector<uint64_t> some = Keys(1010, 10);
  BROOK_ASSERT_OK(PushOnce(job, some));
  // Rounds of 3 keys a shard: the client reads on until it has them all.
  absl::StatusOr<ps::ChangeSet> more = job.ChangesSince("", none->cursor, 3);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(more->tables, (TableKeys{{"t", some}}));

  // The gauges.
  for (const char* name : {"brook_ps_change_log_bytes", "brook_ps_change_log_oldest_sequence",
                           "brook_ps_change_log_next_sequence"}) {
    std::optional<double> v = testing::ScrapeMetric(cluster.ps[0].metrics_address, name, &error);
    ASSERT_TRUE(v.has_value()) << name << ": " << error;
    EXPECT_GT(*v, 0) << name;
  }

  // Shard 1 killed and started again on its port: its process (and its
  // positions) are new, so the follower copies everything again.
  ASSERT_TRUE(cluster.ps[1].process->Signal(SIGKILL));
  ASSERT_TRUE(cluster.ps[1].process->Wait(milliseconds(10000)).has_value());
  std::optional<testing::PsProcess> again =
      testing::StartBrookPs(1, kShards, {}, milliseconds(20000), &error, cluster.addresses[1]);
  ASSERT_TRUE(again.has_value()) << error;
  absl::StatusOr<ps::ChangeSet> restarted = job.ChangesSince("", more->cursor, 1000);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_TRUE(restarted->full_sync_needed);
  EXPECT_TRUE(restarted->tables.empty());
  EXPECT_NE(restarted->cursor.incarnation, more->cursor.incarnation);
  // From the new cursor on, changes are read again.
  BROOK_ASSERT_OK(job.CreateTable(testing::CounterTable("t", kFollowDim)));
  BROOK_ASSERT_OK(PushOnce(job, some));
  absl::StatusOr<ps::ChangeSet> after = job.ChangesSince("", restarted->cursor, 1000);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_FALSE(after->full_sync_needed);
  EXPECT_EQ(after->tables, (TableKeys{{"t", some}}));
}

TEST(PsFollowTest, AChangeLogTooSmallForWhatWasPushedMeansCopyEverything) {
  std::string error;
  Cluster cluster = StartCluster({"--change-log-mib", "0.01"}, &error);  // ~10 KiB
  ASSERT_TRUE(error.empty()) << error;
  BROOK_ASSERT_OK(cluster.client->CreateTable(testing::CounterTable("t", kFollowDim)));
  absl::StatusOr<ps::ChangeSet> start = cluster.client->ChangesSince("", ps::ChangeCursor{}, 1000);
  ASSERT_TRUE(start.ok()) << start.status();
  // A small push fits...
  BROOK_ASSERT_OK(PushOnce(*cluster.client, Keys(0, 10)));
  absl::StatusOr<ps::ChangeSet> small = cluster.client->ChangesSince("", start->cursor, 1000);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_FALSE(small->full_sync_needed);
  EXPECT_EQ(small->tables, (TableKeys{{"t", Keys(0, 10)}}));
  // ...8000 keys (64 KB of them) do not.
  for (int i = 0; i < 4; ++i) BROOK_ASSERT_OK(PushOnce(*cluster.client, Keys(100, 2000)));
  absl::StatusOr<ps::ChangeSet> overflowed = cluster.client->ChangesSince("", small->cursor, 1000);
  ASSERT_TRUE(overflowed.ok()) << overflowed.status();
  EXPECT_TRUE(overflowed->full_sync_needed);
  EXPECT_TRUE(overflowed->tables.empty());
}

TEST(PsFollowTest, APsWithoutAChangeLogSaysSoAndTheFlagIsDocumented) {
  std::string error;
  Cluster cluster = StartCluster({"--change-log-mib", "0"}, &error);
  ASSERT_TRUE(error.empty()) << error;
  absl::StatusOr<ps::ChangeSet> c = cluster.client->ChangesSince("", ps::ChangeCursor{}, 1000);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_NE(c.status().message().find("--change-log-mib"), std::string::npos) << c.status();

  const testing::CommandResult help = testing::RunCommand({testing::BrookBinary(), "ps", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.output;
  EXPECT_NE(help.output.find("--change-log-mib"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("BROOK_PS_CHANGE_LOG_MIB"), std::string::npos) << help.output;
}

}  // namespace
}  // namespace brook
