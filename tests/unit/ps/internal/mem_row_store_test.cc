#include "ps/internal/mem_row_store.h"

#include <cstring>
#include <random>
#include <unordered_map>
#include <vector>

#include "gtest/gtest.h"

namespace brook::ps::internal {
namespace {

constexpr int kFloats = 3;

struct Store {
  explicit Store(int stripe_bits)
      : store(MemRowStoreOptions{.row_floats = kFloats,
                                 .hot_floats = 2,
                                 .stripe_bits = stripe_bits,
                                 .huge_pages = false}) {}

  RowHeader* Find(uint64_t key) {
    const uint64_t h = RowStore::HashKey(key);
    RowHeader* out = nullptr;
    store.Write(store.StripeOf(h), [&](RowStore::Writer& w) {
      RowHeader* rows[1];
      w.FindBatch({&key, 1}, {&h, 1}, {rows, 1});
      out = rows[0];
    });
    return out;
  }
  void Insert(uint64_t key, float value) {
    const uint64_t h = RowStore::HashKey(key);
    store.Write(store.StripeOf(h), [&](RowStore::Writer& w) {
      RowHeader* r = w.Insert(key, h);
      ASSERT_NE(r, nullptr);
      ASSERT_EQ(r->key, key);
      for (int i = 0; i < kFloats; ++i) r->floats()[i] = value + i;
    });
  }
  void Erase(uint64_t key) {
    const uint64_t h = RowStore::HashKey(key);
    store.Write(store.StripeOf(h), [&](RowStore::Writer& w) { w.Erase(key, h); });
  }

  MemRowStore store;
};

// Random inserts and erases against std::unordered_map, in one stripe (long
// probe runs, wrap-around, backward-shift deletion) and in many.
TEST(MemRowStoreTest, MatchesReferenceMapUnderRandomInsertErase) {
  for (int stripe_bits : {0, 4, 8}) {
    Store s(stripe_bits);
    std::unordered_map<uint64_t, float> ref;
    std::mt19937_64 rng(stripe_bits + 1);
    std::vector<uint64_t> present;
    for (int op = 0; op < 60000; ++op) {
      const bool insert = present.empty() || rng() % 3 != 0;
      if (insert) {
        // Small key range so that erased keys come back.
        const uint64_t key = rng() % 20000;
        if (ref.count(key)) continue;
        const float v = static_cast<float>(op);
        s.Insert(key, v);
        ref[key] = v;
        present.push_back(key);
      } else {
        const size_t i = rng() % present.size();
        const uint64_t key = present[i];
        present[i] = present.back();
        present.pop_back();
        s.Erase(key);
        ref.erase(key);
      }
      if (op % 5000 == 0 || op == 59999) {
        for (uint64_t key = 0; key < 20000; ++key) {
          RowHeader* r = s.Find(key);
          auto it = ref.find(key);
          if (it == ref.end()) {
            ASSERT_EQ(r, nullptr) << key;
          } else {
            ASSERT_NE(r, nullptr) << key;
            ASSERT_EQ(r->key, key);
            for (int i = 0; i < kFloats; ++i) ASSERT_EQ(r->floats()[i], it->second + i);
          }
        }
      }
    }
    EXPECT_EQ(s.store.Stats().rows, ref.size());
    // ForEach visits exactly the present rows.
    size_t seen = 0;
    for (int st = 0; st < s.store.num_stripes(); ++st) {
      s.store.Read(st, [&](const RowStore::Reader& r) {
        r.ForEach([&](const RowHeader& row) {
          ++seen;
          EXPECT_EQ(ref.count(row.key), 1u);
        });
      });
    }
    EXPECT_EQ(seen, ref.size());
  }
}

TEST(MemRowStoreTest, BatchFindReturnsNullForAbsentAndHandlesLargeBatches) {
  Store s(0);
  for (uint64_t k = 0; k < 1000; k += 2) s.Insert(k, static_cast<float>(k));
  std::vector<uint64_t> keys(1000), hashes(1000);
  for (uint64_t k = 0; k < 1000; ++k) {
    keys[k] = k;
    hashes[k] = RowStore::HashKey(k);
  }
  std::vector<const RowHeader*> rows(1000);
  s.store.Read(0, [&](const RowStore::Reader& r) {
    r.FindBatch(keys, hashes, absl::MakeSpan(rows));
    for (uint64_t k = 0; k < 1000; ++k) {
      if (k % 2 == 0) {
        ASSERT_NE(rows[k], nullptr);
        EXPECT_EQ(rows[k]->floats()[0], static_cast<float>(k));
      } else {
        EXPECT_EQ(rows[k], nullptr);
      }
    }
  });
}

TEST(MemRowStoreTest, ErasedRowsAreReusedWithoutGrowingMemory) {
  Store s(0);
  for (uint64_t k = 0; k < 5000; ++k) s.Insert(k, 1);
  const uint64_t mem = s.store.Stats().memory_bytes;
  for (int round = 0; round < 5; ++round) {
    for (uint64_t k = 0; k < 5000; ++k) s.Erase(k + round * 5000);
    for (uint64_t k = 0; k < 5000; ++k) s.Insert(k + (round + 1) * 5000, 2);
  }
  EXPECT_EQ(s.store.Stats().rows, 5000u);
  EXPECT_EQ(s.store.Stats().memory_bytes, mem);
}

TEST(MemRowStoreTest, RowsAreAlignedAndStrideIsCompact) {
  Store s(0);
  EXPECT_EQ(s.store.stride(), 32u);  // 16 B header + 3 floats, rounded to 8
  for (uint64_t k = 0; k < 100; ++k) s.Insert(k, 0);
  for (uint64_t k = 0; k < 100; ++k) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s.Find(k)) % 8, 0u);
  }
}

// The index is kept at most half full, so that most keys sit at their home
// entry and a batch lookup's guess at the end of its probe is right
// (mem_row_store.cc, kMaxLoadNum / kMaxLoadDen); and it grows by 1.5x, so it
// is at least a third full once past its first size.
TEST(MemRowStoreTest, IndexStaysBetweenAThirdAndHalfFullAsRowsArrive) {
  Store s(0);
  for (uint64_t k = 0; k < 50000; ++k) {
    s.Insert(k, 0);
    const uint64_t rows = k + 1, cap = s.store.index_capacity(0);
    ASSERT_LE(rows * 2, cap) << "more than half full at " << rows << " rows";
    if (rows > 16) {
      ASSERT_GE(rows * 3 + 3, cap) << "less than a third full at " << rows << " rows";
    }
  }
}

TEST(MemRowStoreTest, ReserveSizesTheIndexOnceForTheRowsToCome) {
  Store s(0);
  s.store.Write(0, [](RowStore::Writer& w) { w.Reserve(10000); });
  const uint32_t cap = s.store.index_capacity(0);
  EXPECT_GE(cap, 2u * 10000);  // at most half full once they are in
  for (uint64_t k = 0; k < 10000; ++k) s.Insert(k, static_cast<float>(k));
  EXPECT_EQ(s.store.index_capacity(0), cap);  // no growth on the way
  // Past the reservation the index grows as before.
  for (uint64_t k = 10000; k < 20000; ++k) s.Insert(k, static_cast<float>(k));
  EXPECT_GT(s.store.index_capacity(0), cap);
  for (uint64_t k = 0; k < 20000; ++k) {
    const RowHeader* r = s.Find(k);
    ASSERT_NE(r, nullptr) << k;
    EXPECT_EQ(r->floats()[0], static_cast<float>(k));
  }
  // Reserving what the index already has room for changes nothing.
  const uint32_t grown = s.store.index_capacity(0);
  s.store.Write(0, [](RowStore::Writer& w) { w.Reserve(1); });
  EXPECT_EQ(s.store.index_capacity(0), grown);
}

// Rows arriving in the order of a bigger index (what a restore reads from a
// checkpoint) into a reserved index all land and are found; the reservation
// is what keeps that from taking quadratic time (BENCHMARKS.md, issue 4).
TEST(MemRowStoreTest, RowsInAnotherIndexOrderLandInAReservedIndex) {
  Store source(0);
  for (uint64_t k = 0; k < 20000; ++k) source.Insert(k * 7919, static_cast<float>(k));
  std::vector<uint64_t> index_order;
  source.store.Read(0, [&](const RowStore::Reader& r) {
    r.ForEach([&](const RowHeader& row) { index_order.push_back(row.key); });
  });
  ASSERT_EQ(index_order.size(), 20000u);
  Store target(0);
  target.store.Write(0, [](RowStore::Writer& w) { w.Reserve(20000); });
  const uint32_t cap = target.store.index_capacity(0);
  for (uint64_t key : index_order) target.Insert(key, static_cast<float>(key / 7919));
  EXPECT_EQ(target.store.index_capacity(0), cap);
  EXPECT_EQ(target.store.Stats().rows, 20000u);
  for (uint64_t k = 0; k < 20000; ++k) {
    const RowHeader* r = target.Find(k * 7919);
    ASSERT_NE(r, nullptr) << k;
    EXPECT_EQ(r->floats()[0], static_cast<float>(k));
  }
}

}  // namespace
}  // namespace brook::ps::internal
