#include "storage/rocks_db.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace brook::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A row whose every byte depends on (key, version), so a row read back for the
// wrong key, family or version does not compare equal.
std::string Row(uint64_t key, uint64_t version, size_t bytes) {
  std::string row(bytes, '\0');
  uint64_t x = key * 0x9e3779b97f4a7c15ull + version * 0xbf58476d1ce4e5b9ull + bytes;
  for (size_t i = 0; i < bytes; ++i) {
    x ^= x >> 29;
    x *= 0x94d049bb133111ebull;
    row[i] = static_cast<char>(x >> 56);
  }
  return row;
}

std::string Rows(const std::vector<uint64_t>& keys, uint64_t version, size_t bytes) {
  std::string out;
  for (uint64_t k : keys) out += Row(k, version, bytes);
  return out;
}

// Reads `keys` from `cf`; returns per key the row or "<absent>".
std::vector<std::string> Get(const RocksDb& db, const std::string& cf,
                             const std::vector<uint64_t>& keys, size_t bytes) {
  std::string values(keys.size() * bytes, 'x');
  std::unique_ptr<bool[]> found(new bool[keys.size()]);
  absl::Status status = db.MultiGet(cf, keys, bytes, values.data(), found.get());
  EXPECT_TRUE(status.ok()) << status;
  std::vector<std::string> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    out.push_back(found[i] ? values.substr(i * bytes, bytes) : std::string("<absent>"));
  }
  return out;
}

std::unique_ptr<RocksDb> OpenOrDie(const std::string& path, RocksDbOptions options = {}) {
  // Small buffers keep the tests light; the behaviour under test does not
  // depend on sizes.
  options.block_cache_bytes = 8 << 20;
  options.write_buffer_bytes = 4 << 20;
  auto db = RocksDb::Open(path, options);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? std::move(db).value() : nullptr;
}

TEST(RocksDbTest, RoundTripAcrossFamiliesWithDifferentRowSizes) {
  brook::testing::TempDir dir;
  auto db = OpenOrDie(dir.Join("db"));
  ASSERT_NE(db, nullptr);
  const std::vector<std::pair<std::string, size_t>> families = {
      {"small", 64}, {"mid", 272}, {"wide", 1104}};
  const std::vector<uint64_t> keys = {0, 1, 7, 1000, 1ull << 40, ~0ull};
  for (const auto& [name, bytes] : families) {
    ASSERT_TRUE(db->CreateColumnFamily(name).ok());
    ASSERT_TRUE(db->CreateColumnFamily(name).ok());  // again: ok, no-op
    std::string values = Rows(keys, /*version=*/bytes, bytes);
    ASSERT_TRUE(db->Write(name, keys, values.data(), bytes, {}).ok());
  }
  EXPECT_THAT(db->ColumnFamilies(), ElementsAre("mid", "small", "wide"));
  EXPECT_TRUE(db->HasColumnFamily("mid"));
  EXPECT_FALSE(db->HasColumnFamily("default"));
  // The same keys in each family hold that family's rows (before and after
  // the memtables are flushed to SST files).
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [name, bytes] : families) {
      std::vector<std::string> got = Get(*db, name, keys, bytes);
      for (size_t i = 0; i < keys.size(); ++i) {
        EXPECT_EQ(Row(keys[i], bytes, bytes), got[i]) << name << " key " << keys[i];
      }
    }
    ASSERT_TRUE(db->Flush().ok());
  }
  EXPECT_EQ(keys.size(), db->ApproximateKeys("mid"));
}

TEST(RocksDbTest, MissingKeysAreReportedNotFoundAndLeaveTheirSlotAlone) {
  brook::testing::TempDir dir;
  auto db = OpenOrDie(dir.Join("db"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->CreateColumnFamily("t").ok());
  const std::vector<uint64_t> written = {2, 4, 6};
  std::string values = Rows(written, 1, 32);
  ASSERT_TRUE(db->Write("t", written, values.data(), 32, {}).ok());
  std::vector<std::string> got = Get(*db, "t", {1, 2, 3, 4, 5, 6, 1ull << 63}, 32);
  EXPECT_THAT(got, ElementsAre("<absent>", Row(2, 1, 32), "<absent>", Row(4, 1, 32), "<absent>",
                               Row(6, 1, 32), "<absent>"));
  // An absent key's slot is not written to.
  std::string out(64, 'z');
  bool found[2] = {true, true};
  ASSERT_TRUE(db->MultiGet("t", std::vector<uint64_t>{9, 2}, 32, out.data(), found).ok());
  EXPECT_FALSE(found[0]);
  EXPECT_TRUE(found[1]);
  EXPECT_EQ(std::string(32, 'z'), out.substr(0, 32));
}

TEST(RocksDbTest, StoredValueOfAnotherSizeIsDataLossNamingFamilyAndKey) {
  brook::testing::TempDir dir;
  auto db = OpenOrDie(dir.Join("db"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->CreateColumnFamily("user_emb").ok());
  const std::vector<uint64_t> keys = {11, 12345};
  std::string values = Rows(keys, 1, 100);
  ASSERT_TRUE(db->Write("user_emb", keys, values.data(), 100, {}).ok());
  std::string out(2 * 128, '\0');
  bool found[2];
  absl::Status status =
      db->MultiGet("user_emb", std::vector<uint64_t>{12345}, 128, out.data(), found);
  EXPECT_EQ(absl::StatusCode::kDataLoss, status.code()) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("user_emb"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("12345"));
  EXPECT_THAT(std::string(status.message()), HasSubstr(dir.Join("db")));
  EXPECT_THAT(std::string(status.message()), HasSubstr("100 bytes"));
}

TEST(RocksDbTest, DeletesRemoveKeysAndWinOverPutsInTheSameBatch) {
  brook::testing::TempDir dir;
  auto db = OpenOrDie(dir.Join("db"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->CreateColumnFamily("t").ok());
  const std::vector<uint64_t> keys = {1, 2, 3, 4};
  std::string values = Rows(keys, 1, 16);
  ASSERT_TRUE(db->Write("t", keys, values.data(), 16, {}).ok());
  ASSERT_TRUE(db->Flush().ok());  // deletes must also shadow rows in SST files
  // Put 5 and 3 (new version), delete 1 and 3 and a never-written key.
  std::string more = Rows({5, 3}, 2, 16);
  ASSERT_TRUE(
      db->Write("t", std::vector<uint64_t>{5, 3}, more.data(), 16, std::vector<uint64_t>{1, 3, 99})
          .ok());
  EXPECT_THAT(Get(*db, "t", {1, 2, 3, 4, 5}, 16),
              ElementsAre("<absent>", Row(2, 1, 16), "<absent>", Row(4, 1, 16), Row(5, 2, 16)));
  // Deletes only.
  ASSERT_TRUE(db->Write("t", {}, nullptr, 16, std::vector<uint64_t>{2}).ok());
  EXPECT_THAT(Get(*db, "t", {2, 4}, 16), ElementsAre("<absent>", Row(4, 1, 16)));
}

TEST(RocksDbTest, CompactAllKeepsLatestRowsAndDropsShadowedOnes) {
  brook::testing::TempDir dir;
  auto db = OpenOrDie(dir.Join("db"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->CreateColumnFamily("t").ok());
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 3000; ++k) keys.push_back(k);
  std::string v1 = Rows(keys, 1, 200);
  ASSERT_TRUE(db->Write("t", keys, v1.data(), 200, {}).ok());
  ASSERT_TRUE(db->Flush().ok());
  // Overwrite the first half, delete the last 1000: two more L0 files.
  std::vector<uint64_t> first(keys.begin(), keys.begin() + 1500);
  std::vector<uint64_t> last(keys.end() - 1000, keys.end());
  std::string v2 = Rows(first, 2, 200);
  ASSERT_TRUE(db->Write("t", first, v2.data(), 200, {}).ok());
  ASSERT_TRUE(db->Flush().ok());
  ASSERT_TRUE(db->Write("t", {}, nullptr, 200, last).ok());
  ASSERT_TRUE(db->Flush().ok());
  const uint64_t before = db->GetStats().sst_bytes;
  ASSERT_TRUE(db->CompactAll().ok());
  // Shadowed versions and deleted rows are gone: 2000 rows instead of 4500.
  EXPECT_LT(db->GetStats().sst_bytes, before * 2 / 3);
  EXPECT_EQ(2000u, db->ApproximateKeys("t"));
  std::vector<std::string> got = Get(*db, "t", keys, 200);
  for (uint64_t k = 0; k < 3000; ++k) {
    std::string want = k < 1500 ? Row(k, 2, 200) : k < 2000 ? Row(k, 1, 200) : "<absent>";
    ASSERT_EQ(want, got[k]) << k;
  }
}

TEST(RocksDbTest, ForEachVisitsKeysInNumericOrderAndStopsOnError) {
  brook::testing::TempDir dir;
  auto db = OpenOrDie(dir.Join("db"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->CreateColumnFamily("t").ok());
  // Little-endian or text keys would order 256 before 1 or 2^40 before 255.
  const std::vector<uint64_t> keys = {1ull << 63, 256, 1, 1ull << 40, 255, 0, ~0ull, 65536};
  std::string values = Rows(keys, 3, 8);
  ASSERT_TRUE(db->Write("t", keys, values.data(), 8, {}).ok());
  std::vector<uint64_t> seen;
  ASSERT_TRUE(db->ForEach("t", [&](uint64_t key, std::string_view value) {
                  EXPECT_EQ(Row(key, 3, 8), std::string(value));
                  seen.push_back(key);
                  return absl::OkStatus();
                }).ok());
  EXPECT_THAT(seen, ElementsAre(0, 1, 255, 256, 65536, 1ull << 40, 1ull << 63, ~0ull));

  int calls = 0;
  absl::Status status = db->ForEach("t", [&](uint64_t key, std::string_view) {
    ++calls;
    return key == 256 ? absl::CancelledError("enough") : absl::OkStatus();
  });
  EXPECT_EQ(absl::StatusCode::kCancelled, status.code());
  EXPECT_EQ(4, calls);
}

TEST(RocksDbTest, ReopenKeepsDataAndFamilies) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("db");
  {
    auto db = OpenOrDie(path);
    ASSERT_NE(db, nullptr);
    ASSERT_TRUE(db->CreateColumnFamily("a").ok());
    ASSERT_TRUE(db->CreateColumnFamily("b").ok());
    ASSERT_TRUE(db->CreateColumnFamily("empty").ok());
    std::string values = Rows({1, 2}, 1, 24);
    ASSERT_TRUE(db->Write("a", std::vector<uint64_t>{1, 2}, values.data(), 24, {}).ok());
    ASSERT_TRUE(db->Write("b", std::vector<uint64_t>{1, 2}, values.data(), 24, {}).ok());
    ASSERT_TRUE(db->Flush().ok());
  }
  RocksDbOptions options;
  options.create_if_missing = false;
  auto db = OpenOrDie(path, options);
  ASSERT_NE(db, nullptr);
  EXPECT_THAT(db->ColumnFamilies(), ElementsAre("a", "b", "empty"));
  EXPECT_THAT(Get(*db, "a", {1, 2}, 24), ElementsAre(Row(1, 1, 24), Row(2, 1, 24)));
  EXPECT_THAT(Get(*db, "b", {1, 2}, 24), ElementsAre(Row(1, 1, 24), Row(2, 1, 24)));
  EXPECT_THAT(Get(*db, "empty", {1}, 24), ElementsAre("<absent>"));
}

// Copies a DB directory while the DB is open: what a crash at this point
// would leave on disk (nothing that only lives in the memtable).
std::string CrashImage(const std::string& path, const std::string& to) {
  std::filesystem::copy(path, to, std::filesystem::copy_options::recursive);
  std::filesystem::remove(std::filesystem::path(to) / "LOCK");
  return to;
}

TEST(RocksDbTest, WithWalDisabledFlushAloneMakesWritesSurviveACrash) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("db");
  RocksDbOptions options;
  ASSERT_TRUE(options.disable_wal);
  auto db = OpenOrDie(path, options);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->CreateColumnFamily("t").ok());
  std::string values = Rows({1, 2, 3}, 1, 40);
  ASSERT_TRUE(db->Write("t", std::vector<uint64_t>{1, 2, 3}, values.data(), 40, {}).ok());
  ASSERT_TRUE(db->Flush().ok());
  const std::string flushed = CrashImage(path, dir.Join("after_flush"));
  // Written after the flush, with no WAL: only in the memtable.
  std::string later = Rows({4}, 1, 40);
  ASSERT_TRUE(db->Write("t", std::vector<uint64_t>{4}, later.data(), 40, {}).ok());
  const std::string unflushed = CrashImage(path, dir.Join("before_second_flush"));

  auto after_flush = OpenOrDie(flushed);
  ASSERT_NE(after_flush, nullptr);
  EXPECT_THAT(Get(*after_flush, "t", {1, 2, 3, 4}, 40),
              ElementsAre(Row(1, 1, 40), Row(2, 1, 40), Row(3, 1, 40), "<absent>"));
  // The control: the unflushed row really was only in memory, so this test
  // would catch a Flush() that did not persist.
  auto before_second_flush = OpenOrDie(unflushed);
  ASSERT_NE(before_second_flush, nullptr);
  EXPECT_THAT(Get(*before_second_flush, "t", {3, 4}, 40), ElementsAre(Row(3, 1, 40), "<absent>"));
}

TEST(RocksDbTest, DropFamilyRemovesItAndItsRows) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("db");
  {
    auto db = OpenOrDie(path);
    ASSERT_NE(db, nullptr);
    ASSERT_TRUE(db->CreateColumnFamily("keep").ok());
    ASSERT_TRUE(db->CreateColumnFamily("gone").ok());
    std::string values = Rows({7}, 1, 16);
    ASSERT_TRUE(db->Write("gone", std::vector<uint64_t>{7}, values.data(), 16, {}).ok());
    ASSERT_TRUE(db->Flush().ok());
    ASSERT_TRUE(db->DropColumnFamily("gone").ok());
    ASSERT_TRUE(db->DropColumnFamily("gone").ok());   // again: ok
    ASSERT_TRUE(db->DropColumnFamily("never").ok());  // missing: ok
    EXPECT_FALSE(db->HasColumnFamily("gone"));
    EXPECT_THAT(db->ColumnFamilies(), ElementsAre("keep"));
    bool found;
    char out[16];
    EXPECT_EQ(absl::StatusCode::kNotFound,
              db->MultiGet("gone", std::vector<uint64_t>{7}, 16, out, &found).code());
    // A family created again under the name starts empty.
    ASSERT_TRUE(db->CreateColumnFamily("gone").ok());
    EXPECT_THAT(Get(*db, "gone", {7}, 16), ElementsAre("<absent>"));
    ASSERT_TRUE(db->DropColumnFamily("gone").ok());
  }
  auto db = OpenOrDie(path);
  ASSERT_NE(db, nullptr);
  EXPECT_THAT(db->ColumnFamilies(), ElementsAre("keep"));
}

TEST(RocksDbTest, CheckpointIsAReadOnlyCopyUnaffectedByLaterWrites) {
  brook::testing::TempDir dir;
  auto db = OpenOrDie(dir.Join("db"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->CreateColumnFamily("a").ok());
  ASSERT_TRUE(db->CreateColumnFamily("b").ok());
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 500; ++k) keys.push_back(k * 977);
  std::string values = Rows(keys, 1, 72);
  ASSERT_TRUE(db->Write("a", keys, values.data(), 72, {}).ok());
  ASSERT_TRUE(db->Flush().ok());  // some rows in SST files ...
  std::string b_values = Rows({5}, 1, 72);
  // ... and some only in the memtable: the checkpoint must flush them itself.
  ASSERT_TRUE(db->Write("b", std::vector<uint64_t>{5}, b_values.data(), 72, {}).ok());
  const std::string checkpoint = dir.Join("ckpt");
  ASSERT_TRUE(db->CreateCheckpoint(checkpoint).ok());
  EXPECT_EQ(absl::StatusCode::kAlreadyExists, db->CreateCheckpoint(checkpoint).code());

  // Later changes to the live DB: overwrite, delete, new family, compaction
  // input (a flush), dropped family.
  std::string v2 = Rows(keys, 2, 72);
  ASSERT_TRUE(db->Write("a", keys, v2.data(), 72, std::vector<uint64_t>{0, 977}).ok());
  ASSERT_TRUE(db->CreateColumnFamily("c").ok());
  ASSERT_TRUE(db->DropColumnFamily("b").ok());
  ASSERT_TRUE(db->Flush().ok());

  auto ro = RocksDb::OpenReadOnly(checkpoint);
  ASSERT_TRUE(ro.ok()) << ro.status();
  EXPECT_TRUE((*ro)->read_only());
  EXPECT_THAT((*ro)->ColumnFamilies(), ElementsAre("a", "b"));
  std::vector<std::string> got = Get(**ro, "a", keys, 72);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(Row(keys[i], 1, 72), got[i]) << keys[i];
  EXPECT_THAT(Get(**ro, "b", {5}, 72), ElementsAre(Row(5, 1, 72)));
  size_t rows = 0;
  ASSERT_TRUE((*ro)
                  ->ForEach("a",
                            [&](uint64_t, std::string_view) {
                              ++rows;
                              return absl::OkStatus();
                            })
                  .ok());
  EXPECT_EQ(keys.size(), rows);
  // And the live DB sees its own later writes.
  EXPECT_THAT(Get(*db, "a", {0, 977 * 2}, 72), ElementsAre("<absent>", Row(977 * 2, 2, 72)));
}

TEST(RocksDbTest, ReadOnlyRefusesWritesAndFamilyChanges) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("db");
  {
    auto db = OpenOrDie(path);
    ASSERT_NE(db, nullptr);
    ASSERT_TRUE(db->CreateColumnFamily("t").ok());
    std::string values = Rows({1}, 1, 8);
    ASSERT_TRUE(db->Write("t", std::vector<uint64_t>{1}, values.data(), 8, {}).ok());
  }  // a clean close flushes, even without Flush()
  auto ro = RocksDb::OpenReadOnly(path);
  ASSERT_TRUE(ro.ok()) << ro.status();
  RocksDb& db = **ro;
  std::string values = Rows({2}, 1, 8);
  absl::Status write = db.Write("t", std::vector<uint64_t>{2}, values.data(), 8, {});
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, write.code());
  EXPECT_THAT(std::string(write.message()), HasSubstr(path));
  EXPECT_THAT(std::string(write.message()), HasSubstr("'t'"));
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition,
            db.Write("t", {}, nullptr, 8, std::vector<uint64_t>{1}).code());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, db.CreateColumnFamily("u").code());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, db.DropColumnFamily("t").code());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, db.CreateCheckpoint(dir.Join("ckpt")).code());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, db.CompactAll().code());
  EXPECT_TRUE(db.Flush().ok());
  EXPECT_THAT(Get(db, "t", {1, 2}, 8), ElementsAre(Row(1, 1, 8), "<absent>"));
}

TEST(RocksDbTest, OpeningAMissingDbWithoutCreateIsNotFound) {
  brook::testing::TempDir dir;
  RocksDbOptions options;
  options.create_if_missing = false;
  auto db = RocksDb::Open(dir.Join("nothing"), options);
  EXPECT_EQ(absl::StatusCode::kNotFound, db.status().code());
  EXPECT_THAT(std::string(db.status().message()), HasSubstr(dir.Join("nothing")));
  auto ro = RocksDb::OpenReadOnly(dir.Join("nothing"));
  EXPECT_EQ(absl::StatusCode::kNotFound, ro.status().code());
}

TEST(RocksDbTest, ErrorsNameThePathAndTheFamily) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("db");
  auto db = OpenOrDie(path);
  ASSERT_NE(db, nullptr);
  bool found;
  char out[8];
  std::vector<absl::Status> errors = {
      db->MultiGet("no_such_table", std::vector<uint64_t>{1}, 8, out, &found),
      db->Write("no_such_table", std::vector<uint64_t>{1}, out, 8, {}),
      db->ForEach("no_such_table", [](uint64_t, std::string_view) { return absl::OkStatus(); }),
  };
  for (const absl::Status& status : errors) {
    EXPECT_EQ(absl::StatusCode::kNotFound, status.code()) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("no_such_table"));
    EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  }
  EXPECT_EQ(0u, db->ApproximateKeys("no_such_table"));
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, db->CreateColumnFamily("default").code());
  EXPECT_THAT(db->ColumnFamilies(), IsEmpty());
}

// A PS holds a family per table; a Criteo-shaped job has 52. Their empty
// memtables must not fill the shared write buffer: with a 2% memtable Bloom
// (1.3 MiB allocated with every memtable) 52 families took the whole 64 MiB,
// and RocksDB flushed a few hundred rows at a time, forever.
TEST(RocksDbTest, FiftyTwoFamiliesWithAFewRowsEachFlushNothing) {
  brook::testing::TempDir dir;
  RocksDbOptions options;  // the PS's sizes: 64 MiB of memtables in all
  options.block_cache_bytes = 8 << 20;
  auto opened = RocksDb::Open(dir.Join("db"), options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  RocksDb& db = **opened;
  constexpr size_t kRowBytes = 88;
  std::vector<uint64_t> keys(100);
  std::string rows(keys.size() * kRowBytes, 'r');
  for (int t = 0; t < 52; ++t) {
    const std::string family = "table:C" + std::to_string(t);
    ASSERT_TRUE(db.CreateColumnFamily(family).ok());
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = t * 1000 + i;
    ASSERT_TRUE(db.Write(family, keys, rows.data(), kRowBytes, {}).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // flushes run in the background
  const RocksDb::Stats stats = db.GetStats();
  EXPECT_EQ(stats.sst_bytes, 0u) << "memtables were flushed";
  EXPECT_LT(stats.memtable_bytes, uint64_t{16} << 20);
  EXPECT_GT(stats.memtable_bytes, 0u);
}

TEST(RocksDbTest, StatsCountWritesReadsAndSstBytes) {
  brook::testing::TempDir dir;
  auto db = OpenOrDie(dir.Join("db"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->CreateColumnFamily("t").ok());
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 1000; ++k) keys.push_back(k);
  std::string values = Rows(keys, 1, 128);
  ASSERT_TRUE(db->Write("t", keys, values.data(), 128, {}).ok());
  RocksDb::Stats before_flush = db->GetStats();
  EXPECT_GE(before_flush.bytes_written, 1000u * 128);
  EXPECT_EQ(0u, before_flush.sst_bytes);
  ASSERT_TRUE(db->Flush().ok());
  Get(*db, "t", keys, 128);
  RocksDb::Stats stats = db->GetStats();
  EXPECT_GE(stats.sst_bytes, 1000u * 128);
  EXPECT_GE(stats.bytes_read, 1000u * 128);
  EXPECT_GT(stats.block_cache_hits + stats.block_cache_misses, 0u);
  EXPECT_EQ(1000u, db->ApproximateKeys("t"));
}

// Four threads write and read back disjoint key ranges of two families while
// a fifth creates and drops a family of its own; each reader must see exactly
// its own latest rows.
TEST(RocksDbTest, ConcurrentWritesAndMultiGetsOnDisjointRanges) {
  brook::testing::TempDir dir;
  auto db = OpenOrDie(dir.Join("db"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->CreateColumnFamily("even").ok());
  ASSERT_TRUE(db->CreateColumnFamily("odd").ok());
  constexpr size_t kBytes = 48;
  constexpr uint64_t kKeysPerThread = 2000;
  constexpr int kRounds = 30;
  std::atomic<int> failures{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string cf = t % 2 == 0 ? "even" : "odd";
      const uint64_t base = static_cast<uint64_t>(t) << 32;
      for (int round = 1; round <= kRounds; ++round) {
        std::vector<uint64_t> keys;
        for (uint64_t i = round % 3; i < kKeysPerThread; i += 3) keys.push_back(base + i);
        std::string values = Rows(keys, round, kBytes);
        absl::Status written = db->Write(cf, keys, values.data(), kBytes, {});
        if (!written.ok()) {
          ADD_FAILURE() << written;
          ++failures;
        }
        std::vector<std::string> got = Get(*db, cf, keys, kBytes);
        for (size_t i = 0; i < keys.size(); ++i) {
          if (got[i] != Row(keys[i], round, kBytes)) {
            ++failures;
            break;
          }
        }
        if (round % 10 == 0) {
          absl::Status flushed = db->Flush();
          if (!flushed.ok()) {
            ADD_FAILURE() << flushed;
            ++failures;
          }
        }
      }
    });
  }
  std::thread churn([&] {
    for (int i = 0; !stop.load(); ++i) {
      const std::string cf = absl::StrCat("scratch", i % 3);
      std::string values = Rows({1}, i, kBytes);
      absl::Status status = db->CreateColumnFamily(cf);
      if (status.ok()) status = db->Write(cf, std::vector<uint64_t>{1}, values.data(), kBytes, {});
      if (status.ok() && Get(*db, cf, {1}, kBytes)[0] != Row(1, i, kBytes)) {
        status = absl::InternalError(absl::StrCat("wrong row in ", cf));
      }
      if (status.ok()) status = db->DropColumnFamily(cf);
      if (!status.ok()) {
        ADD_FAILURE() << status;
        ++failures;
      }
    }
  });
  for (std::thread& thread : threads) thread.join();
  stop = true;
  churn.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_THAT(db->ColumnFamilies(), ElementsAre("even", "odd"));
  // Final state: each key holds the last round that wrote it.
  for (int t = 0; t < 4; ++t) {
    const std::string cf = t % 2 == 0 ? "even" : "odd";
    const uint64_t base = static_cast<uint64_t>(t) << 32;
    std::vector<uint64_t> keys;
    for (uint64_t i = 0; i < kKeysPerThread; ++i) keys.push_back(base + i);
    std::vector<std::string> got = Get(*db, cf, keys, kBytes);
    for (uint64_t i = 0; i < kKeysPerThread; ++i) {
      int last = kRounds;
      while (static_cast<uint64_t>(last % 3) != i % 3) --last;
      ASSERT_EQ(Row(keys[i], last, kBytes), got[i]) << cf << " key " << keys[i];
    }
  }
}

}  // namespace
}  // namespace brook::storage
