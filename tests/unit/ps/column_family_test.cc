// A durable PS creates a table's RocksDB column family on the table's first
// spill, not with the table: RocksDB rewrites its OPTIONS file (listing every
// family) on each family create and drop, so one family per table made every
// creation slower than the last. Real RocksDB in a temp dir; the families are
// read through the storage API from the data dir's live RocksDB once the PS
// is closed (as a kill leaves it).
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ps/parameter_server.h"
#include "storage/rocks_db.h"
#include "tests/testing/test_util.h"
#include "tests/unit/ps/ps_test_util.h"

namespace brook::ps {
namespace {

using FamilyRows = std::map<uint64_t, std::vector<float>>;

constexpr int kFamilyDim = 4;

TableOptions FamilyTable(const std::string& name, uint64_t budget_rows) {
  return test::AdamTable(name, kFamilyDim, 17, budget_rows);
}

ParameterServerOptions FamilyPsOptions(const std::string& dir) {
  ParameterServerOptions o;
  o.data_dir = dir;
  o.rocksdb.block_cache_bytes = 4 << 20;
  o.rocksdb.write_buffer_bytes = 2 << 20;
  return o;
}

std::unique_ptr<ParameterServer> OpenFamilyPs(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<ParameterServer>> ps = ParameterServer::Open(FamilyPsOptions(dir));
  EXPECT_TRUE(ps.ok()) << ps.status();
  return ps.ok() ? std::move(*ps) : nullptr;
}

// The families (without "default") of the data dir's live RocksDB, read
// after its PS has gone.
std::vector<std::string> FamiliesOf(const std::string& data_dir) {
  absl::StatusOr<std::unique_ptr<storage::RocksDb>> db =
      storage::RocksDb::OpenReadOnly(data_dir + "/rocksdb");
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? (*db)->ColumnFamilies() : std::vector<std::string>{"<open failed>"};
}

std::set<std::string> TablesOf(const ParameterServer& ps) {
  std::set<std::string> out;
  for (const TableStats& t : ps.Stats().tables) out.insert(t.name);
  return out;
}

// `batches` pushes of `per_batch` distinct keys from [0, key_space),
// deterministic in `seed`, with steps counting on from *step.
absl::Status PushBatches(ParameterServer& ps, const std::string& table, int batches,
                         uint64_t key_space, int per_batch, uint64_t seed, int64_t* step) {
  std::mt19937_64 rng(seed);
  for (int b = 0; b < batches; ++b) {
    std::set<uint64_t> seen;
    std::vector<uint64_t> keys;
    while (static_cast<int>(keys.size()) < per_batch) {
      const uint64_t k = rng() % key_space;
      if (seen.insert(k).second) keys.push_back(k);
    }
    std::vector<float> grads(keys.size() * kFamilyDim);
    for (float& g : grads) g = static_cast<float>(rng() % 2001) * 1e-3f - 1.0f;
    PushContext ctx;
    ctx.step = ++*step;
    absl::StatusOr<PushOutcome> out = ps.Push(table, keys, grads, ctx);
    if (!out.ok()) return out.status();
  }
  return absl::OkStatus();
}

void ExpectRowsEqual(const FamilyRows& got, const FamilyRows& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [key, row] : want) {
    auto it = got.find(key);
    ASSERT_NE(it, got.end()) << what << ": key " << key << " missing";
    ASSERT_EQ(it->second, row) << what << ": key " << key;
  }
}

std::vector<uint64_t> KeyRange(uint64_t n) {
  std::vector<uint64_t> keys(n);
  for (uint64_t i = 0; i < n; ++i) keys[i] = i;
  return keys;
}

// The benchmark's case: a long-lived PS with a data dir and no memory limit,
// many jobs' tables created and dropped. None ever spills, so none has a
// family; a restart (WAL replay of the creates, pushes and drops) makes none
// either.
TEST(ColumnFamilyTest, TablesThatNeverSpillHaveNoColumnFamily) {
  testing::TempDir dir;
  const std::string data = dir.Join("data");
  std::map<std::string, FamilyRows> kept;
  {
    auto ps = OpenFamilyPs(data);
    ASSERT_NE(ps, nullptr);
    int64_t step = 0;
    for (int i = 0; i < 200; ++i) {
      const std::string name = absl::StrCat("job", i / 24, "/t", i);
      PS_ASSERT_OK(ps->CreateTable(FamilyTable(name, 100000)));
      PS_ASSERT_OK(PushBatches(*ps, name, 2, 500, 32, i, &step));
    }
    for (int i = 0; i < 200; i += 2) {
      PS_ASSERT_OK(ps->DropTable(absl::StrCat("job", i / 24, "/t", i)));
    }
    for (const TableStats& t : ps->Stats().tables) {
      EXPECT_TRUE(t.tiered) << t.name;
      EXPECT_FALSE(t.tier_family) << t.name;
      EXPECT_EQ(t.cold_hits + t.cold_misses, 0u) << t.name;  // never asked RocksDB
      kept[t.name] = test::Dump(*ps, t.name);
    }
    ASSERT_EQ(kept.size(), 100u);
  }
  EXPECT_EQ(FamiliesOf(data), std::vector<std::string>{});
  {
    auto ps = OpenFamilyPs(data);
    ASSERT_NE(ps, nullptr);
    ASSERT_EQ(TablesOf(*ps).size(), 100u);
    for (const auto& [name, rows] : kept) ExpectRowsEqual(test::Dump(*ps, name), rows, name);
  }
  EXPECT_EQ(FamiliesOf(data), std::vector<std::string>{});
}

// A table past its budget gets its family on the first spill (a table beside
// it that stays under its budget does not); its rows read back right, from
// memory and RocksDB, before and after a restart from a restart point plus
// the WAL; its drop removes the family, and a restart does not bring it back.
TEST(ColumnFamilyTest, ASpillingTableGetsItsFamilyKeepsItsRowsAndItsDropRemovesIt) {
  testing::TempDir dir;
  const std::string data = dir.Join("data");
  ParameterServer reference({});
  PS_ASSERT_OK(reference.CreateTable(FamilyTable("s/emb", 1 << 20)));
  int64_t ref_step = 0;
  {
    auto ps = OpenFamilyPs(data);
    ASSERT_NE(ps, nullptr);
    PS_ASSERT_OK(ps->CreateTable(FamilyTable("s/emb", 200)));
    PS_ASSERT_OK(ps->CreateTable(FamilyTable("s/small", 100000)));
    EXPECT_FALSE(test::StatsOf(*ps, "s/emb").tier_family);  // nothing spilled yet
    int64_t step = 0;
    PS_ASSERT_OK(PushBatches(*ps, "s/emb", 30, 3000, 100, 1, &step));
    PS_ASSERT_OK(PushBatches(reference, "s/emb", 30, 3000, 100, 1, &ref_step));
    PS_ASSERT_OK(PushBatches(*ps, "s/small", 5, 3000, 100, 2, &step));
    const TableStats s = test::StatsOf(*ps, "s/emb");
    EXPECT_TRUE(s.tier_family);
    EXPECT_GT(s.tier_evictions, 1000u);
    EXPECT_EQ(s.tier_errors, 0u);
    EXPECT_FALSE(test::StatsOf(*ps, "s/small").tier_family);
    ExpectRowsEqual(test::Dump(*ps, "s/emb"), test::Dump(reference, "s/emb"), "before restart");
    const std::vector<uint64_t> keys = KeyRange(3500);  // cold, hot and absent keys
    EXPECT_EQ(test::PullOrDie(*ps, "s/emb", keys, kFamilyDim),
              test::PullOrDie(reference, "s/emb", keys, kFamilyDim));
    ASSERT_TRUE(ps->Checkpoint({}).ok());  // a restart point holding the family
    // After it, only in the WAL (and the live RocksDB a restart rebuilds).
    PS_ASSERT_OK(PushBatches(*ps, "s/emb", 5, 3000, 100, 3, &step));
    PS_ASSERT_OK(PushBatches(reference, "s/emb", 5, 3000, 100, 3, &ref_step));
  }
  EXPECT_EQ(FamiliesOf(data), std::vector<std::string>{"table:s/emb"});
  {
    auto ps = OpenFamilyPs(data);
    ASSERT_NE(ps, nullptr);
    EXPECT_TRUE(test::StatsOf(*ps, "s/emb").tier_family);
    ExpectRowsEqual(test::Dump(*ps, "s/emb"), test::Dump(reference, "s/emb"), "after restart");
    const std::vector<uint64_t> keys = KeyRange(3500);
    EXPECT_EQ(test::PullOrDie(*ps, "s/emb", keys, kFamilyDim),
              test::PullOrDie(reference, "s/emb", keys, kFamilyDim));
    PS_ASSERT_OK(ps->DropTable("s/emb"));
  }
  EXPECT_EQ(FamiliesOf(data), std::vector<std::string>{});
  {
    // The restart point still holds the family; the WAL's drop removes it.
    auto ps = OpenFamilyPs(data);
    ASSERT_NE(ps, nullptr);
    EXPECT_EQ(TablesOf(*ps), (std::set<std::string>{"s/small"}));
  }
  EXPECT_EQ(FamiliesOf(data), std::vector<std::string>{});
}

// Why a new table drops a family of its name first: a table created, spilled,
// dropped and created again must not see the old table's rows, neither when
// it spills into a family of the same name nor after a restart replays it all.
TEST(ColumnFamilyTest, ATableDroppedAndCreatedAgainNeverSeesItsOldRows) {
  testing::TempDir dir;
  const std::string data = dir.Join("data");
  ParameterServer reference({});
  PS_ASSERT_OK(reference.CreateTable(FamilyTable("r/emb", 1 << 20)));
  int64_t ref_step = 0;
  PS_ASSERT_OK(PushBatches(reference, "r/emb", 30, 3000, 100, 8, &ref_step));
  const std::vector<uint64_t> keys = KeyRange(3500);
  const std::vector<float> want_pull = test::PullOrDie(reference, "r/emb", keys, kFamilyDim);
  const FamilyRows want = test::Dump(reference, "r/emb");
  {
    auto ps = OpenFamilyPs(data);
    ASSERT_NE(ps, nullptr);
    int64_t step = 0;
    PS_ASSERT_OK(ps->CreateTable(FamilyTable("r/emb", 200)));
    PS_ASSERT_OK(PushBatches(*ps, "r/emb", 30, 3000, 100, 7, &step));  // other rows
    ASSERT_TRUE(test::StatsOf(*ps, "r/emb").tier_family);
    PS_ASSERT_OK(ps->DropTable("r/emb"));

    PS_ASSERT_OK(ps->CreateTable(FamilyTable("r/emb", 200)));
    EXPECT_FALSE(test::StatsOf(*ps, "r/emb").tier_family);
    EXPECT_EQ(test::StatsOf(*ps, "r/emb").cold_rows, 0u);
    step = 0;
    PS_ASSERT_OK(PushBatches(*ps, "r/emb", 30, 3000, 100, 8, &step));
    const TableStats s = test::StatsOf(*ps, "r/emb");
    ASSERT_TRUE(s.tier_family);  // spilled again, into a new family
    EXPECT_GT(s.cold_hits, 0u);
    ExpectRowsEqual(test::Dump(*ps, "r/emb"), want, "recreated");
    EXPECT_EQ(test::PullOrDie(*ps, "r/emb", keys, kFamilyDim), want_pull);
  }
  auto ps = OpenFamilyPs(data);  // replays create, pushes, drop, create, pushes
  ASSERT_NE(ps, nullptr);
  ExpectRowsEqual(test::Dump(*ps, "r/emb"), want, "after restart");
  EXPECT_EQ(test::PullOrDie(*ps, "r/emb", keys, kFamilyDim), want_pull);
}

}  // namespace
}  // namespace brook::ps
