// TieredRowStore: the in-memory arena (MemRowStore) up to a row budget, with
// the rows past it in one RocksDB column family.
//
// Policy (docs/architecture.md "Tiers"):
//   * Every row lives in memory or in RocksDB; memory wins when both hold a
//     copy (RocksDB may keep a stale copy of a row that came back).
//   * Pulls (Reader::FindBatch) of a cold row read it from RocksDB without
//     bringing it into memory: a scan of cold keys cannot flush the hot set.
//   * Pushes (Writer::FindBatch) bring cold rows back into memory, first
//     making room: the stripe evicts rows, chosen as the least recently
//     updated of 8 sampled rows (Redis-style approximated LRU over the push
//     step and time every row carries), never a row of the batch at hand.
//     A victim whose bytes already equal its RocksDB copy (RowHeader::kSynced)
//     is dropped without a write; the others go to RocksDB in one WriteBatch
//     before they leave memory, so a failed write loses nothing (the rows
//     stay, over the budget, and the failure is counted).
//   * A stripe that has never evicted and was not reopened over existing
//     rows knows a memory miss is a miss: it never touches RocksDB, so a
//     table under its budget pays nothing for the tier.
//   * With a MemoryAccountant (the PS's node-wide limit) every row in memory
//     is charged there as well; a push that would take the node past its
//     limit first evicts rows of its own stripe (the same way), so that at
//     the limit a stripe's push adds no more than it moves out. A stripe
//     with nothing to evict (a new table) still takes its batch's rows: the
//     node may pass its limit by about one batch per stripe written at once.
//   * The table's column family is created by its first eviction write, not
//     with the table: RocksDB rewrites its whole OPTIONS file (every family)
//     on each CreateColumnFamily and DropColumnFamily, so a family per table
//     made every table's creation and drop cost grow with the tables the PS
//     held (docs/decisions.md, "Column families on first spill"). A table
//     that never spills has no family, and nothing reads one for it.
// Per-stripe bookkeeping for incremental checkpoints: keys evicted while
// dirty, and keys erased (TTL), since the last TakeCheckpointDelta.
//
// Thread safety: as RowStore. The per-stripe tier state is guarded by the
// arena's stripe lock (read under the shared lock, written under the
// exclusive one). RocksDB calls run under the stripe lock. Creating the
// family takes family_mu_ (after a stripe lock, before RocksDb's own), so
// stripes spilling at once create it once, and Retire() cannot pass it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "ps/internal/mem_row_store.h"
#include "ps/internal/mutex.h"
#include "ps/row_store.h"

namespace brook::storage {
class RocksDb;
}

namespace brook::ps {
class MemoryAccountant;
}

namespace brook::ps::internal {

struct TieredRowStoreOptions {
  MemRowStoreOptions mem;
  // Rows kept in memory (all stripes together); at least one per stripe.
  uint64_t max_hot_rows = 0;
  storage::RocksDb* db = nullptr;  // borrowed; must outlive the store
  // Created on the first eviction write (CreateColumnFamily is OK if it
  // exists). A family left by an earlier table of the name must be dropped
  // before the store is made, unless cold_rows_exist.
  std::string column_family;
  // The family exists and may already hold rows (a restored or reopened
  // table): every memory miss must look there.
  bool cold_rows_exist = false;
  uint64_t seed = 0;  // eviction sampling
  // Borrowed (outlives the store); null: only max_hot_rows bounds memory.
  MemoryAccountant* accountant = nullptr;
  uint64_t charged_row_bytes = 0;  // per row in memory, > 0 with an accountant
};

struct TierStats {
  uint64_t hot_hits = 0;      // lookups answered from memory
  uint64_t cold_hits = 0;     // lookups answered from RocksDB
  uint64_t cold_misses = 0;   // lookups that asked RocksDB and found nothing
  uint64_t evictions = 0;     // rows moved out of memory
  uint64_t evict_writes = 0;  // of those, rows written (not already synced)
  uint64_t promotions = 0;    // rows brought back into memory by a push
  uint64_t errors = 0;        // failed RocksDB reads or writes
  uint64_t cold_rows = 0;     // RocksDB's estimate of the family's keys
  bool has_family = false;    // the family exists (a row was ever spilled)
};

class TieredRowStore final : public RowStore {
 public:
  explicit TieredRowStore(const TieredRowStoreOptions& options);
  ~TieredRowStore() override;

  int row_floats() const override { return mem_.row_floats(); }
  int num_stripes() const override { return mem_.num_stripes(); }
  int StripeOf(uint64_t hash) const override { return mem_.StripeOf(hash); }
  void Read(int stripe, absl::FunctionRef<void(const Reader&)> fn) const override;
  void Write(int stripe, absl::FunctionRef<void(Writer&)> fn) override;
  RowStoreStats Stats() const override;

  TierStats tier_stats() const;
  // Bytes of one stored row (header + floats), as RocksDB holds it.
  size_t value_bytes() const { return value_bytes_; }

  // Moves out the stripe's checkpoint bookkeeping (see the file comment).
  // False if it overflowed since the last call (then the lists are partial
  // and the caller must take a full checkpoint).
  // REQUIRES: called from inside Write(stripe, ...) (the lock is held).
  bool TakeCheckpointDelta(int stripe, std::vector<uint64_t>* evicted_dirty,
                           std::vector<uint64_t>* erased);
  // Calls fn on every row stored in RocksDB (including stale copies of rows
  // now in memory: the caller skips those), in key order. None without a
  // family. Stops at fn's first error and returns it.
  absl::Status ForEachCold(absl::FunctionRef<absl::Status(const RowHeader&)> fn) const;
  // Reads the stored copies of `keys` (for checkpointing evicted rows):
  // found[i], and rows[i * value_bytes()...]. Any stripe; no lock needed.
  absl::Status ReadCold(absl::Span<const uint64_t> keys, char* rows, bool* found) const;

  // Whether the column family exists (created by a spill, or given with
  // cold_rows_exist). False stays accurate only while no stripe writes.
  bool has_family() const { return family_ready_.load(std::memory_order_acquire); }
  // The table is being dropped: the store never creates its family again,
  // so the caller's DropColumnFamily after this call cannot be undone by a
  // request still holding the table (its spills then fail, counted as tier
  // errors, and the rows stay in memory). Waits for a creation in progress.
  void Retire();

 private:
  struct StripeTier;
  struct ColdScratch;
  static ColdScratch& ThreadColdScratch();  // per thread: one lookup at a time
  class TierReader;
  class TierWriter;

  // Reads the keys whose rows[i] is null from RocksDB into *s (keys, their
  // batch positions, found flags, rows). False when there is nothing to use:
  // the stripe has no cold rows, nothing missed, or the read failed (then
  // *ok = false and the error is counted).
  template <typename Row>
  bool ReadMisses(const StripeTier& tier, absl::Span<const uint64_t> keys, absl::Span<Row*> rows,
                  ColdScratch* s, bool* ok) const;

  // The family, created on the first call; FAILED_PRECONDITION once retired.
  absl::Status EnsureFamily();

  const TieredRowStoreOptions options_;
  const size_t value_bytes_;
  const uint32_t stripe_cap_;
  MemRowStore mem_;
  std::unique_ptr<StripeTier[]> tiers_;

  // Set (release) once the family exists; read without family_mu_ on every
  // eviction write, so only the first spills of a table take the mutex.
  std::atomic<bool> family_ready_{false};
  Mutex family_mu_;
  bool retired_ ABSL_GUARDED_BY(family_mu_) = false;

  mutable std::atomic<uint64_t> hot_hits_{0}, cold_hits_{0}, cold_misses_{0}, errors_{0};
  std::atomic<uint64_t> evictions_{0}, evict_writes_{0}, promotions_{0};
};

}  // namespace brook::ps::internal
