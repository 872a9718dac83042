// RowStore: where a table's rows live, keyed by uint64 key.
//
// A row is a RowHeader followed by row_floats() floats (the table puts the
// weights first and the optimizer slots after them). The store is split into
// stripes by the top bits of HashKey(key); each stripe has its own lock, and
// callers work one stripe at a time through Read() (shared lock) and Write()
// (exclusive lock), handing in a batch of keys that all map to that stripe.
// Grouping a request's keys by stripe takes one lock per stripe per request
// instead of one per key, and lets the store prefetch the batch.
//
// Thread safety: safe for concurrent access from multiple threads without
// external synchronization. Row pointers handed to a Read/Write callback are
// valid only inside that callback. Because the stripe lock is held for the
// whole callback, a caller may keep per-stripe side data of its own (Table's
// admission counts) guarded by it.
//
// Implementations: internal/mem_row_store.h (the in-memory arena) and
// internal/tiered_row_store.h (the arena up to the memory budget, cold rows
// in RocksDB past it), so tables and optimizers do not know which they use.
#pragma once

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "common/hash.h"

namespace brook::ps {

// 16 bytes in front of every row's floats. The same bytes (header + floats)
// are what the RocksDB tier, the WAL-free checkpoints and restores store, so
// the layout is part of the on-disk format (docs/formats.md).
struct RowHeader {
  // Set by every update; cleared when a checkpoint has captured the row.
  static constexpr uint32_t kDirty = 1u << 31;
  // Set while the row's bytes equal its copy in the RocksDB tier (it was
  // read from there or written there and not updated since), so evicting it
  // needs no write. Cleared by every update.
  static constexpr uint32_t kSynced = 1u << 30;
  static constexpr uint32_t kTimeMask = kSynced - 1;

  uint64_t key;
  uint32_t last_step;  // push step of the last update, clamped to [0, 2^32)
  // Bits 0-29: whole seconds since the table's time base at the last update
  // (saturating, ~34 years); bits 30-31: kSynced, kDirty.
  uint32_t time_flags;

  uint32_t last_time() const { return time_flags & kTimeMask; }
  bool dirty() const { return (time_flags & kDirty) != 0; }
  bool synced() const { return (time_flags & kSynced) != 0; }
  // An update: new step and time, dirty, no longer equal to a stored copy.
  void MarkUpdated(uint32_t step, uint32_t seconds) {
    last_step = step;
    time_flags = (seconds < kTimeMask ? seconds : kTimeMask) | kDirty;
  }

  float* floats() { return reinterpret_cast<float*>(this + 1); }
  const float* floats() const { return reinterpret_cast<const float*>(this + 1); }
};
static_assert(sizeof(RowHeader) == 16);

struct RowStoreStats {
  uint64_t rows = 0;
  // Everything the store holds for its rows: arena chunks (including unused
  // tail), index arrays, block tables.
  uint64_t memory_bytes = 0;
  // Times a stripe's index was rebuilt larger. Each rebuild rehashes the
  // stripe's rows under its lock, so requests to that stripe wait.
  uint64_t index_grows = 0;
};

class RowStore {
 public:
  // Shared (read-only) view of one stripe, valid inside Read().
  class Reader {
   public:
    // rows[i] = the row of keys[i], or nullptr if absent.
    // REQUIRES: hashes[i] == HashKey(keys[i]) and every key maps to this
    //   stripe; keys, hashes, rows have equal sizes.
    virtual void FindBatch(absl::Span<const uint64_t> keys, absl::Span<const uint64_t> hashes,
                           absl::Span<const RowHeader*> rows) const = 0;
    // Calls fn on every row of the stripe (any order). A tiered store visits
    // the rows in memory only.
    virtual void ForEach(absl::FunctionRef<void(const RowHeader&)> fn) const = 0;
    // False once a lookup in this callback could not read a lower tier (an
    // I/O error): rows it reported absent may exist, so the caller must fail
    // the request rather than use initial values.
    virtual bool ok() const { return true; }

   protected:
    ~Reader() = default;
  };

  // Exclusive view of one stripe, valid inside Write().
  class Writer {
   public:
    // As Reader::FindBatch, with mutable rows. May first move other rows of
    // the stripe out of memory (a tiered store making room for the batch);
    // never a row of this batch.
    virtual void FindBatch(absl::Span<const uint64_t> keys, absl::Span<const uint64_t> hashes,
                           absl::Span<RowHeader*> rows) = 0;
    // As FindBatch, but looks in memory only: a tiered store neither reads
    // nor brings back a stored copy (it still makes room). For a caller that
    // overwrites every row whole, e.g. a restore: a row in memory wins over
    // its stored copy, and asking RocksDB for each restored key took half of
    // a 100 M-row PS's restart.
    virtual void FindBatchInMemory(absl::Span<const uint64_t> keys,
                                   absl::Span<const uint64_t> hashes, absl::Span<RowHeader*> rows) {
      FindBatch(keys, hashes, rows);
    }
    // Adds a row for `key` and returns it with header.key set; the rest of
    // the header and the floats are unspecified. nullptr if the store cannot
    // hold another row (out of memory, or the stripe's row ids are used up).
    // REQUIRES: key absent; hash == HashKey(key).
    virtual RowHeader* Insert(uint64_t key, uint64_t hash) = 0;
    // A hint that about `more_rows` Inserts follow: a store may size its
    // index for them now. A restore needs that: its rows come in the order
    // of another index, which an index growing step by step takes in
    // quadratic time (Table::ReserveRows). Insert still grows as needed.
    virtual void Reserve(uint32_t more_rows) {}
    // Removes `key`'s row; its memory is reused by later inserts.
    // REQUIRES: key present; hash == HashKey(key). Invalidates row pointers
    //   of this stripe obtained before the call.
    virtual void Erase(uint64_t key, uint64_t hash) = 0;
    // Calls fn on every row of the stripe. fn must not Insert or Erase.
    virtual void ForEach(absl::FunctionRef<void(RowHeader&)> fn) = 0;
    // Some row of the stripe, picked by `random` roughly uniformly (the
    // tier's eviction samples with it); nullptr if the stripe is empty.
    virtual RowHeader* SampleRow(uint64_t random) = 0;
    // Rows the stripe holds in memory.
    virtual uint32_t size() const = 0;
    // As Reader::ok.
    virtual bool ok() const { return true; }

   protected:
    ~Writer() = default;
  };

  virtual ~RowStore() = default;

  // The hash every store stripes and indexes by; a bijection on keys.
  static uint64_t HashKey(uint64_t key) { return Mix64(0x62726f6f6b727374ULL, key); }

  virtual int row_floats() const = 0;
  virtual int num_stripes() const = 0;
  virtual int StripeOf(uint64_t hash) const = 0;

  // Runs fn with stripe `stripe` locked shared / exclusively. fn runs on the
  // calling thread and must not call back into this store.
  virtual void Read(int stripe, absl::FunctionRef<void(const Reader&)> fn) const = 0;
  virtual void Write(int stripe, absl::FunctionRef<void(Writer&)> fn) = 0;

  // Takes each stripe's lock in turn (not an atomic snapshot).
  virtual RowStoreStats Stats() const = 0;
};

}  // namespace brook::ps
