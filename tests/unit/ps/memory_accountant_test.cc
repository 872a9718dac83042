// The node-wide memory limit (ps/memory_accountant.h): every table of a PS
// charges its in-memory rows to one accountant; past the limit a memory-only
// PS refuses new rows and a tiered one moves rows to RocksDB.
#include "ps/memory_accountant.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ps/parameter_server.h"
#include "tests/testing/test_util.h"
#include "tests/unit/ps/ps_test_util.h"

// A namespace of its own: unity builds batch test files together.
namespace brook::ps::memory_limit_test {
namespace {

using test::PullOrDie;
using test::PushAll;
using test::SgdTable;
using test::StatsOf;

constexpr int kDim = 8;
// An SGD row of dim 8: 16 B header + 32 B floats, plus 12 B of index.
constexpr uint64_t kRowCharge = 16 + 32 + 12;

std::vector<uint64_t> Keys(uint64_t first, size_t n) {
  std::vector<uint64_t> k(n);
  for (size_t i = 0; i < n; ++i) k[i] = first + i;
  return k;
}

std::vector<float> Ones(size_t keys) { return std::vector<float>(keys * kDim, 1.0f); }

TEST(MemoryAccountantTest, TryChargeStopsAtTheLimitAndReleaseMakesRoom) {
  MemoryAccountant a(1000);
  EXPECT_TRUE(a.TryCharge(600));
  EXPECT_FALSE(a.TryCharge(401));
  EXPECT_EQ(a.used(), 600u);
  EXPECT_EQ(a.Excess(500), 100u);
  EXPECT_TRUE(a.TryCharge(400));
  a.Release(300);
  EXPECT_TRUE(a.TryCharge(300));
  a.Charge(50);  // unconditional: past the limit
  EXPECT_EQ(a.used(), 1050u);
  EXPECT_EQ(a.Excess(0), 50u);
}

TEST(MemoryAccountantTest, ZeroMeansNoLimitButStillCounts) {
  MemoryAccountant a(0);
  EXPECT_TRUE(a.TryCharge(uint64_t{1} << 62));
  EXPECT_EQ(a.Excess(uint64_t{1} << 40), 0u);
  EXPECT_EQ(a.used(), uint64_t{1} << 62);
}

TEST(MemoryLimitTest, TablesShareTheNodeLimitAndPushesPastItAreRefused) {
  ParameterServerOptions o;
  o.memory_limit_bytes = 1000 * kRowCharge;  // 1000 rows on the node
  ParameterServer ps(o);
  // Each table alone may hold 1 GiB: only the node limit binds.
  for (const char* name : {"a", "b", "c"}) PS_ASSERT_OK(ps.CreateTable(SgdTable(name, kDim)));
  PS_ASSERT_OK(PushAll(ps, "a", Keys(0, 600), Ones(600)));
  PS_ASSERT_OK(PushAll(ps, "b", Keys(0, 400), Ones(400)));
  EXPECT_EQ(ps.Stats().memory_used_bytes, 1000 * kRowCharge);

  const absl::StatusOr<PushOutcome> refused = PushAll(ps, "c", Keys(0, 1), Ones(1));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("table 'c'"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("memory limit of 60000 bytes"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("--memory-limit"), std::string::npos)
      << refused.status();
  // Nothing changed: the key still reads its initial value, no row exists.
  EXPECT_EQ(PullOrDie(ps, "c", {0}, kDim), std::vector<float>(kDim, 0.0f));
  EXPECT_EQ(StatsOf(ps, "c").rows, 0u);
  // Rows that exist still train.
  PS_ASSERT_OK(PushAll(ps, "a", Keys(0, 600), Ones(600)));

  const ServerStats s = ps.Stats();
  EXPECT_EQ(s.memory_limit_bytes, 1000 * kRowCharge);
  EXPECT_EQ(s.memory_used_bytes, 1000 * kRowCharge);
  EXPECT_EQ(s.memory_limit_rejections, 1u);
  EXPECT_EQ(StatsOf(ps, "c").budget_rejections, 0u);  // not the table's own budget

  // Dropping a table gives its rows back to the node.
  PS_ASSERT_OK(ps.DropTable("a"));
  EXPECT_EQ(ps.Stats().memory_used_bytes, 400 * kRowCharge);
  PS_ASSERT_OK(PushAll(ps, "c", Keys(0, 600), Ones(600)));
}

TEST(MemoryLimitTest, TtlEvictionGivesRowsBackToTheNode) {
  ParameterServerOptions o;
  o.memory_limit_bytes = 100 * kRowCharge;
  ParameterServer ps(o);
  TableOptions t = SgdTable("a", kDim);
  t.ttl_steps = 10;
  PS_ASSERT_OK(ps.CreateTable(t));
  PushContext ctx;
  ctx.step = 1;
  PS_ASSERT_OK(PushAll(ps, "a", Keys(0, 100), Ones(100), ctx));
  ctx.step = 2;
  ctx.sequence = 1;
  PS_EXPECT_CODE(PushAll(ps, "a", Keys(100, 1), Ones(1), ctx),
                 absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ps.Evict(20), 100u);
  EXPECT_EQ(ps.Stats().memory_used_bytes, 0u);
  ctx.sequence = 2;
  PS_ASSERT_OK(PushAll(ps, "a", Keys(100, 100), Ones(100), ctx));
}

TEST(MemoryLimitTest, TheTableBudgetStillBindsUnderALargerNodeLimit) {
  ParameterServerOptions o;
  o.memory_limit_bytes = 1 << 20;
  ParameterServer ps(o);
  TableOptions t = SgdTable("a", kDim);
  t.memory_budget_bytes = 10 * kDim * sizeof(float);  // 10 rows
  PS_ASSERT_OK(ps.CreateTable(t));
  const absl::StatusOr<PushOutcome> refused = PushAll(ps, "a", Keys(0, 11), Ones(11));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("memory budget"), std::string::npos)
      << refused.status();
  EXPECT_EQ(ps.Stats().memory_used_bytes, 0u);
  EXPECT_EQ(ps.Stats().memory_limit_rejections, 0u);
}

TEST(MemoryLimitTest, TieredTablesMoveRowsPastTheNodeLimitToRocksDb) {
  testing::TempDir dir;
  ParameterServerOptions o;
  o.data_dir = dir.path();
  o.wal = false;
  o.rocksdb.block_cache_bytes = 8 << 20;
  o.rocksdb.write_buffer_bytes = 4 << 20;
  o.memory_limit_bytes = 2000 * kRowCharge;
  absl::StatusOr<std::unique_ptr<ParameterServer>> opened = ParameterServer::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ParameterServer& ps = **opened;
  ParameterServer reference({});
  constexpr int kTables = 8;
  constexpr size_t kBatch = 128;
  for (int t = 0; t < kTables; ++t) {
    PS_ASSERT_OK(ps.CreateTable(SgdTable("t" + std::to_string(t), kDim)));
    PS_ASSERT_OK(reference.CreateTable(SgdTable("t" + std::to_string(t), kDim)));
  }
  // 8 tables x 20 batches x 128 new keys: 20480 rows, ten times the limit.
  uint64_t max_used = 0;
  for (int b = 0; b < 20; ++b) {
    for (int t = 0; t < kTables; ++t) {
      const std::string name = "t" + std::to_string(t);
      PushContext ctx;
      ctx.sequence = static_cast<uint64_t>(b * kTables + t);
      PS_ASSERT_OK(PushAll(ps, name, Keys(b * kBatch, kBatch), Ones(kBatch), ctx));
      PS_ASSERT_OK(PushAll(reference, name, Keys(b * kBatch, kBatch), Ones(kBatch), ctx));
      max_used = std::max(max_used, ps.Stats().memory_used_bytes);
    }
  }
  // A write that leaves the node past its limit moves rows out at once:
  // between pushes the node is within it, although 8 tables x 128 keys
  // would not be.
  EXPECT_LE(max_used, o.memory_limit_bytes);
  const ServerStats s = ps.Stats();
  EXPECT_GE(s.memory_used_bytes, o.memory_limit_bytes / 2);
  EXPECT_EQ(s.memory_limit_rejections, 0u);
  uint64_t rows_in_memory = 0;
  for (const TableStats& t : s.tables) {
    rows_in_memory += t.rows;
    EXPECT_GT(t.tier_evictions, 0u) << t.name;
    EXPECT_EQ(t.tier_errors, 0u) << t.name;
  }
  EXPECT_EQ(rows_in_memory * kRowCharge, s.memory_used_bytes);
  // Every row, in memory or in RocksDB, reads what the unbounded PS holds.
  const std::vector<uint64_t> keys = Keys(0, 20 * kBatch);
  for (int t = 0; t < kTables; ++t) {
    const std::string name = "t" + std::to_string(t);
    EXPECT_EQ(PullOrDie(ps, name, keys, kDim), PullOrDie(reference, name, keys, kDim)) << name;
  }
  // Dropping tables gives their rows back.
  for (int t = 0; t < kTables; ++t) PS_ASSERT_OK(ps.DropTable("t" + std::to_string(t)));
  EXPECT_EQ(ps.Stats().memory_used_bytes, 0u);
}

}  // namespace
}  // namespace brook::ps::memory_limit_test
