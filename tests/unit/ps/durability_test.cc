// The PS over a data dir: the RocksDB tier past a table's memory budget, WAL
// replay on restart, full and incremental checkpoints, restore onto another
// shard count, half-written checkpoints. Real RocksDB, real files.
#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "brook/v1/storage.pb.h"
#include "common/part_runner.h"
#include "gtest/gtest.h"
#include "ps/parameter_server.h"
#include "sharding/sharding.h"
#include "storage/rocks_db.h"
#include "storage/wal.h"
#include "tests/testing/test_util.h"
#include "tests/testing/tmpfs.h"
#include "tests/unit/ps/ps_test_util.h"

namespace brook::ps {
namespace {

using test::Dump;
using test::PullOrDie;
using test::StatsOf;
using Rows = std::map<uint64_t, std::vector<float>>;

constexpr int kDim = 8;

TableOptions AdamTable(const std::string& name, uint64_t budget_rows) {
  return test::AdamTable(name, kDim, 11, budget_rows);
}

DenseOptions Dense(const std::string& name, int64_t n) {
  DenseOptions d;
  d.name = name;
  d.shape = {n};
  d.seed = 3;
  d.optimizer.kind = OptimizerKind::kAdagrad;
  d.optimizer.learning_rate = 0.1f;
  return d;
}

ParameterServerOptions DurableOptions(const std::string& dir, bool wal = true) {
  ParameterServerOptions o;
  o.data_dir = dir;
  o.wal = wal;
  o.rocksdb.block_cache_bytes = 8 << 20;
  o.rocksdb.write_buffer_bytes = 4 << 20;
  return o;
}

std::unique_ptr<ParameterServer> OpenOrDie(const ParameterServerOptions& o) {
  absl::StatusOr<std::unique_ptr<ParameterServer>> ps = ParameterServer::Open(o);
  EXPECT_TRUE(ps.ok()) << ps.status();
  return ps.ok() ? std::move(*ps) : nullptr;
}

// Deterministic pushes: batch b touches `per_batch` keys drawn from
// [0, key_space) with gradients that depend on (b, key).
class PushScript {
 public:
  // `helpers` (may be null) goes in every push's PushContext.
  PushScript(uint64_t key_space, int per_batch, uint64_t seed, PartRunner* helpers = nullptr)
      : key_space_(key_space), per_batch_(per_batch), rng_(seed), helpers_(helpers) {}
  absl::Status Run(ParameterServer& ps, const std::string& table, int batches,
                   uint64_t client = 0) {
    for (int b = 0; b < batches; ++b) {
      std::vector<uint64_t> keys;
      std::map<uint64_t, bool> seen;
      while (static_cast<int>(keys.size()) < per_batch_) {
        const uint64_t k = rng_() % key_space_;
        if (seen.emplace(k, true).second) keys.push_back(k);
      }
      std::vector<float> grads(keys.size() * kDim);
      for (size_t i = 0; i < grads.size(); ++i) {
        grads[i] = static_cast<float>((rng_() % 2001)) * 1e-3f - 1.0f;
      }
      PushContext ctx;
      ctx.client_id = client;
      ctx.sequence = ++sequence_;
      ctx.step = static_cast<int64_t>(sequence_);
      ctx.helpers = helpers_;
      absl::StatusOr<PushOutcome> out = ps.Push(table, keys, grads, ctx);
      if (!out.ok()) return out.status();
      last_keys_ = keys;
      last_grads_ = grads;
      last_ctx_ = ctx;
    }
    return absl::OkStatus();
  }
  const std::vector<uint64_t>& last_keys() const { return last_keys_; }
  const std::vector<float>& last_grads() const { return last_grads_; }
  const PushContext& last_ctx() const { return last_ctx_; }

 private:
  uint64_t key_space_;
  int per_batch_;
  std::mt19937_64 rng_;
  PartRunner* helpers_;
  uint64_t sequence_ = 0;
  std::vector<uint64_t> last_keys_;
  std::vector<float> last_grads_;
  PushContext last_ctx_;
};

void ExpectSameRows(const Rows& got, const Rows& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [key, row] : want) {
    auto it = got.find(key);
    ASSERT_NE(it, got.end()) << "key " << key << " missing";
    ASSERT_EQ(it->second, row) << "key " << key;
  }
}

std::vector<float> PullDenseOrDie(ParameterServer& ps, const std::string& name, size_t n) {
  std::vector<float> out(n);
  const absl::Status s = ps.PullDense(name, absl::MakeSpan(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(TierTest, RowsPastTheBudgetMoveToRocksDbAndComeBackIntact) {
  testing::TempDir dir;
  auto tiered = OpenOrDie(DurableOptions(dir.path()));
  ASSERT_NE(tiered, nullptr);
  ParameterServer reference({});
  TableOptions t = AdamTable("emb", 300);
  PS_ASSERT_OK(tiered->CreateTable(t));
  TableOptions unbounded = t;
  unbounded.memory_budget_bytes = 1ull << 30;
  PS_ASSERT_OK(reference.CreateTable(unbounded));
  PushScript a(5000, 128, 1), b(5000, 128, 1);
  PS_ASSERT_OK(a.Run(*tiered, "emb", 120));
  PS_ASSERT_OK(b.Run(reference, "emb", 120));

  const TableStats s = StatsOf(*tiered, "emb");
  EXPECT_TRUE(s.tiered);
  EXPECT_GT(s.tier_evictions, 1000u);
  EXPECT_GT(s.tier_promotions, 0u);  // pushes brought cold rows back
  EXPECT_GT(s.cold_hits, 0u);
  EXPECT_LE(s.rows, 300u + 128u);  // memory holds about the budget
  EXPECT_EQ(s.tier_errors, 0u);
  EXPECT_EQ(s.budget_rejections, 0u);
  // Every row, weights and Adam slots, equals the unbounded table's.
  ExpectSameRows(Dump(*tiered, "emb"), Dump(reference, "emb"));
  // Pulls of cold rows read RocksDB without bringing them in.
  std::vector<uint64_t> keys(4000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  EXPECT_EQ(PullOrDie(*tiered, "emb", keys, kDim), PullOrDie(reference, "emb", keys, kDim));
}

TEST(TierTest, TableUnderItsBudgetNeverAsksRocksDb) {
  testing::TempDir dir;
  auto ps = OpenOrDie(DurableOptions(dir.path()));
  ASSERT_NE(ps, nullptr);
  PS_ASSERT_OK(ps->CreateTable(AdamTable("emb", 100000)));
  PushScript script(5000, 128, 2);
  PS_ASSERT_OK(script.Run(*ps, "emb", 40));
  std::vector<uint64_t> keys(6000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;  // includes absent keys
  PullOrDie(*ps, "emb", keys, kDim);
  const TableStats s = StatsOf(*ps, "emb");
  EXPECT_GT(s.hot_hits, 0u);
  EXPECT_EQ(s.cold_hits, 0u);
  EXPECT_EQ(s.cold_misses, 0u);
  EXPECT_EQ(s.tier_evictions, 0u);
}

// The data dir on a tmpfs that fills up: the push whose WAL write failed is
// in memory but not acknowledged; its retry (same client and sequence) is
// refused while the disk is full, then acknowledged as a duplicate once space
// returns, and counts once; pushes in between are refused before they change
// anything; a restart serves exactly what memory held.
TEST(DurabilityTest, DiskFullRefusesPushesAndARetryCountsOnceWhenSpaceReturns) {
  testing::TempDir dir;
  std::string why;
  auto fs = testing::ScopedTmpfs::Mount(dir.Join("data"), 2 << 20, &why);
  if (fs == nullptr) GTEST_SKIP() << "SKIPPED: " << why;
  TableOptions counter;
  counter.name = "counter";
  counter.dim = 64;
  counter.initializer.kind = InitializerKind::kZeros;
  counter.optimizer.kind = OptimizerKind::kSgd;
  counter.optimizer.learning_rate = 1.0f;
  std::vector<uint64_t> keys(256);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = 7919 * i + 1;
  const std::vector<float> minus_one(keys.size() * 64, -1.0f);
  std::vector<float> held;
  {
    auto ps = OpenOrDie(DurableOptions(fs->path()));
    ASSERT_NE(ps, nullptr);
    PS_ASSERT_OK(ps->CreateTable(counter));
    uint64_t sequence = 0;
    absl::StatusOr<PushOutcome> pushed;
    float acked = 0;
    do {
      pushed = ps->Push("counter", keys, minus_one, {.client_id = 3, .sequence = ++sequence});
      if (pushed.ok()) ++acked;
    } while (pushed.ok() && sequence < 10000);
    ASSERT_FALSE(pushed.ok()) << "2 MiB never filled up";
    EXPECT_TRUE(absl::IsResourceExhausted(pushed.status())) << pushed.status();
    EXPECT_NE(pushed.status().message().find("No space left on device"), std::string::npos);
    const uint64_t failed = sequence;
    ASSERT_TRUE(ps->Stats().wal.has_value());
    EXPECT_TRUE(ps->Stats().wal->failing);

    // Memory holds the unacknowledged push (whole); new pushes and its retry
    // are refused and change nothing.
    EXPECT_EQ(PullOrDie(*ps, "counter", {keys[0]}, 64)[0], acked + 1);
    EXPECT_TRUE(absl::IsResourceExhausted(
        ps->Push("counter", keys, minus_one, {.client_id = 3, .sequence = failed + 1}).status()));
    EXPECT_TRUE(absl::IsResourceExhausted(
        ps->Push("counter", keys, minus_one, {.client_id = 3, .sequence = failed}).status()));
    EXPECT_EQ(PullOrDie(*ps, "counter", {keys[0]}, 64)[0], acked + 1);

    ASSERT_TRUE(fs->Resize(64 << 20, &why)) << why;
    absl::StatusOr<PushOutcome> retry =
        ps->Push("counter", keys, minus_one, {.client_id = 3, .sequence = failed});
    ASSERT_TRUE(retry.ok()) << retry.status();
    EXPECT_EQ(*retry, PushOutcome::kDuplicate);
    EXPECT_FALSE(ps->Stats().wal->failing);
    PS_ASSERT_OK(
        ps->Push("counter", keys, minus_one, {.client_id = 3, .sequence = failed + 1}).status());
    held = PullOrDie(*ps, "counter", keys, 64);
    EXPECT_EQ(held, std::vector<float>(held.size(), acked + 2));
  }
  auto ps = OpenOrDie(DurableOptions(fs->path()));
  ASSERT_NE(ps, nullptr);
  EXPECT_EQ(PullOrDie(*ps, "counter", keys, 64), held);
}

TEST(DurabilityTest, RestartReplaysTheWal) {
  testing::TempDir dir;
  Rows before;
  std::vector<float> dense_before;
  PushScript script(2000, 64, 3);
  {
    auto ps = OpenOrDie(DurableOptions(dir.path()));
    ASSERT_NE(ps, nullptr);
    PS_ASSERT_OK(ps->CreateTable(AdamTable("emb", 500)));
    PS_ASSERT_OK(ps->CreateDense(Dense("w", 33)));
    PS_ASSERT_OK(script.Run(*ps, "emb", 60, /*client=*/7));
    std::vector<float> g(33, 0.25f);
    PushContext ctx{.client_id = 8, .sequence = 1, .step = 1};
    PS_ASSERT_OK(ps->PushDense("w", g, ctx));
    before = Dump(*ps, "emb");
    dense_before = PullDenseOrDie(*ps, "w", 33);
  }  // no checkpoint: everything comes back from the WAL
  auto ps = OpenOrDie(DurableOptions(dir.path()));
  ASSERT_NE(ps, nullptr);
  ExpectSameRows(Dump(*ps, "emb"), before);
  EXPECT_EQ(PullDenseOrDie(*ps, "w", 33), dense_before);
  // A retry of the last acknowledged push is still recognised.
  absl::StatusOr<PushOutcome> retry =
      ps->Push("emb", script.last_keys(), script.last_grads(), script.last_ctx());
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(*retry, PushOutcome::kDuplicate);
  ExpectSameRows(Dump(*ps, "emb"), before);
}

// Pushes applied in parts on helper threads log every stripe's part from
// the thread that applied it; a restart replays them to the same rows as
// the same pushes applied whole, and still knows the last one.
TEST(DurabilityTest, RestartReplaysPushesSplitOverHelpers) {
  testing::TempDir dir;
  constexpr int kKeys = 2100;  // at least Table::kMinSplitPushKeys
  PartRunner helpers(2);
  PushScript split_script(6000, kKeys, 9, &helpers);
  PushScript whole_script(6000, kKeys, 9);
  ParameterServer whole({});
  PS_ASSERT_OK(whole.CreateTable(AdamTable("emb", 10000)));
  PS_ASSERT_OK(whole_script.Run(whole, "emb", 4, /*client=*/7));
  const Rows want = Dump(whole, "emb");
  {
    auto ps = OpenOrDie(DurableOptions(dir.path()));
    ASSERT_NE(ps, nullptr);
    PS_ASSERT_OK(ps->CreateTable(AdamTable("emb", 10000)));
    PS_ASSERT_OK(split_script.Run(*ps, "emb", 4, /*client=*/7));
    EXPECT_EQ(helpers.split_runs(), 4u);
    ExpectSameRows(Dump(*ps, "emb"), want);
  }  // no checkpoint: everything comes back from the WAL
  auto ps = OpenOrDie(DurableOptions(dir.path()));
  ASSERT_NE(ps, nullptr);
  ExpectSameRows(Dump(*ps, "emb"), want);
  absl::StatusOr<PushOutcome> retry =
      ps->Push("emb", split_script.last_keys(), split_script.last_grads(), split_script.last_ctx());
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(*retry, PushOutcome::kDuplicate);
}

// A restarted PS still knows which steps of a work-unit push stream it
// applied (the WAL records carry the stream): the unit's next holder's copy
// of a step pushed before the restart is a duplicate, its parts in a later
// order too; a later step applies.
TEST(DurabilityTest, RestartRemembersPushStreamSteps) {
  testing::TempDir dir;
  const std::vector<uint64_t> keys = {3, 9, 27};
  const std::vector<float> grads(keys.size() * kDim, 0.5f), gw(5, 0.5f);
  auto part = [](uint64_t step, uint64_t p) { return step << kStreamPartBits | p; };
  Rows before;
  std::vector<float> dense_before;
  {
    auto ps = OpenOrDie(DurableOptions(dir.path()));
    ASSERT_NE(ps, nullptr);
    PS_ASSERT_OK(ps->CreateTable(AdamTable("emb", 500)));
    PS_ASSERT_OK(ps->CreateDense(Dense("w", 5)));
    const std::vector<TablePushPart> tables = {{"emb", keys, grads, part(6, 0)}};
    const std::vector<DensePushPart> dense = {{"w", gw, part(6, 1)}};
    PS_ASSERT_OK(
        ps->PushBatch(tables, dense, {.client_id = 11, .step = 6, .stream_id = 900}).status());
    before = Dump(*ps, "emb");
    dense_before = PullDenseOrDie(*ps, "w", 5);
    EXPECT_EQ(ps->Stats().push_streams, 1u);
  }
  auto ps = OpenOrDie(DurableOptions(dir.path()));
  ASSERT_NE(ps, nullptr);
  EXPECT_EQ(ps->Stats().push_streams, 1u);
  const std::vector<TablePushPart> tables = {{"emb", keys, grads, part(6, 0)}};
  const std::vector<DensePushPart> dense = {{"w", gw, part(6, 1)}};
  absl::StatusOr<PushBatchOutcome> again =
      ps->PushBatch(tables, dense, {.client_id = 12, .step = 6, .stream_id = 900});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->tables[0], PushOutcome::kDuplicate);
  EXPECT_EQ(again->dense[0], PushOutcome::kDuplicate);
  ExpectSameRows(Dump(*ps, "emb"), before);
  EXPECT_EQ(PullDenseOrDie(*ps, "w", 5), dense_before);
  const std::vector<TablePushPart> next = {{"emb", keys, grads, part(7, 0)}};
  absl::StatusOr<PushBatchOutcome> later =
      ps->PushBatch(next, {}, {.client_id = 12, .step = 7, .stream_id = 900});
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->tables[0], PushOutcome::kApplied);
}

TEST(DurabilityTest, RestartFromACheckpointPlusTheWalAfterIt) {
  testing::TempDir dir;
  Rows before;
  {
    auto ps = OpenOrDie(DurableOptions(dir.path()));
    ASSERT_NE(ps, nullptr);
    PS_ASSERT_OK(ps->CreateTable(AdamTable("emb", 400)));
    PushScript script(3000, 64, 4);
    PS_ASSERT_OK(script.Run(*ps, "emb", 50));
    absl::StatusOr<CheckpointInfo> c = ps->Checkpoint({});
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_FALSE(c->incremental);
    EXPECT_GT(c->wal_lsn, 0u);
    PS_ASSERT_OK(script.Run(*ps, "emb", 50));
    before = Dump(*ps, "emb");
  }
  auto ps = OpenOrDie(DurableOptions(dir.path()));
  ASSERT_NE(ps, nullptr);
  ExpectSameRows(Dump(*ps, "emb"), before);
  EXPECT_EQ(ps->Checkpoints().size(), 1u);
}

TEST(DurabilityTest, WithoutTheWalARestartReturnsToTheLastCheckpoint) {
  testing::TempDir dir;
  Rows at_checkpoint;
  {
    auto ps = OpenOrDie(DurableOptions(dir.path(), /*wal=*/false));
    ASSERT_NE(ps, nullptr);
    PS_ASSERT_OK(ps->CreateTable(AdamTable("emb", 300)));
    PushScript script(2000, 64, 5);
    PS_ASSERT_OK(script.Run(*ps, "emb", 40));
    ASSERT_TRUE(ps->Checkpoint({}).ok());
    at_checkpoint = Dump(*ps, "emb");
    PS_ASSERT_OK(script.Run(*ps, "emb", 20));
    ASSERT_NE(Dump(*ps, "emb"), at_checkpoint);
  }
  auto ps = OpenOrDie(DurableOptions(dir.path(), /*wal=*/false));
  ASSERT_NE(ps, nullptr);
  ExpectSameRows(Dump(*ps, "emb"), at_checkpoint);
}

// The learning-rate scale is in the WAL: a restart redoes scaled pushes,
// dense pushes and batches with their scale (and unscaled ones, which log no
// scale, with 1), so it reproduces the exact weights and optimizer slots.
TEST(DurabilityTest, RestartReplaysScaledPushesAndBatchesExactly) {
  testing::TempDir dir;
  Rows before;
  std::vector<float> dense_before;
  ParameterServer unscaled({});  // the same pushes without their scale
  PS_ASSERT_OK(unscaled.CreateTable(AdamTable("emb", 100000)));  // memory only: room for all
  PS_ASSERT_OK(unscaled.CreateDense(Dense("w", 17)));
  std::vector<TablePushPart> last_tables;
  std::vector<DensePushPart> last_dense;
  PushContext last_ctx;
  std::vector<std::vector<uint64_t>> keys(2);
  std::vector<std::vector<float>> grads(2);
  std::vector<float> gw(17);
  {
    auto ps = OpenOrDie(DurableOptions(dir.path()));
    ASSERT_NE(ps, nullptr);
    PS_ASSERT_OK(ps->CreateTable(AdamTable("emb", 500)));
    PS_ASSERT_OK(ps->CreateDense(Dense("w", 17)));
    PushScript a(2000, 32, 8), b(2000, 32, 8);
    PS_ASSERT_OK(a.Run(*ps, "emb", 5, /*client=*/3));  // scale 1: logged without one
    PS_ASSERT_OK(b.Run(unscaled, "emb", 5, /*client=*/3));
    std::mt19937_64 rng(12);
    uint64_t sequence = 100;
    for (int i = 0; i < 12; ++i) {
      for (int j = 0; j < 2; ++j) {
        keys[j].clear();
        for (uint64_t k = rng() % 50; keys[j].size() < 40; k += 1 + rng() % 40) {
          keys[j].push_back(k);
        }
        grads[j].resize(keys[j].size() * kDim);
        for (float& g : grads[j]) g = static_cast<float>(rng() % 2001) * 1e-3f - 1.0f;
      }
      for (float& g : gw) g = static_cast<float>(rng() % 2001) * 1e-3f - 1.0f;
      const float scale = 0.15f * static_cast<float>(1 + i % 5);
      PushContext ctx{
          .client_id = 4, .sequence = ++sequence, .step = i, .learning_rate_scale = scale};
      PS_ASSERT_OK(ps->Push("emb", keys[0], grads[0], ctx));
      ctx.sequence = ++sequence;
      PS_ASSERT_OK(ps->PushDense("w", gw, ctx));
      last_tables = {{"emb", keys[1], grads[1], ++sequence}};
      last_dense = {{"w", gw, ++sequence}};
      last_ctx = {.client_id = 4, .step = i, .learning_rate_scale = 2 * scale};
      PS_ASSERT_OK(ps->PushBatch(last_tables, last_dense, last_ctx));
      PS_ASSERT_OK(unscaled.Push("emb", keys[0], grads[0], {}));
      PS_ASSERT_OK(unscaled.PushDense("w", gw, {}));
      PS_ASSERT_OK(unscaled.PushBatch(last_tables, last_dense, {}));
    }
    before = Dump(*ps, "emb");
    dense_before = PullDenseOrDie(*ps, "w", 17);
  }                                          // no checkpoint: everything comes back from the WAL
  ASSERT_NE(Dump(unscaled, "emb"), before);  // the scale mattered
  ASSERT_NE(PullDenseOrDie(unscaled, "w", 17), dense_before);
  auto ps = OpenOrDie(DurableOptions(dir.path()));
  ASSERT_NE(ps, nullptr);
  ExpectSameRows(Dump(*ps, "emb"), before);
  EXPECT_EQ(PullDenseOrDie(*ps, "w", 17), dense_before);
  // The last batch's parts are still known as applied after the restart.
  absl::StatusOr<PushBatchOutcome> retry = ps->PushBatch(last_tables, last_dense, last_ctx);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->tables, std::vector<PushOutcome>{PushOutcome::kDuplicate});
  EXPECT_EQ(retry->dense, std::vector<PushOutcome>{PushOutcome::kDuplicate});
  ExpectSameRows(Dump(*ps, "emb"), before);
}

TEST(CheckpointTest, IncrementalHoldsOnlyChangedRowsAndRestoresOverItsBase) {
  testing::TempDir dir;
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(AdamTable("emb", 100000)));
  PS_ASSERT_OK(ps.CreateDense(Dense("w", 5)));
  PushScript script(1000, 100, 6);
  PS_ASSERT_OK(script.Run(ps, "emb", 30));
  CheckpointOptions full;
  full.dir = dir.Join("full");
  absl::StatusOr<CheckpointInfo> f = ps.Checkpoint(full);
  ASSERT_TRUE(f.ok()) << f.status();
  const uint64_t all_rows = StatsOf(ps, "emb").rows;
  EXPECT_EQ(f->rows, all_rows);

  std::vector<uint64_t> keys = {1, 2, 3, 500, 999};
  std::vector<float> grads(keys.size() * kDim, 0.5f);
  ASSERT_TRUE(ps.Push("emb", keys, grads, {}).ok());
  CheckpointOptions inc;
  inc.dir = dir.Join("inc");
  inc.incremental = true;
  absl::StatusOr<CheckpointInfo> i = ps.Checkpoint(inc);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_TRUE(i->incremental);
  EXPECT_EQ(i->rows, keys.size());
  EXPECT_EQ(i->base_dir, full.dir);

  ParameterServer restored({});
  absl::StatusOr<RestoreInfo> r = restored.Restore(inc.dir);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSameRows(Dump(restored, "emb"), Dump(ps, "emb"));
  EXPECT_EQ(PullDenseOrDie(restored, "w", 5), PullDenseOrDie(ps, "w", 5));
}

TEST(CheckpointTest, IncrementalOfATieredTableIncludesRowsEvictedWhileChanged) {
  testing::TempDir dir;
  auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
  ASSERT_NE(ps, nullptr);
  PS_ASSERT_OK(ps->CreateTable(AdamTable("emb", 200)));
  PushScript script(3000, 100, 7);
  PS_ASSERT_OK(script.Run(*ps, "emb", 30));
  CheckpointOptions full;
  full.dir = dir.Join("full");
  ASSERT_TRUE(ps->Checkpoint(full).ok());
  PS_ASSERT_OK(script.Run(*ps, "emb", 30));  // changes rows, evicts many of them
  EXPECT_GT(StatsOf(*ps, "emb").tier_evictions, 0u);
  CheckpointOptions inc;
  inc.dir = dir.Join("inc");
  inc.incremental = true;
  absl::StatusOr<CheckpointInfo> i = ps->Checkpoint(inc);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_TRUE(i->incremental);

  ParameterServer restored({});
  ASSERT_TRUE(restored.Restore(inc.dir).ok());
  ExpectSameRows(Dump(restored, "emb"), Dump(*ps, "emb"));
}

// Pushes the same script through a client-side routing to `shards` PSs.
void PushRouted(std::vector<std::unique_ptr<ParameterServer>>& shards, const std::string& table,
                int batches, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t table_id = sharding::TableId(table);
  const int n = static_cast<int>(shards.size());
  for (int b = 0; b < batches; ++b) {
    std::vector<std::vector<uint64_t>> keys(n);
    std::vector<std::vector<float>> grads(n);
    std::map<uint64_t, bool> seen;
    for (int i = 0; i < 200; ++i) {
      const uint64_t k = rng() % 5000;
      if (!seen.emplace(k, true).second) continue;
      const int s = sharding::ShardForKey(table_id, k, n);
      keys[s].push_back(k);
      for (int d = 0; d < kDim; ++d) grads[s].push_back(static_cast<float>(rng() % 100) * 0.01f);
    }
    for (int s = 0; s < n; ++s) {
      ASSERT_TRUE(shards[s]->Push(table, keys[s], grads[s], {}).ok());
    }
  }
}

Rows Union(const std::vector<std::unique_ptr<ParameterServer>>& shards, const std::string& table,
           bool check_owner) {
  Rows all;
  const uint64_t table_id = sharding::TableId(table);
  for (size_t s = 0; s < shards.size(); ++s) {
    for (auto& [key, row] : Dump(*shards[s], table)) {
      if (check_owner) {
        EXPECT_EQ(sharding::ShardForKey(table_id, key, static_cast<int32_t>(shards.size())),
                  static_cast<int32_t>(s))
            << "key " << key << " restored onto the wrong shard";
      }
      EXPECT_TRUE(all.emplace(key, row).second) << "key " << key << " on two shards";
    }
  }
  return all;
}

std::vector<std::unique_ptr<ParameterServer>> Shards(int n, const std::string& data_root) {
  std::vector<std::unique_ptr<ParameterServer>> shards;
  for (int i = 0; i < n; ++i) {
    ParameterServerOptions o = data_root.empty() ? ParameterServerOptions{}
                                                 : DurableOptions(data_root + std::to_string(i));
    o.shard_index = i;
    o.num_shards = n;
    shards.push_back(OpenOrDie(o));
  }
  return shards;
}

std::map<std::string, std::vector<float>> DenseUnion(
    std::vector<std::unique_ptr<ParameterServer>>& shards) {
  std::map<std::string, std::vector<float>> all;
  for (auto& ps : shards) {
    for (const DenseStats& d : ps->Stats().dense) {
      EXPECT_TRUE(all.emplace(d.name, PullDenseOrDie(*ps, d.name, d.num_floats)).second);
    }
  }
  return all;
}

// A checkpoint lists rows in its index's order; a fresh index that grew step
// by step under them took quadratic time (BENCHMARKS.md, issue 4). The
// restore sizes each stripe's index once, before the rows come.
TEST(RestoreTest, SizesEachStripesIndexOnceBeforeImporting) {
  testing::TempDir dir;
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(AdamTable("emb", 100000)));
  std::vector<uint64_t> keys(2000);
  std::vector<float> grads(keys.size() * kDim, 0.25f);
  for (uint64_t base = 0; base < 20000; base += keys.size()) {
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = base + i;
    PS_ASSERT_OK(ps.Push("emb", keys, grads, {}).status());
  }
  const TableStats grown = StatsOf(ps, "emb");
  ASSERT_EQ(grown.rows, 20000u);
  // Pushes grew each of the 16 stripes' indexes 1.5x at a time.
  EXPECT_GT(grown.index_grows, 16u * 5);
  CheckpointOptions full;
  full.dir = dir.Join("full");
  ASSERT_TRUE(ps.Checkpoint(full).ok());

  ParameterServer restored({});
  absl::StatusOr<RestoreInfo> r = restored.Restore(full.dir);
  ASSERT_TRUE(r.ok()) << r.status();
  const TableStats after = StatsOf(restored, "emb");
  EXPECT_EQ(after.rows, 20000u);
  EXPECT_LE(after.index_grows, 16u);  // one rebuild per stripe, at most
  ExpectSameRows(Dump(restored, "emb"), Dump(ps, "emb"));
}

// A serving copy (weights_only) keeps the weights and none of the optimizer
// slots: a restore of an Adam table, most of its rows from the checkpoint's
// RocksDB part, serves every weight at about a third of the bytes, and the
// table takes its original options again (a client declaring it).
TEST(RestoreTest, AWeightsOnlyPsKeepsEveryWeightAndNoOptimizerSlots) {
  testing::TempDir dir;
  auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
  ASSERT_NE(ps, nullptr);
  PS_ASSERT_OK(ps->CreateTable(AdamTable("emb", 200)));
  PS_ASSERT_OK(ps->CreateDense(Dense("w", 5)));
  PushScript script(3000, 100, 9);
  PS_ASSERT_OK(script.Run(*ps, "emb", 30));
  PS_ASSERT_OK(ps->PushDense("w", std::vector<float>(5, 0.5f), {}));
  EXPECT_GT(StatsOf(*ps, "emb").tier_evictions, 0u);
  CheckpointOptions full;
  full.dir = dir.Join("full");
  ASSERT_TRUE(ps->Checkpoint(full).ok());

  ParameterServer normal({});
  ASSERT_TRUE(normal.Restore(full.dir).ok());
  ParameterServerOptions o;
  o.weights_only = true;
  ParameterServer serving(o);
  absl::StatusOr<RestoreInfo> r = serving.Restore(full.dir);
  ASSERT_TRUE(r.ok()) << r.status();

  const Rows all = Dump(normal, "emb"), weights = Dump(serving, "emb");
  ASSERT_EQ(weights.size(), all.size());
  ASSERT_GT(all.size(), 1000u);
  for (const auto& [key, row] : all) {
    ASSERT_GE(row.size(), 3u * kDim);  // Adam: weights, m, v (and a step count)
    auto it = weights.find(key);
    ASSERT_NE(it, weights.end()) << key;
    ASSERT_EQ(it->second, std::vector<float>(row.begin(), row.begin() + kDim)) << key;
  }
  const TableStats a = StatsOf(normal, "emb"), b = StatsOf(serving, "emb");
  EXPECT_EQ(b.rows, a.rows);
  EXPECT_LT(b.memory_bytes, a.memory_bytes * 6 / 10) << a.memory_bytes << " vs " << b.memory_bytes;
  EXPECT_EQ(PullDenseOrDie(serving, "w", 5), PullDenseOrDie(normal, "w", 5));
  PS_EXPECT_CODE(serving.CreateTable(AdamTable("emb", 200)), absl::StatusCode::kOk);
  // A follower sets rows (this memory-only copy is past the table's budget:
  // rows it holds).
  const std::vector<uint64_t> keys = {all.begin()->first, all.rbegin()->first};
  const std::vector<float> set(keys.size() * kDim, 0.25f);
  PS_ASSERT_OK(serving.AssignRows("emb", keys, set));
  EXPECT_EQ(PullOrDie(serving, "emb", keys, kDim), set);
}

// EraseRows (a follower dropping rows its PS no longer holds) removes rows
// from memory and from the RocksDB tier alike: they read their initial
// values again, as on a PS that never saw them, and the table counts them
// gone. Keys without a row are skipped.
TEST(DurabilityTest, EraseRowsRemovesRowsFromMemoryAndTheTier) {
  testing::TempDir dir;
  auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
  ASSERT_NE(ps, nullptr);
  PS_ASSERT_OK(ps->CreateTable(AdamTable("emb", 200)));
  PushScript script(3000, 100, 5);
  PS_ASSERT_OK(script.Run(*ps, "emb", 30));
  EXPECT_GT(StatsOf(*ps, "emb").tier_evictions, 0u);  // many rows are in RocksDB
  const Rows before = Dump(*ps, "emb");
  std::vector<uint64_t> erase;
  for (const auto& [key, row] : before) {
    if (key % 2 == 0) erase.push_back(key);
  }
  erase.push_back(1u << 30);  // no such row
  PS_ASSERT_OK(ps->EraseRows("emb", erase));
  erase.pop_back();

  ParameterServer fresh({});
  PS_ASSERT_OK(fresh.CreateTable(AdamTable("emb", 200)));
  EXPECT_EQ(PullOrDie(*ps, "emb", erase, kDim), PullOrDie(fresh, "emb", erase, kDim));
  const Rows after = Dump(*ps, "emb");
  EXPECT_EQ(after.size(), before.size() - erase.size());
  for (const auto& [key, row] : after) {
    EXPECT_NE(key % 2, 0u) << key;
    EXPECT_EQ(row, before.at(key)) << key;
  }
  PS_EXPECT_CODE(ps->EraseRows("nope", erase), absl::StatusCode::kNotFound);
}

TEST(RestoreTest, ReshardsTwoToThreeAndThreeToTwo) {
  testing::TempDir dir;
  // The 2-shard source keeps most rows in RocksDB (the rocksdb/ part of the
  // checkpoint is read too); the targets are memory only.
  auto two = Shards(2, dir.Join("data2-"));
  for (auto& ps : two) {
    PS_ASSERT_OK(ps->CreateTable(AdamTable("emb", 300)));
  }
  const std::vector<std::pair<std::string, int64_t>> dense = {{"a", 10}, {"b", 7}, {"c", 3}};
  std::vector<DenseOptions> dense_options;
  for (const auto& [name, n] : dense) dense_options.push_back(Dense(name, n));
  std::vector<sharding::DenseVariable> placed;
  for (const DenseOptions& d : dense_options) placed.push_back({d.name, d.num_floats()});
  auto place2 = sharding::PlaceDenseVariables(placed, 2);
  ASSERT_TRUE(place2.ok());
  for (size_t i = 0; i < dense_options.size(); ++i) {
    PS_ASSERT_OK(two[(*place2)[i]]->CreateDense(dense_options[i]));
    std::vector<float> g(dense_options[i].num_floats(), 0.1f * static_cast<float>(i + 1));
    ASSERT_TRUE(two[(*place2)[i]]->PushDense(dense_options[i].name, g, {}).ok());
  }
  PushRouted(two, "emb", 40, 8);
  const Rows original = Union(two, "emb", /*check_owner=*/true);
  const auto original_dense = DenseUnion(two);
  ASSERT_GT(StatsOf(*two[0], "emb").tier_evictions, 0u);
  for (auto& ps : two) {
    CheckpointOptions c;
    c.dir = dir.Join("c2");
    ASSERT_TRUE(ps->Checkpoint(c).ok());
  }

  auto three = Shards(3, "");
  for (auto& ps : three) {
    absl::StatusOr<RestoreInfo> r = ps->Restore(dir.Join("c2"));
    ASSERT_TRUE(r.ok()) << r.status();
  }
  ExpectSameRows(Union(three, "emb", /*check_owner=*/true), original);
  EXPECT_EQ(DenseUnion(three), original_dense);
  for (auto& ps : three) {
    CheckpointOptions c;
    c.dir = dir.Join("c3");
    ASSERT_TRUE(ps->Checkpoint(c).ok());
  }

  auto back = Shards(2, dir.Join("back-"));
  for (auto& ps : back) ASSERT_TRUE(ps->Restore(dir.Join("c3")).ok());
  ExpectSameRows(Union(back, "emb", /*check_owner=*/true), original);
  EXPECT_EQ(DenseUnion(back), original_dense);
}

TEST(CheckpointTest, HalfWrittenCheckpointIsRefusedAndThePreviousOneStays) {
  testing::TempDir dir;
  Rows at_checkpoint;
  {
    auto ps = OpenOrDie(DurableOptions(dir.Join("data"), /*wal=*/false));
    ASSERT_NE(ps, nullptr);
    PS_ASSERT_OK(ps->CreateTable(AdamTable("emb", 1000)));
    PushScript script(2000, 64, 9);
    PS_ASSERT_OK(script.Run(*ps, "emb", 20));
    CheckpointOptions good;
    good.dir = dir.Join("good");
    ASSERT_TRUE(ps->Checkpoint(good).ok());
    at_checkpoint = Dump(*ps, "emb");

    // What a PS killed during a checkpoint leaves: a part without MANIFEST.
    const std::string half = dir.Join("half") + "/shard-00000-of-00001";
    std::filesystem::create_directories(half);
    std::filesystem::copy_file(dir.Join("good") + "/shard-00000-of-00001/rows.tfrecord",
                               half + "/rows.tfrecord");
    PS_ASSERT_OK(script.Run(*ps, "emb", 5));
    const Rows now = Dump(*ps, "emb");
    absl::StatusOr<RestoreInfo> r = ps->Restore(dir.Join("half"));
    ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
    EXPECT_NE(r.status().message().find("incomplete"), std::string::npos) << r.status();
    ExpectSameRows(Dump(*ps, "emb"), now);  // nothing changed

    // A manifest that does not verify is refused too.
    std::filesystem::copy_file(dir.Join("good") + "/shard-00000-of-00001/MANIFEST",
                               half + "/MANIFEST");
    {
      std::FILE* f = std::fopen((half + "/MANIFEST").c_str(), "r+b");
      ASSERT_NE(f, nullptr);
      std::fseek(f, 12, SEEK_SET);
      std::fputc(0x5a, f);
      std::fclose(f);
    }
    r = ps->Restore(dir.Join("half"));
    ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
    EXPECT_NE(r.status().message().find("MANIFEST"), std::string::npos) << r.status();
  }
  // The restart still begins from the good checkpoint.
  auto ps = OpenOrDie(DurableOptions(dir.Join("data"), /*wal=*/false));
  ASSERT_NE(ps, nullptr);
  ExpectSameRows(Dump(*ps, "emb"), at_checkpoint);
}

TEST(CheckpointTest, CheckpointsTakenDuringPushesAreConsistentCuts) {
  testing::TempDir dir;
  ParameterServer ps({});
  // Every push adds exactly 1 to each of 512 keys (SGD, lr 1, gradient -1):
  // a checkpoint holding half a push would show unequal counters.
  TableOptions t = test::SgdTable("counter", 1);
  PS_ASSERT_OK(ps.CreateTable(t));
  std::vector<uint64_t> keys(512);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 7919;
  const std::vector<float> minus_one(keys.size(), -1.0f);
  std::atomic<bool> stop{false};
  std::vector<std::thread> pushers;
  for (int w = 0; w < 3; ++w) {
    pushers.emplace_back([&] {
      while (!stop.load()) ASSERT_TRUE(ps.Push("counter", keys, minus_one, {}).ok());
    });
  }
  std::vector<std::string> dirs;
  for (int c = 0; c < 6; ++c) {
    CheckpointOptions o;
    o.dir = dir.Join("c" + std::to_string(c));
    o.incremental = c % 2 == 1;
    ASSERT_TRUE(ps.Checkpoint(o).ok());
    dirs.push_back(o.dir);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop.store(true);
  for (auto& th : pushers) th.join();
  for (const std::string& d : dirs) {
    ParameterServer restored({});
    ASSERT_TRUE(restored.Restore(d).ok()) << d;
    const std::vector<float> v = PullOrDie(restored, "counter", keys, 1);
    for (float x : v) ASSERT_EQ(x, v[0]) << d;
  }
}

// ----- issue 23: job lifecycle on a long-lived cluster

std::set<std::string> TableNames(const ParameterServer& ps) {
  std::set<std::string> out;
  for (const TableStats& t : ps.Stats().tables) out.insert(t.name);
  return out;
}
std::set<std::string> DenseNames(const ParameterServer& ps) {
  std::set<std::string> out;
  for (const DenseStats& d : ps.Stats().dense) out.insert(d.name);
  return out;
}

// Jobs share PS nodes; a job's checkpoint (table_prefix = its TablePrefix)
// holds its tables and dense variables only, in the rows file and in the
// RocksDB part alike.
TEST(CheckpointTest, ACopyWithATablePrefixHoldsOnlyThoseTablesAndDense) {
  testing::TempDir dir;
  auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
  ASSERT_NE(ps, nullptr);
  for (const char* name : {"a/emb", "a/side", "b/emb", "ab"}) {
    PS_ASSERT_OK(ps->CreateTable(AdamTable(name, 200)));  // small: rows go to RocksDB
    PushScript script(3000, 100, 12);
    PS_ASSERT_OK(script.Run(*ps, name, 20));
  }
  PS_ASSERT_OK(ps->CreateDense(Dense("a/w", 5)));
  PS_ASSERT_OK(ps->CreateDense(Dense("b/w", 5)));
  ASSERT_GT(StatsOf(*ps, "b/emb").tier_evictions, 0u);

  CheckpointOptions o;
  o.dir = dir.Join("job-a");
  o.table_prefix = "a/";
  absl::StatusOr<CheckpointInfo> c = ps->Checkpoint(o);
  ASSERT_TRUE(c.ok()) << c.status();

  ParameterServer restored({});
  ASSERT_TRUE(restored.Restore(o.dir).ok());
  EXPECT_EQ(TableNames(restored), (std::set<std::string>{"a/emb", "a/side"}));
  EXPECT_EQ(DenseNames(restored), (std::set<std::string>{"a/w"}));
  ExpectSameRows(Dump(restored, "a/emb"), Dump(*ps, "a/emb"));
  ExpectSameRows(Dump(restored, "a/side"), Dump(*ps, "a/side"));
  auto rocks = storage::RocksDb::OpenReadOnly(c->shard_dir + "/rocksdb");
  ASSERT_TRUE(rocks.ok()) << rocks.status();
  EXPECT_EQ((*rocks)->ColumnFamilies(), (std::vector<std::string>{"table:a/emb", "table:a/side"}));

  // The PS's own restart point, taken with it, holds everything.
  ps.reset();
  ps = OpenOrDie(DurableOptions(dir.Join("data")));
  ASSERT_NE(ps, nullptr);
  EXPECT_EQ(TableNames(*ps), (std::set<std::string>{"a/emb", "a/side", "ab", "b/emb"}));
  EXPECT_EQ(DenseNames(*ps), (std::set<std::string>{"a/w", "b/w"}));
}

// A caller whose reply was lost retries its checkpoint after the first
// attempt finished: the retry gets the first attempt's answer (also from a
// restarted PS), never "exists"; a different checkpoint at the same place
// is refused naming both, and the part is left as it was.
TEST(CheckpointTest, ARetriedCheckpointGetsTheFirstAnswerAndAnotherIsRefused) {
  testing::TempDir dir;
  auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
  ASSERT_NE(ps, nullptr);
  PS_ASSERT_OK(ps->CreateTable(AdamTable("j/emb", 1000)));
  PushScript script(3000, 100, 12);
  PS_ASSERT_OK(script.Run(*ps, "j/emb", 10));

  CheckpointOptions o;
  o.dir = dir.Join("ckpt/job/final");
  o.table_prefix = "j/";
  o.step = 10;
  absl::StatusOr<CheckpointInfo> first = ps->Checkpoint(o);
  ASSERT_TRUE(first.ok()) << first.status();
  PS_ASSERT_OK(script.Run(*ps, "j/emb", 3));  // the model moves on meanwhile

  absl::StatusOr<CheckpointInfo> again = ps->Checkpoint(o);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->shard_dir, first->shard_dir);
  EXPECT_EQ(again->created_unix_micros, first->created_unix_micros);
  EXPECT_EQ(again->rows, first->rows);
  EXPECT_EQ(again->manifest_crc32c, first->manifest_crc32c);

  CheckpointOptions other = o;
  other.step = 13;
  absl::StatusOr<CheckpointInfo> refused = ps->Checkpoint(other);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(refused.status().message().find("holds step 10 of tables 'j/*'"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("not step 13"), std::string::npos) << refused.status();

  // A restarted PS reads the answer back from the part it wrote before.
  ps.reset();
  ps = OpenOrDie(DurableOptions(dir.Join("data")));
  ASSERT_NE(ps, nullptr);
  absl::StatusOr<CheckpointInfo> after_restart = ps->Checkpoint(o);
  ASSERT_TRUE(after_restart.ok()) << after_restart.status();
  EXPECT_EQ(after_restart->created_unix_micros, first->created_unix_micros);
  EXPECT_EQ(after_restart->step, 10);
  EXPECT_EQ(after_restart->rows, first->rows);
  EXPECT_EQ(after_restart->manifest_bytes, first->manifest_bytes);
  EXPECT_EQ(after_restart->manifest_crc32c, first->manifest_crc32c);

  ParameterServer restored({});
  ASSERT_TRUE(restored.Restore(o.dir).ok());
  EXPECT_EQ(TableNames(restored), (std::set<std::string>{"j/emb"}));
}

// A dropped table's rows leave RocksDB with it, and the drop is logged: a
// restart (replaying the WAL over a checkpoint that still held the table)
// does not bring it back, nor its rows into a new table of the same name.
TEST(DurabilityTest, DropTableRemovesItsTierRowsAndARestartDoesNotBringItBack) {
  testing::TempDir dir;
  const std::vector<uint64_t> keys = {1, 2, 3, 4, 5, 6, 7, 8};
  Rows fresh;
  {
    ParameterServer blank({});
    PS_ASSERT_OK(blank.CreateTable(AdamTable("j/emb", 200)));
    for (uint64_t k : keys) {
      fresh[k] = PullOrDie(blank, "j/emb", {k}, kDim);
    }
  }
  auto pull_all = [&](ParameterServer& ps) {
    Rows out;
    for (uint64_t k : keys) out[k] = PullOrDie(ps, "j/emb", {k}, kDim);
    return out;
  };
  {
    auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
    ASSERT_NE(ps, nullptr);
    PS_ASSERT_OK(ps->CreateTable(AdamTable("j/emb", 200)));
    PS_ASSERT_OK(ps->CreateDense(Dense("j/w", 4)));
    PushScript script(3000, 100, 13);
    PS_ASSERT_OK(script.Run(*ps, "j/emb", 30));
    std::vector<float> g(keys.size() * kDim, 0.5f);
    PS_ASSERT_OK(ps->Push("j/emb", keys, g, {}).status());
    ASSERT_GT(StatsOf(*ps, "j/emb").tier_evictions, 0u);
    ASSERT_TRUE(ps->Checkpoint({}).ok());  // the restart point holds the table
    PS_ASSERT_OK(script.Run(*ps, "j/emb", 5));
    PS_ASSERT_OK(ps->DropTable("j/emb"));
    PS_ASSERT_OK(ps->DropDense("j/w"));
    // Its RocksDB family is gone: a new table of the name starts fresh.
    PS_ASSERT_OK(ps->CreateTable(AdamTable("j/emb", 200)));
    EXPECT_EQ(StatsOf(*ps, "j/emb").cold_rows, 0u);
    ExpectSameRows(pull_all(*ps), fresh);
    PS_ASSERT_OK(ps->DropTable("j/emb"));
  }  // as kill -9 leaves it: the drop is only in the WAL
  auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
  ASSERT_NE(ps, nullptr);
  EXPECT_TRUE(TableNames(*ps).empty());
  EXPECT_TRUE(DenseNames(*ps).empty());
  PS_ASSERT_OK(ps->CreateTable(AdamTable("j/emb", 200)));
  EXPECT_EQ(StatsOf(*ps, "j/emb").cold_rows, 0u);
  ExpectSameRows(pull_all(*ps), fresh);
}

// A push that found its table just before a DropTable can be logged just
// after the drop; replay skips it instead of refusing to start.
TEST(DurabilityTest, APushLoggedJustAfterItsTablesDropDoesNotStopARestart) {
  testing::TempDir dir;
  {
    auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
    ASSERT_NE(ps, nullptr);
    PS_ASSERT_OK(ps->CreateTable(AdamTable("j/emb", 200)));
    PushScript script(100, 10, 14);
    PS_ASSERT_OK(script.Run(*ps, "j/emb", 3));
    PS_ASSERT_OK(ps->DropTable("j/emb"));
  }
  {
    auto wal = storage::WalWriter::Open(dir.Join("data") + "/wal", {});
    ASSERT_TRUE(wal.ok()) << wal.status();
    v1::WalEntry e;
    v1::WalPushPart* p = e.mutable_push_part();
    p->set_table("j/emb");
    p->set_push_id(1000);
    p->set_part(0);
    p->set_parts(1);
    const uint64_t key = 5;
    const std::vector<float> grads(kDim, 0.1f);
    p->set_keys(reinterpret_cast<const char*>(&key), sizeof(key));
    p->set_grads(reinterpret_cast<const char*>(grads.data()), grads.size() * sizeof(float));
    PS_ASSERT_OK((*wal)->Sync((*wal)->Add(e.SerializeAsString())));
  }
  auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
  ASSERT_NE(ps, nullptr);
  EXPECT_TRUE(TableNames(*ps).empty());
}

// Issue 23: a checkpoint into a job's directory made that directory the
// PS's restart point; once the user moved it, the PS refused to start. The
// PS restarts from its data dir alone, serving every acknowledged push.
TEST(DurabilityTest, RestartAfterTheJobsCheckpointDirWasDeletedServesEveryAcknowledgedPush) {
  for (const bool moved : {false, true}) {
    SCOPED_TRACE(moved ? "moved" : "deleted");
    testing::TempDir dir;
    Rows before;
    std::vector<float> dense_before;
    {
      auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
      ASSERT_NE(ps, nullptr);
      PS_ASSERT_OK(ps->CreateTable(AdamTable("j/emb", 300)));
      PS_ASSERT_OK(ps->CreateDense(Dense("j/w", 6)));
      PushScript script(3000, 64, 15);
      PS_ASSERT_OK(script.Run(*ps, "j/emb", 30, /*client=*/3));
      for (int c = 0; c < 3; ++c) {  // the chief keeps a job's newest few
        CheckpointOptions o;
        o.dir = dir.Join("jobs/j/step-" + std::to_string(c));
        o.table_prefix = "j/";
        ASSERT_TRUE(ps->Checkpoint(o).ok());
        PS_ASSERT_OK(script.Run(*ps, "j/emb", 10, /*client=*/3));
      }
      std::vector<float> g(6, 0.5f);
      PS_ASSERT_OK(ps->PushDense("j/w", g, {.client_id = 4, .sequence = 1}).status());
      before = Dump(*ps, "j/emb");
      dense_before = PullDenseOrDie(*ps, "j/w", 6);
    }
    if (moved) {
      std::filesystem::rename(dir.Join("jobs"), dir.Join("elsewhere"));
    } else {
      std::filesystem::remove_all(dir.Join("jobs"));
    }
    auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
    ASSERT_NE(ps, nullptr);
    ExpectSameRows(Dump(*ps, "j/emb"), before);
    EXPECT_EQ(PullDenseOrDie(*ps, "j/w", 6), dense_before);
    EXPECT_TRUE(ps->startup().notes.empty());
    // Its restart points stay bounded.
    size_t points = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.Join("data/checkpoints"))) {
      points += e.path().filename().string().rfind("ckpt-", 0) == 0;
    }
    EXPECT_LE(points, 2u);
  }
}

// Each PS of a cluster keeps only its own part under its data dir: a
// restart restores that part alone (its rows and its dense variables).
TEST(DurabilityTest, EachShardOfAClusterRestartsFromItsOwnRestartPoint) {
  testing::TempDir dir;
  Rows before;
  std::vector<float> dense_before;
  {
    auto two = Shards(2, dir.Join("data-"));
    for (auto& ps : two) PS_ASSERT_OK(ps->CreateTable(AdamTable("j/emb", 300)));
    PS_ASSERT_OK(two[1]->CreateDense(Dense("j/w", 3)));
    std::vector<float> g(3, 0.5f);
    PS_ASSERT_OK(two[1]->PushDense("j/w", g, {}).status());
    PushRouted(two, "j/emb", 20, 21);
    for (auto& ps : two) {
      CheckpointOptions o;
      o.dir = dir.Join("job");
      o.table_prefix = "j/";
      ASSERT_TRUE(ps->Checkpoint(o).ok());
    }
    PushRouted(two, "j/emb", 5, 22);
    before = Union(two, "j/emb", /*check_owner=*/true);
    dense_before = PullDenseOrDie(*two[1], "j/w", 3);
  }
  std::filesystem::remove_all(dir.Join("job"));
  auto two = Shards(2, dir.Join("data-"));
  ASSERT_EQ(two.size(), 2u);
  for (auto& ps : two) ASSERT_NE(ps, nullptr);
  ExpectSameRows(Union(two, "j/emb", /*check_owner=*/true), before);
  EXPECT_EQ(PullDenseOrDie(*two[1], "j/w", 3), dense_before);
  EXPECT_TRUE(DenseNames(*two[0]).empty());
}

// A data dir of an earlier version: LATEST names a checkpoint outside it
// (a job's), which is gone. The PS falls back to its newest whole restart
// point and the WAL after it, says so, and loses nothing acknowledged.
TEST(DurabilityTest, AnOldLatestNamingAVanishedDirFallsBackToTheRestartPointAndTheWal) {
  testing::TempDir dir;
  Rows before;
  {
    auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
    ASSERT_NE(ps, nullptr);
    PS_ASSERT_OK(ps->CreateTable(AdamTable("j/emb", 300)));
    PushScript script(3000, 64, 16);
    PS_ASSERT_OK(script.Run(*ps, "j/emb", 20));
    absl::StatusOr<CheckpointInfo> c = ps->Checkpoint({});
    ASSERT_TRUE(c.ok()) << c.status();
    PS_ASSERT_OK(script.Run(*ps, "j/emb", 20));
    before = Dump(*ps, "j/emb");
    // What an earlier version wrote after a checkpoint into a job's dir.
    v1::LatestCheckpoint latest;
    latest.set_dir(dir.Join("jobs/j/final"));
    latest.set_replay_from_lsn(c->wal_lsn + 1);
    testing::WriteFileOrDie(dir.Join("data/LATEST"), latest.SerializeAsString());
  }
  auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
  ASSERT_NE(ps, nullptr);
  ExpectSameRows(Dump(*ps, "j/emb"), before);
  ASSERT_EQ(ps->startup().notes.size(), 1u);
  EXPECT_NE(ps->startup().notes[0].find(dir.Join("jobs/j/final")), std::string::npos)
      << ps->startup().notes[0];
  EXPECT_NE(ps->startup().notes[0].find("restart point"), std::string::npos)
      << ps->startup().notes[0];
}

// Manifests name no absolute path: a checkpoint chain moved elsewhere (its
// directories together) restores from where it is now.
TEST(CheckpointTest, ManifestsAreRelativeAndAMovedChainRestores) {
  testing::TempDir dir;
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(AdamTable("emb", 100000)));
  PushScript script(1000, 100, 17);
  PS_ASSERT_OK(script.Run(ps, "emb", 10));
  CheckpointOptions full, inc;
  full.dir = dir.Join("a/full");
  inc.dir = dir.Join("a/inc");
  inc.incremental = true;
  ASSERT_TRUE(ps.Checkpoint(full).ok());
  PS_ASSERT_OK(script.Run(ps, "emb", 3));
  absl::StatusOr<CheckpointInfo> i = ps.Checkpoint(inc);
  ASSERT_TRUE(i.ok()) << i.status();
  ASSERT_TRUE(i->incremental);
  for (const std::string& m : {full.dir, inc.dir}) {
    const std::string bytes = testing::ReadFileOrDie(m + "/shard-00000-of-00001/MANIFEST");
    EXPECT_EQ(bytes.find(dir.path()), std::string::npos) << m << " names an absolute path";
  }
  std::filesystem::rename(dir.Join("a"), dir.Join("b"));
  ParameterServer restored({});
  absl::StatusOr<RestoreInfo> r = restored.Restore(dir.Join("b/inc"));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSameRows(Dump(restored, "emb"), Dump(ps, "emb"));
}

// A checkpoint file changed or cut short after it was written is refused,
// naming the file, before the restore changes anything.
TEST(CheckpointTest, ATamperedOrTruncatedFileIsRefusedNamingItAndChangesNothing) {
  testing::TempDir dir;
  auto ps = OpenOrDie(DurableOptions(dir.Join("data")));
  ASSERT_NE(ps, nullptr);
  PS_ASSERT_OK(ps->CreateTable(AdamTable("emb", 200)));
  PushScript script(3000, 100, 18);
  PS_ASSERT_OK(script.Run(*ps, "emb", 20));
  CheckpointOptions o;
  o.dir = dir.Join("c");
  absl::StatusOr<CheckpointInfo> c = ps->Checkpoint(o);
  ASSERT_TRUE(c.ok()) << c.status();

  ParameterServer target({});
  PS_ASSERT_OK(target.CreateTable(AdamTable("other", 1000)));
  PushScript other(500, 50, 19);
  PS_ASSERT_OK(other.Run(target, "other", 3));
  const Rows target_rows = Dump(target, "other");

  std::vector<std::string> files = {c->shard_dir + "/rows.tfrecord"};
  for (const auto& e : std::filesystem::directory_iterator(c->shard_dir + "/rocksdb")) {
    if (e.path().extension() == ".sst") files.push_back(e.path().string());
  }
  ASSERT_GE(files.size(), 2u);
  for (const std::string& f : files) {
    const std::string saved = testing::ReadFileOrDie(f);
    for (const bool truncate : {false, true}) {
      std::string bad = saved;
      if (truncate) {
        bad.resize(bad.size() - 1);
      } else {
        bad[bad.size() / 2] ^= 0x01;
      }
      std::filesystem::remove(f);  // hard links: do not change the PS's own copy
      testing::WriteFileOrDie(f, bad);
      absl::StatusOr<RestoreInfo> r = target.Restore(o.dir);
      EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << f << ": " << r.status();
      EXPECT_NE(r.status().message().find(f), std::string::npos) << r.status();
      EXPECT_EQ(TableNames(target), std::set<std::string>{"other"});
      ExpectSameRows(Dump(target, "other"), target_rows);
    }
    std::filesystem::remove(f);
    testing::WriteFileOrDie(f, saved);
  }
  ASSERT_TRUE(target.Restore(o.dir).ok());
  ExpectSameRows(Dump(target, "emb"), Dump(*ps, "emb"));
}

}  // namespace
}  // namespace brook::ps
