// TieredRowStore's column family: created by the first eviction write, once
// however many stripes spill at once, never by a retired (dropped) table.
// Real RocksDB in a temp dir.
#include "ps/internal/tiered_row_store.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ps/memory_accountant.h"
#include "storage/rocks_db.h"
#include "tests/testing/test_util.h"

namespace brook::ps::internal {
namespace {

constexpr int kTierFloats = 4;
constexpr char kTierFamily[] = "table:emb";

class TieredFamilyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::RocksDbOptions o;
    o.block_cache_bytes = 1 << 20;
    o.write_buffer_bytes = 1 << 20;
    absl::StatusOr<std::unique_ptr<storage::RocksDb>> db = storage::RocksDb::Open(dir_.path(), o);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
  }

  std::unique_ptr<TieredRowStore> MakeStore(int stripe_bits, uint64_t max_hot_rows,
                                            MemoryAccountant* accountant = nullptr) {
    return std::make_unique<TieredRowStore>(
        TieredRowStoreOptions{.mem = {.row_floats = kTierFloats,
                                      .hot_floats = kTierFloats,
                                      .stripe_bits = stripe_bits,
                                      .huge_pages = false},
                              .max_hot_rows = max_hot_rows,
                              .db = db_.get(),
                              .column_family = kTierFamily,
                              .seed = 5,
                              .accountant = accountant,
                              .charged_row_bytes = accountant ? uint64_t{32} : 0});
  }

  // The stripe's checkpoint lists (stripe_bits 0): false if they overflowed.
  static bool TakeDelta(TieredRowStore& s, std::vector<uint64_t>* evicted_dirty) {
    bool complete = false;
    std::vector<uint64_t> erased;
    s.Write(
        0, [&](RowStore::Writer&) { complete = s.TakeCheckpointDelta(0, evicted_dirty, &erased); });
    return complete;
  }

  // Writes key's row (every float = key + 0.5), as a push does: FindBatch
  // first (which makes room, spilling other rows), then Insert if absent.
  static void Put(TieredRowStore& s, uint64_t key) {
    const uint64_t h = RowStore::HashKey(key);
    s.Write(s.StripeOf(h), [&](RowStore::Writer& w) {
      RowHeader* row = nullptr;
      w.FindBatch({&key, 1}, {&h, 1}, {&row, 1});
      if (row == nullptr) row = w.Insert(key, h);
      ASSERT_NE(row, nullptr);
      row->MarkUpdated(static_cast<uint32_t>(key), 0);
      for (int i = 0; i < kTierFloats; ++i) row->floats()[i] = static_cast<float>(key) + 0.5f;
    });
  }

  // The row's first float from memory or RocksDB; -1 when absent.
  static float Get(const TieredRowStore& s, uint64_t key) {
    const uint64_t h = RowStore::HashKey(key);
    float out = -1;
    s.Read(s.StripeOf(h), [&](const RowStore::Reader& r) {
      const RowHeader* row = nullptr;
      r.FindBatch({&key, 1}, {&h, 1}, {&row, 1});
      EXPECT_TRUE(r.ok()) << "key " << key;
      if (row != nullptr) out = row->floats()[0];
    });
    return out;
  }

  testing::TempDir dir_;
  std::unique_ptr<storage::RocksDb> db_;
};

TEST_F(TieredFamilyTest, NoFamilyUntilTheFirstSpillThenRowsComeBackFromIt) {
  auto store = MakeStore(/*stripe_bits=*/0, /*max_hot_rows=*/8);
  for (uint64_t k = 0; k < 8; ++k) Put(*store, k);
  EXPECT_FALSE(store->has_family());
  EXPECT_FALSE(db_->HasColumnFamily(kTierFamily));
  EXPECT_EQ(Get(*store, 3), 3.5f);
  EXPECT_EQ(Get(*store, 100), -1.0f);  // a miss never asks RocksDB (no family to ask)
  int cold = 0;
  ASSERT_TRUE(store
                  ->ForEachCold([&](const RowHeader&) {
                    ++cold;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(cold, 0);
  EXPECT_EQ(store->tier_stats().errors, 0u);
  EXPECT_FALSE(store->tier_stats().has_family);

  for (uint64_t k = 8; k < 40; ++k) Put(*store, k);  // past the budget: spills
  EXPECT_TRUE(store->has_family());
  EXPECT_TRUE(db_->HasColumnFamily(kTierFamily));
  const TierStats t = store->tier_stats();
  EXPECT_GT(t.evictions, 0u);
  EXPECT_EQ(t.errors, 0u);
  for (uint64_t k = 0; k < 40; ++k) EXPECT_EQ(Get(*store, k), k + 0.5f) << "key " << k;
  cold = 0;
  ASSERT_TRUE(store
                  ->ForEachCold([&](const RowHeader&) {
                    ++cold;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_GE(cold, 32);
}

// The keys of rows spilled while changed, kept for the next incremental
// checkpoint, are charged to the node's accountant, within an eighth of its
// limit: a long run without checkpoints cannot grow them past it (they grew
// by 8 bytes per spilled row, without bound, in the 100M-row run).
TEST_F(TieredFamilyTest, CheckpointKeyListsAreChargedAndBoundedByTheNodeLimit) {
  // Limit 256 KiB: the lists may hold 32 KiB, 4096 keys (one charge step).
  MemoryAccountant accountant(256 << 10);
  {
    auto store = MakeStore(/*stripe_bits=*/0, /*max_hot_rows=*/64, &accountant);
    for (uint64_t k = 0; k < 1000; ++k) Put(*store, k);
    EXPECT_EQ(accountant.bookkeeping(), 32u << 10);
    EXPECT_GE(accountant.used(), accountant.bookkeeping() + 64 * 32);
    std::vector<uint64_t> evicted;
    EXPECT_TRUE(TakeDelta(*store, &evicted));
    EXPECT_EQ(evicted.size(), store->tier_stats().evictions);
    EXPECT_EQ(accountant.bookkeeping(), 0u);  // handed back with the lists

    // Past 4096 keys the lists are dropped, their charge returned, and the
    // next checkpoint must be a full one.
    for (uint64_t k = 1000; k < 6000; ++k) Put(*store, k);
    EXPECT_EQ(accountant.bookkeeping(), 0u);
    evicted.clear();
    EXPECT_FALSE(TakeDelta(*store, &evicted));
    EXPECT_TRUE(evicted.empty());
    // Counting again from there.
    for (uint64_t k = 6000; k < 6100; ++k) Put(*store, k);
    EXPECT_EQ(accountant.bookkeeping(), 32u << 10);
    for (uint64_t k = 0; k < 6100; ++k) ASSERT_EQ(Get(*store, k), k + 0.5f) << "key " << k;
  }
  // The store's destruction returns what it held: rows and lists.
  EXPECT_EQ(accountant.bookkeeping(), 0u);
  EXPECT_EQ(accountant.used(), 0u);
}

// Every stripe's first spill races to create the family: all succeed, no
// write fails, and RocksDB lists the family once.
TEST_F(TieredFamilyTest, StripesSpillingAtOnceCreateTheFamilyOnce) {
  constexpr int kThreads = 8;
  constexpr uint64_t kKeysPerThread = 400;
  auto store = MakeStore(/*stripe_bits=*/4, /*max_hot_rows=*/64);  // 4 rows a stripe
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (uint64_t k = 0; k < kKeysPerThread; ++k) Put(*store, t * kKeysPerThread + k);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(store->has_family());
  EXPECT_EQ(db_->ColumnFamilies(), std::vector<std::string>{kTierFamily});
  const TierStats s = store->tier_stats();
  EXPECT_EQ(s.errors, 0u);
  EXPECT_GT(s.evictions, kThreads * kKeysPerThread / 2);
  for (uint64_t k = 0; k < kThreads * kKeysPerThread; ++k) {
    ASSERT_EQ(Get(*store, k), k + 0.5f) << "key " << k;
  }
}

// A dropped table still held by a request must not bring its family back
// after the PS dropped it: a new table of the name would find its rows.
TEST_F(TieredFamilyTest, ARetiredStoreNeverCreatesItsFamilyAndKeepsItsRows) {
  auto store = MakeStore(/*stripe_bits=*/0, /*max_hot_rows=*/4);
  store->Retire();
  for (uint64_t k = 0; k < 12; ++k) Put(*store, k);
  EXPECT_FALSE(store->has_family());
  EXPECT_FALSE(db_->HasColumnFamily(kTierFamily));
  EXPECT_GT(store->tier_stats().errors, 0u);  // the spills failed, counted
  // Nothing left memory: every row is still served.
  for (uint64_t k = 0; k < 12; ++k) EXPECT_EQ(Get(*store, k), k + 0.5f) << "key " << k;
}

// Retiring after the family exists changes nothing for the store: the PS
// drops the family next, and then reads fail as they did before.
TEST_F(TieredFamilyTest, ARetiredStoreWithAFamilyKeepsUsingIt) {
  auto store = MakeStore(/*stripe_bits=*/0, /*max_hot_rows=*/4);
  for (uint64_t k = 0; k < 12; ++k) Put(*store, k);
  ASSERT_TRUE(store->has_family());
  store->Retire();
  for (uint64_t k = 12; k < 16; ++k) Put(*store, k);
  EXPECT_EQ(store->tier_stats().errors, 0u);
  for (uint64_t k = 0; k < 16; ++k) EXPECT_EQ(Get(*store, k), k + 0.5f) << "key " << k;
}

}  // namespace
}  // namespace brook::ps::internal
