// ParameterServer's change log (ChangesSince), ScanRows and the assignments a
// serving replica makes (AssignRows, AssignDense), on memory-only and
// durable PSs (real RocksDB in a temp dir for the tiered cases).
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "ps/client/local_ps_client.h"
#include "ps/client/prefixed_ps_client.h"
#include "ps/parameter_server.h"
#include "tests/testing/test_util.h"
#include "tests/unit/ps/ps_test_util.h"

namespace brook::ps {
namespace {

using TableKeys = std::vector<std::pair<std::string, std::vector<uint64_t>>>;

Changes ChangesOrDie(const ParameterServer& ps, std::string_view prefix, uint64_t since,
                     uint64_t max_keys = 1u << 20) {
  absl::StatusOr<Changes> c = ps.ChangesSince(prefix, since, max_keys);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : Changes{};
}

DenseOptions Dense(const std::string& name, int64_t n) {
  DenseOptions d;
  d.name = name;
  d.shape = {n};
  d.initializer.kind = InitializerKind::kZeros;
  d.optimizer.kind = OptimizerKind::kSgd;
  return d;
}

// Every row of `table` by ScanRows, checking that no key comes twice and
// no chunk is larger than chunk_rows.
std::map<uint64_t, std::vector<float>> ScanAll(const ParameterServer& ps, const std::string& table,
                                               size_t chunk_rows) {
  std::map<uint64_t, std::vector<float>> rows;
  size_t chunks = 0;
  const absl::Status s = ps.ScanRows(
      table, chunk_rows,
      [&](absl::Span<const uint64_t> keys, absl::Span<const float> weights) -> absl::Status {
        EXPECT_LE(keys.size(), chunk_rows);
        EXPECT_FALSE(keys.empty());
        const size_t dim = weights.size() / keys.size();
        EXPECT_EQ(weights.size(), keys.size() * dim);
        for (size_t i = 0; i < keys.size(); ++i) {
          const bool fresh =
              rows.emplace(keys[i], std::vector<float>(weights.begin() + i * dim,
                                                       weights.begin() + (i + 1) * dim))
                  .second;
          EXPECT_TRUE(fresh) << "key " << keys[i] << " seen twice";
        }
        ++chunks;
        return absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_GT(chunks, 0u);
  return rows;
}

TEST(ParameterServerChangesTest, PushPushBatchAndPushDenseAreRecorded) {
  ParameterServer ps(ParameterServerOptions{});
  PS_ASSERT_OK(ps.CreateTable(test::SgdTable("job/a", 2)));
  PS_ASSERT_OK(ps.CreateTable(test::SgdTable("job/b", 2)));
  PS_ASSERT_OK(ps.CreateTable(test::SgdTable("other/c", 2)));
  PS_ASSERT_OK(ps.CreateDense(Dense("job/w", 3)));
  const uint64_t start = ps.ChangeLogHead();

  PS_ASSERT_OK(ps.Push("job/a", {{5, 1}}, {{1, 1, 1, 1}}, PushContext{}));
  PS_ASSERT_OK(
      ps.Push("other/c", std::vector<uint64_t>{9}, std::vector<float>{1, 1}, PushContext{}));
  const std::vector<uint64_t> bk = {7, 3}, ak = {1, 2};
  const std::vector<float> g4(4, 0.5f), g3(3, 0.5f);
  const std::vector<TablePushPart> parts = {{.table = "job/b", .keys = bk, .grads = g4},
                                            {.table = "job/a", .keys = ak, .grads = g4}};
  PS_ASSERT_OK(ps.PushBatch(parts, {}, PushContext{}));
  PS_ASSERT_OK(ps.PushDense("job/w", g3, PushContext{}));
  // One record per call: a push, a push, a batch, a dense push.
  EXPECT_EQ(ps.ChangeLogHead(), start + 4);

  const Changes c = ChangesOrDie(ps, "job/", start);
  EXPECT_EQ(c.tables, (TableKeys{{"job/a", {1, 2, 5}}, {"job/b", {3, 7}}}));
  EXPECT_EQ(c.dense, std::vector<std::string>{"job/w"});
  EXPECT_EQ(c.next, start + 4);
  EXPECT_FALSE(c.more);
  EXPECT_EQ(c.incarnation, ps.startup().incarnation);
  EXPECT_NE(c.incarnation, 0u);

  const ServerStats stats = ps.Stats();
  EXPECT_EQ(stats.change_log.next_sequence, start + 4);
  EXPECT_EQ(stats.change_log.oldest_sequence, start);
  EXPECT_GT(stats.change_log.bytes, 0u);
  EXPECT_EQ(stats.change_log.budget_bytes, ParameterServerOptions{}.change_log_bytes);
}

TEST(ParameterServerChangesTest, RefusedPushesAndDuplicatesRecordNothing) {
  ParameterServer ps(ParameterServerOptions{});
  PS_ASSERT_OK(ps.CreateTable(test::SgdTable("t", 1)));
  const uint64_t start = ps.ChangeLogHead();
  PS_EXPECT_CODE(ps.Push("t", {{1, 1}}, {{1, 1}}, PushContext{}),
                 absl::StatusCode::kInvalidArgument);  // duplicate keys
  PS_EXPECT_CODE(ps.Push("nope", std::vector<uint64_t>{1}, std::vector<float>{1}, PushContext{}),
                 absl::StatusCode::kNotFound);
  PushContext ctx;
  ctx.client_id = 7;
  ctx.sequence = 1;
  PS_ASSERT_OK(ps.Push("t", {1}, {1}, ctx));
  EXPECT_EQ(ps.ChangeLogHead(), start + 1);
  absl::StatusOr<PushOutcome> again = ps.Push("t", {1}, {1}, ctx);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, PushOutcome::kDuplicate);
  EXPECT_EQ(ps.ChangeLogHead(), start + 1);
}

TEST(ParameterServerChangesTest, MaxKeysAndOverflowToOutOfRange) {
  ParameterServerOptions o;
  o.change_log_bytes = 8 << 10;
  ParameterServer ps(o);
  PS_ASSERT_OK(ps.CreateTable(test::SgdTable("t", 1)));
  const uint64_t start = ps.ChangeLogHead();
  for (uint64_t k = 0; k < 3; ++k) PS_ASSERT_OK(ps.Push("t", {k}, {1}, PushContext{}));
  Changes c = ChangesOrDie(ps, "", start, /*max_keys=*/2);
  EXPECT_EQ(c.tables, (TableKeys{{"t", {0, 1}}}));
  EXPECT_TRUE(c.more);
  c = ChangesOrDie(ps, "", c.next, 2);
  EXPECT_EQ(c.tables, (TableKeys{{"t", {2}}}));
  EXPECT_FALSE(c.more);
  // Past the budget: the start is gone.
  std::vector<uint64_t> keys(512);
  std::iota(keys.begin(), keys.end(), 100);
  const std::vector<float> grads(keys.size(), 1.0f);
  for (int i = 0; i < 8; ++i) PS_ASSERT_OK(ps.Push("t", keys, grads, PushContext{}));
  PS_EXPECT_CODE(ps.ChangesSince("", start, 100), absl::StatusCode::kOutOfRange);
  EXPECT_LE(ps.Stats().change_log.bytes, o.change_log_bytes);
  // From the head on, all is well again.
  const uint64_t head = ps.ChangeLogHead();
  PS_ASSERT_OK(ps.Push("t", {1}, {1}, PushContext{}));
  EXPECT_EQ(ChangesOrDie(ps, "", head).tables, (TableKeys{{"t", {1}}}));
}

TEST(ParameterServerChangesTest, OffRecordsNothingAndSaysSo) {
  ParameterServerOptions o;
  o.change_log_bytes = 0;
  ParameterServer ps(o);
  PS_ASSERT_OK(ps.CreateTable(test::SgdTable("t", 1)));
  PS_ASSERT_OK(ps.Push("t", {1}, {1}, PushContext{}));
  PS_EXPECT_CODE(ps.ChangesSince("", 1, 100), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ps.Stats().change_log.bytes, 0u);
}

TEST(ParameterServerChangesTest, EvictedRowsAreRecorded) {
  ParameterServer ps(ParameterServerOptions{});
  TableOptions t = test::SgdTable("t", 1);
  t.ttl_steps = 10;
  PS_ASSERT_OK(ps.CreateTable(t));
  PushContext ctx;
  ctx.step = 100;
  PS_ASSERT_OK(ps.Push("t", {{4, 8}}, {{1, 1}}, ctx));
  const uint64_t head = ps.ChangeLogHead();
  EXPECT_EQ(ps.Evict(200), 2u);
  EXPECT_EQ(ChangesOrDie(ps, "", head).tables, (TableKeys{{"t", {4, 8}}}));
}

TEST(ParameterServerChangesTest, AssignRowsCreatesAndOverwritesAndIsRecorded) {
  ParameterServer ps(ParameterServerOptions{});
  TableOptions t = test::SgdTable("t", 2);
  t.optimizer.kind = OptimizerKind::kAdagrad;
  t.optimizer.initial_accumulator = 0.25f;
  PS_ASSERT_OK(ps.CreateTable(t));
  PS_ASSERT_OK(ps.Push("t", {1}, {{1, 1}}, PushContext{}));
  std::map<uint64_t, std::vector<float>> slots_before;
  PS_ASSERT_OK(
      ps.ScanTable("t", [&](uint64_t key, absl::Span<const float>, absl::Span<const float> slots) {
        slots_before[key] = std::vector<float>(slots.begin(), slots.end());
      }));
  const uint64_t head = ps.ChangeLogHead();
  PS_ASSERT_OK(ps.AssignRows("t", {{1, 2}}, {{10, 11, 20, 21}}));
  EXPECT_EQ(test::PullOrDie(ps, "t", {1, 2}, 2), (std::vector<float>{10, 11, 20, 21}));
  EXPECT_EQ(ChangesOrDie(ps, "", head).tables, (TableKeys{{"t", {1, 2}}}));
  // Key 1 kept its slots; key 2 has Adagrad's initial ones.
  std::map<uint64_t, std::vector<float>> slots_after;
  PS_ASSERT_OK(
      ps.ScanTable("t", [&](uint64_t key, absl::Span<const float>, absl::Span<const float> slots) {
        slots_after[key] = std::vector<float>(slots.begin(), slots.end());
      }));
  EXPECT_EQ(slots_after[1], slots_before[1]);
  EXPECT_EQ(slots_after[2], (std::vector<float>{0.25f, 0.25f}));
  EXPECT_EQ(ps.Stats().tables[0].rows, 2u);

  PS_EXPECT_CODE(ps.AssignRows("t", {3}, {1}), absl::StatusCode::kInvalidArgument);
  PS_EXPECT_CODE(ps.AssignRows("t", {{3, 3}}, {{1, 1, 1, 1}}), absl::StatusCode::kInvalidArgument);
  PS_EXPECT_CODE(ps.AssignRows("nope", {3}, {{1, 1}}), absl::StatusCode::kNotFound);
}

TEST(ParameterServerChangesTest, AssignRowsPastTheBudgetWithoutATierIsRefused) {
  ParameterServer ps(ParameterServerOptions{});
  TableOptions t = test::SgdTable("t", 4);
  t.memory_budget_bytes = 2 * 4 * sizeof(float);  // two rows
  PS_ASSERT_OK(ps.CreateTable(t));
  PS_ASSERT_OK(ps.AssignRows("t", {{1, 2}}, std::vector<float>(8, 1.0f)));
  PS_EXPECT_CODE(ps.AssignRows("t", {3}, std::vector<float>(4, 1.0f)),
                 absl::StatusCode::kResourceExhausted);
  // Existing rows need no room.
  PS_ASSERT_OK(ps.AssignRows("t", {{2, 1}}, std::vector<float>(8, 3.0f)));
}

TEST(ParameterServerChangesTest, AssignDenseChecksTheSize) {
  ParameterServer ps(ParameterServerOptions{});
  PS_ASSERT_OK(ps.CreateDense(Dense("w", 3)));
  const uint64_t head = ps.ChangeLogHead();
  PS_ASSERT_OK(ps.AssignDense("w", {{1, 2, 3}}));
  std::vector<float> out(3);
  PS_ASSERT_OK(ps.PullDense("w", absl::MakeSpan(out)));
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(ChangesOrDie(ps, "", head).dense, std::vector<std::string>{"w"});
  const absl::Status s = ps.AssignDense("w", {{1, 2}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'w'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("2 values"), std::string::npos) << s;
  EXPECT_NE(s.message().find("has 3"), std::string::npos) << s;
}

TEST(ParameterServerChangesTest, ScanRowsCoversEveryRowOnceInBoundedChunks) {
  ParameterServer ps(ParameterServerOptions{});
  PS_ASSERT_OK(ps.CreateTable(test::SgdTable("t", 3)));
  std::vector<uint64_t> keys(1000);
  std::iota(keys.begin(), keys.end(), 0);
  std::vector<float> weights;
  for (uint64_t k : keys) {
    for (int j = 0; j < 3; ++j) weights.push_back(static_cast<float>(k * 10 + j));
  }
  PS_ASSERT_OK(ps.AssignRows("t", keys, weights));
  const std::map<uint64_t, std::vector<float>> rows = ScanAll(ps, "t", 64);
  ASSERT_EQ(rows.size(), keys.size());
  for (const auto& [k, w] : rows) {
    EXPECT_EQ(w, (std::vector<float>{k * 10.0f, k * 10.0f + 1, k * 10.0f + 2})) << k;
  }
  PS_EXPECT_CODE(ps.ScanRows("t", 0, [](auto, auto) { return absl::OkStatus(); }),
                 absl::StatusCode::kInvalidArgument);
  PS_EXPECT_CODE(ps.ScanRows("nope", 4, [](auto, auto) { return absl::OkStatus(); }),
                 absl::StatusCode::kNotFound);
  // The visitor's error stops the scan and comes back; it may call the PS.
  int calls = 0;
  const absl::Status s = ps.ScanRows("t", 10, [&](auto, auto) {
    ++calls;
    EXPECT_EQ(test::PullOrDie(ps, "t", {5}, 3), (std::vector<float>{50, 51, 52}));
    return absl::AbortedError("enough");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(calls, 1);
}

// A tiered table: a budget of 50 rows, 2000 rows assigned, most of them in
// RocksDB. Assign, scan and pull see every row, wherever it lives.
TEST(ParameterServerChangesTest, AssignAndScanOnATieredTable) {
  testing::TempDir dir;
  ParameterServerOptions o;
  o.data_dir = dir.path();
  o.rocksdb.block_cache_bytes = 4 << 20;
  o.rocksdb.write_buffer_bytes = 2 << 20;
  absl::StatusOr<std::unique_ptr<ParameterServer>> opened = ParameterServer::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ParameterServer& ps = **opened;
  constexpr int kDim = 4;
  PS_ASSERT_OK(ps.CreateTable(test::AdamTable("t", kDim, 3, /*budget_rows=*/50)));
  std::vector<uint64_t> keys(2000);
  std::iota(keys.begin(), keys.end(), 1);
  std::vector<float> weights;
  for (uint64_t k : keys) {
    for (int j = 0; j < kDim; ++j) weights.push_back(static_cast<float>(k) + 0.25f * j);
  }
  // In parts, as a follower assigns chunks.
  for (size_t at = 0; at < keys.size(); at += 250) {
    PS_ASSERT_OK(ps.AssignRows("t", absl::MakeConstSpan(keys).subspan(at, 250),
                               absl::MakeConstSpan(weights).subspan(at * kDim, 250 * kDim)));
  }
  const TableStats stats = ps.Stats().tables[0];
  EXPECT_GT(stats.tier_evictions, 0u) << "nothing reached RocksDB";
  EXPECT_EQ(test::PullOrDie(ps, "t", keys, kDim), weights);

  // Overwrite a few rows that now live in RocksDB (the first ones assigned).
  const std::vector<uint64_t> old_keys = {1, 2, 3};
  PS_ASSERT_OK(ps.AssignRows("t", old_keys, std::vector<float>(3 * kDim, -1.0f)));
  for (size_t i = 0; i < 3 * kDim; ++i) weights[i] = -1.0f;
  EXPECT_EQ(test::PullOrDie(ps, "t", keys, kDim), weights);

  const std::map<uint64_t, std::vector<float>> rows = ScanAll(ps, "t", 100);
  ASSERT_EQ(rows.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto it = rows.find(keys[i]);
    ASSERT_NE(it, rows.end()) << keys[i];
    EXPECT_EQ(it->second,
              std::vector<float>(weights.begin() + i * kDim, weights.begin() + (i + 1) * kDim))
        << keys[i];
  }
}

TEST(ParameterServerChangesTest, ARestoreOrAnImportForcesFollowersToCopyEverything) {
  testing::TempDir dir;
  ParameterServer ps(ParameterServerOptions{});
  PS_ASSERT_OK(ps.CreateTable(test::SgdTable("t", 1)));
  PS_ASSERT_OK(ps.Push("t", {1}, {1}, PushContext{}));
  CheckpointOptions co;
  co.dir = dir.Join("ckpt");
  PS_ASSERT_OK(ps.Checkpoint(co));
  const uint64_t head = ps.ChangeLogHead();
  PS_ASSERT_OK(ps.Restore(co.dir));
  PS_EXPECT_CODE(ps.ChangesSince("", head, 100), absl::StatusCode::kOutOfRange);
  const uint64_t after = ps.ChangeLogHead();
  ImportOptions io;
  io.dir = co.dir;
  io.to_prefix = "copy/";
  PS_ASSERT_OK(ps.ImportTables(io));
  PS_EXPECT_CODE(ps.ChangesSince("", after, 100), absl::StatusCode::kOutOfRange);
}

TEST(ParameterServerChangesTest, ARestartIsANewIncarnation) {
  testing::TempDir dir;
  ParameterServerOptions o;
  o.data_dir = dir.path();
  uint64_t first = 0;
  {
    absl::StatusOr<std::unique_ptr<ParameterServer>> ps = ParameterServer::Open(o);
    ASSERT_TRUE(ps.ok()) << ps.status();
    PS_ASSERT_OK((*ps)->CreateTable(test::SgdTable("t", 1)));
    PS_ASSERT_OK((*ps)->Push("t", {1}, {1}, PushContext{}));
    first = ChangesOrDie(**ps, "", 0).incarnation;
    EXPECT_NE(first, 0u);
  }
  absl::StatusOr<std::unique_ptr<ParameterServer>> ps = ParameterServer::Open(o);
  ASSERT_TRUE(ps.ok()) << ps.status();
  const Changes c = ChangesOrDie(**ps, "", 0);
  EXPECT_NE(c.incarnation, first);
  // The WAL's replay is not in the log: the restarted PS starts it afresh.
  EXPECT_TRUE(c.tables.empty());
}

// The client side over in-process shards: the cursor, the prefix stripped,
// a restarted shard noticed.
TEST(ParameterServerChangesTest, LocalAndPrefixedClientsFollowTheChanges) {
  LocalPsCluster cluster(2);
  PrefixedPsClient job(cluster.client.get(), "job/");
  PS_ASSERT_OK(job.CreateTable(test::SgdTable("t", 1)));
  PS_ASSERT_OK(job.CreateDense({Dense("w", 2)}));
  absl::StatusOr<ChangeSet> first = job.ChangesSince("", ChangeCursor{}, 100);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->full_sync_needed);
  ASSERT_EQ(first->cursor.next.size(), 2u);
  EXPECT_NE(first->cursor.incarnation, 0u);

  std::vector<uint64_t> keys(40);
  std::iota(keys.begin(), keys.end(), 0);
  PS_ASSERT_OK(job.Push("t", keys, std::vector<float>(keys.size(), 1.0f), 1));
  PS_ASSERT_OK(job.PushDense("w", {{1, 1}}, 1));
  // Small rounds: the client loops until it caught up.
  absl::StatusOr<ChangeSet> c = job.ChangesSince("", first->cursor, 1);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->full_sync_needed);
  EXPECT_EQ(c->tables, (TableKeys{{"t", keys}}));
  EXPECT_EQ(c->dense, std::vector<std::string>{"w"});
  // Caught up: nothing new.
  absl::StatusOr<ChangeSet> none = job.ChangesSince("", c->cursor, 100);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->full_sync_needed);
  EXPECT_TRUE(none->tables.empty());

  size_t scanned = 0;
  PS_ASSERT_OK(job.ScanRows("t", [&](absl::Span<const uint64_t> k, absl::Span<const float> w) {
    scanned += k.size();
    EXPECT_EQ(w.size(), k.size());
    return absl::OkStatus();
  }));
  EXPECT_EQ(scanned, keys.size());

  // Shard 1 replaced by a new process: the cursor is of no use.
  ParameterServerOptions o;
  o.shard_index = 1;
  o.num_shards = 2;
  ParameterServer restarted(o);
  LocalPsClient other({cluster.shards[0].get(), &restarted});
  absl::StatusOr<ChangeSet> after = other.ChangesSince("job/", c->cursor, 100);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(after->full_sync_needed);
  EXPECT_NE(after->cursor.incarnation, c->cursor.incarnation);
}

}  // namespace
}  // namespace brook::ps
