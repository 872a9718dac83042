// Table: one embedding table of a PS shard. Rows are created on their first
// admitted push (initial value = Initializer(seed, key)), updated by the
// table's Optimizer, and dropped by TTL eviction. Pulls never create rows.
//
// Thread-safe: Pull, the push stages, Evict, Scan and Stats may run
// concurrently from any number of threads without external synchronization.
// Updates of one row are serialized by its stripe lock; each thread of a
// request holds one stripe lock at a time, in stripe order (a push is
// therefore not atomic against a concurrent pull of the same keys: a pull
// sees each row either before or after the push, not necessarily all rows at
// the same instant).
//
// Usage (ParameterServer does this, with dedup between the two stages):
//   ASSIGN_OR_RETURN(PreparedPush p, table->PreparePush(keys, grads));
//   RETURN_IF_ERROR(table->ApplyPush(p, step, lr_scale));
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/initializer.h"
#include "ps/optimizer.h"
#include "ps/options.h"
#include "ps/parameter_server.h"
#include "ps/row_store.h"

namespace brook {
class PartRunner;
}

namespace brook::storage {
class RocksDb;
}

namespace brook::ps {

class MemoryAccountant;

namespace internal {
struct KeyBatch;
struct PendingStripe;
class TieredRowStore;
}  // namespace internal

// Where a table keeps the rows past its memory budget. Without one, a push
// that would create a row past the budget is RESOURCE_EXHAUSTED.
struct TableTier {
  storage::RocksDb* db = nullptr;  // borrowed; outlives the table
  // Created by the table's first spill; absent until then (and then no
  // read touches RocksDB). The caller drops a stale one first.
  std::string column_family;
  bool cold_rows_exist = false;  // the family exists and holds this table's rows
};

// One stripe's share of an applied push, as the write-ahead log records it:
// replaying every part of a push, each in its log position, redoes the push
// exactly (the same keys, raw gradients and step through the same code).
struct PushPart {
  std::string_view table;
  uint64_t push_id = 0;  // unique per push on this PS
  uint32_t part = 0;     // 0 .. parts-1
  uint32_t parts = 0;    // stripes the push touched
  int64_t step = 0;
  uint64_t client_id = 0;  // for dedup after a restart
  uint64_t sequence = 0;
  uint64_t stream_id = 0;            // PushContext::stream_id
  float learning_rate_scale = 1.0f;  // PushContext::learning_rate_scale
  int dim = 0;
  absl::Span<const uint64_t> keys;      // this stripe's keys
  absl::Span<const uint32_t> original;  // keys[j] is request key original[j]
  absl::Span<const float> grads;        // the whole request's gradients
};

// Receives push parts under their stripe's lock, so that parts touching the
// same rows are logged in the order they were applied. Must not block on
// I/O (storage::WalWriter::Add does not). Returns the part's log position.
class PushLog {
 public:
  virtual ~PushLog() = default;
  virtual uint64_t LogPart(const PushPart& part) = 0;
};

// What a checkpoint takes from a table: rows as stored bytes (RowHeader +
// floats) and keys removed since the previous checkpoint.
class CheckpointSink {
 public:
  virtual ~CheckpointSink() = default;
  virtual absl::Status Rows(const char* rows, size_t count, size_t row_bytes) = 0;
  virtual absl::Status Deletes(absl::Span<const uint64_t> keys) = 0;
};

// A push that passed every stateless check. Borrows the request's spans and
// a KeyBatch (this thread's unless PreparePush was given one): use it on the
// same thread, before the batch's next use, while keys and grads are alive.
struct PreparedPush {
  absl::Span<const uint64_t> keys;
  absl::Span<const float> grads;
  uint64_t nonfinite = 0;  // NaN/Inf values found (kZero policy only)
  internal::KeyBatch* batch = nullptr;
  // Borrowed; null: none. ApplyPush of at least Table::kMinSplitPushKeys
  // keys applies its stripes in parts on this runner's idle helpers.
  PartRunner* helpers = nullptr;
};

class Table {
 public:
  // Seconds on a monotonic clock; TTL in seconds is measured with it.
  using Clock = std::function<double()>;

  // INVALID_ARGUMENT names a bad option. `clock` must be callable from any
  // thread; empty = std::chrono::steady_clock.
  // `tier` (may be null) moves rows past the memory budget to RocksDB.
  // `accountant` (may be null; borrowed, outlives the table) is the PS's
  // node-wide limit: the table charges its in-memory rows there too.
  static absl::StatusOr<std::unique_ptr<Table>> Create(const TableOptions& options, Clock clock,
                                                       const TableTier* tier = nullptr,
                                                       MemoryAccountant* accountant = nullptr);
  ~Table();
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  const TableOptions& options() const { return options_; }
  int dim() const { return options_.dim; }

  // Writes keys.size() x dim floats (row i for keys[i]); absent keys get
  // their initial value. Duplicate keys are fine. INVALID_ARGUMENT on a size
  // mismatch. Blocks only on stripe locks. `helpers` (borrowed; null:
  // none): a pull of at least 2 x kMinPullPart keys is looked up in parts
  // on its idle helper threads.
  absl::Status Pull(absl::Span<const uint64_t> keys, absl::Span<float> out,
                    PartRunner* helpers = nullptr);
  // Pull's one size check, and Pull after it: a batch checks every part
  // before it reads any (ParameterServer::PullBatch).
  absl::Status CheckPullSize(size_t keys, size_t floats) const;
  absl::Status PullChecked(absl::Span<const uint64_t> keys, absl::Span<float> out,
                           PartRunner* helpers = nullptr);
  // Keys per part of a split pull: enough that each part's lookup still
  // gives every stripe dozens of keys to keep its prefetch pipeline
  // (MemRowStore's FindBatch) full.
  static constexpr size_t kMinPullPart = 1024;

  // Push stage 1: checks that need no row state. INVALID_ARGUMENT for a size
  // mismatch, duplicate keys, or (kReject) a NaN/Inf gradient, which is
  // counted in rejected_gradients; nothing else changes. `batch` (null: this
  // thread's) holds the grouped keys until ApplyPush; a caller preparing
  // several pushes before applying any gives each its own.
  absl::StatusOr<PreparedPush> PreparePush(absl::Span<const uint64_t> keys,
                                           absl::Span<const float> grads,
                                           internal::KeyBatch* batch = nullptr);

  // Push stage 2: applies the optimizer to every admitted row, counts the
  // others towards admission. RESOURCE_EXHAUSTED, with nothing applied, when
  // the rows the push would create do not fit in memory_budget_bytes or (no
  // tier) in the node-wide memory limit.
  // `step` is recorded as the rows' last-update step (for ttl_steps);
  // `lr_scale` (finite, > 0) multiplies the optimizer's learning rate.
  // With `log`, every stripe's part is logged under its lock (`part` carries
  // the push's identity and scale; its keys/parts fields are filled here) and
  // *last_lsn is the largest position logged. With push.helpers, parts of
  // the stripes may be applied, and logged, on several threads at once (part
  // numbers still follow stripe order); `log` must allow that.
  absl::Status ApplyPush(const PreparedPush& push, int64_t step, float lr_scale = 1.0f,
                         PushLog* log = nullptr, const PushPart* part = nullptr,
                         uint64_t* last_lsn = nullptr);

  // A push of fewer keys is applied on one thread even with helpers: below
  // ~1000 keys a part, handing parts over costs more than it saves.
  static constexpr size_t kMinSplitPushKeys = 2048;

  // Stripes a prepared push touches (its part count in the log).
  uint32_t PartsOf(const PreparedPush& push) const;

  // Checkpoint support. Writes every row held in memory (full) or those
  // changed since the previous checkpoint, plus the keys evicted to RocksDB
  // while changed and keys removed (incremental), and marks them clean.
  // Takes each stripe's exclusive lock in turn: the caller stops pushes for
  // a consistent cut. *complete = false when an incremental delta could not
  // be tracked (the caller then takes a full checkpoint instead).
  absl::Status WriteCheckpoint(bool incremental, CheckpointSink* sink, bool* complete);
  // Restore: puts stored rows (row_bytes = RowHeader + row floats each),
  // replacing what the keys held; removes keys.
  absl::Status ImportRows(const char* rows, size_t count, size_t row_bytes);
  absl::Status ImportDeletes(absl::Span<const uint64_t> keys);
  // Before a restore imports about `rows` rows: sizes each stripe's index
  // for its share of them at once. A checkpoint lists rows in the order of
  // its table's index, so imported rows arrive sorted by their home slot; an
  // index still smaller than the checkpointed one takes each window of them
  // into a narrower window of its own, at a local load past 1: runs of
  // hundreds of entries per insert, quadratic in the rows (BENCHMARKS.md,
  // issue 4). A hint: the index still grows if more rows come. Reserves at
  // most what the memory budget holds (a tiered table keeps the rest in
  // RocksDB).
  void ReserveRows(uint64_t rows);
  // Bytes of one stored row.
  size_t stored_row_bytes() const;
  // What one row in memory counts against the node-wide memory limit: its
  // arena stride plus its index entry.
  uint64_t charged_row_bytes() const { return charge_; }
  bool tiered() const { return tier_ != nullptr; }
  // Tiered, and its RocksDB family exists (some row was spilled).
  bool has_cold_family() const;
  // Before the PS drops the table's family: the table never creates it
  // again, though a request may still hold the table
  // (TieredRowStore::Retire). No-op when not tiered.
  void RetireTier();

  // Counts a push that dedup answered with kDuplicate.
  void CountDuplicate() { duplicate_pushes_.fetch_add(1, std::memory_order_relaxed); }

  // Drops rows whose last update is ttl_steps or more steps before
  // `current_step`, or ttl_seconds or more seconds before now (1 s
  // resolution); returns how many. The keys come back at their initial value.
  // With `evicted_keys` (may be null), the keys of the dropped rows are
  // appended to it.
  uint64_t Evict(int64_t current_step, std::vector<uint64_t>* evicted_keys = nullptr);

  // Sets the weights of `keys` (weights keys.size() x dim), creating missing
  // rows with their optimizer's initial slots (existing rows keep theirs);
  // admission does not apply. INVALID_ARGUMENT for sizes or duplicate keys,
  // RESOURCE_EXHAUSTED when the rows it would create do not fit (no tier);
  // a tier I/O error may leave some rows set.
  absl::Status AssignRows(absl::Span<const uint64_t> keys, absl::Span<const float> weights);

  // Calls fn(keys, weights) for every row, in chunks of at most chunk_rows
  // rows, with no lock held (each stripe's keys are listed under its shared
  // lock, then read back a chunk at a time), then (tiered) the rows in
  // RocksDB only. Not a snapshot (see Scan). Stops at fn's first error.
  // REQUIRES: chunk_rows > 0.
  absl::Status ScanWeights(
      size_t chunk_rows,
      absl::FunctionRef<absl::Status(absl::Span<const uint64_t>, absl::Span<const float>)> fn)
      const;

  // Calls fn(key, weights, slots) for every row, one stripe at a time under
  // its shared lock, then (tiered) the rows in RocksDB only, on the calling
  // thread. fn must not call into this table. Not a snapshot: concurrent
  // pushes may or may not be seen (and a row moving between tiers meanwhile
  // may be seen twice or not at all).
  absl::Status Scan(absl::FunctionRef<void(uint64_t key, absl::Span<const float> weights,
                                           absl::Span<const float> slots)>
                        fn) const;

  TableStats Stats() const;

 private:
  // One part of PullChecked.
  absl::Status PullPart(absl::Span<const uint64_t> keys, absl::Span<float> out);
  Table(const TableOptions& options, std::unique_ptr<Optimizer> optimizer, Clock clock,
        const TableTier* tier, MemoryAccountant* accountant);

  uint32_t NowSeconds() const;
  // For each stripe in [first, end) that b touches, under its exclusive
  // lock: looks the stripe's keys up into b.rows[lo, hi), then runs fn.
  // Stops and returns false when a lookup could not read the tier or fn
  // returns false. REQUIRES: b.rows sized b.size(); end -1 means every stripe.
  // memory_only: look in memory alone (RowStore::Writer::FindBatchInMemory),
  // for callers that overwrite the rows whole.
  bool WriteStripes(
      internal::KeyBatch& b,
      absl::FunctionRef<bool(int stripe, RowStore::Writer& w, uint32_t lo, uint32_t hi)> fn,
      int first = 0, int end = -1, bool memory_only = false);
  // Reserves room for `rows` new rows in the table's budget and (no tier)
  // the node's limit; *node_limit (may be null) says which one refused.
  bool TryReserve(uint64_t rows, bool* node_limit = nullptr);
  // Gives back reserved or held rows.
  void Unreserve(uint64_t rows);
  // admission false: every absent key counts (AssignRows).
  uint64_t CountCreations(const internal::KeyBatch& b, bool admission = true) const;
  // ApplyPush's parts. PushRun: one push being applied (table.cc).
  struct PushRun;
  // Stripes [first, end) of the push, each under its lock: logs the
  // stripe's part (with a log), then applies its rows.
  absl::Status ApplyPushStripes(PushRun& run, size_t first, size_t end);
  // Admission, creation and the optimizer for keys [lo, hi) of stripe s.
  // REQUIRES: stripe s write-locked. `scratch`: dim floats (if transforming).
  void ApplyPushRows(PushRun& run, int s, RowStore::Writer& w, uint32_t lo, uint32_t hi,
                     float* scratch, uint64_t* admitted, uint64_t* deferred);
  // One of the push's reserved rows, or else one more from the budget.
  bool TakeReservation(PushRun& run);
  // Inserts/updates a pending count, forgetting low counts past the bound.
  // REQUIRES: stripe `s` write-locked.
  void SetPending(int s, uint64_t key, uint16_t count);

  // Constant after construction.
  const TableOptions options_;
  const int slot_floats_;
  const uint64_t max_rows_;             // memory_budget_bytes / row bytes
  MemoryAccountant* const accountant_;  // borrowed; null: no node-wide limit
  const uint64_t charge_;               // charged_row_bytes()
  const size_t pending_bound_;          // per stripe
  const Initializer initializer_;
  const std::unique_ptr<Optimizer> optimizer_;
  const Clock clock_;
  const double time_base_;
  const std::unique_ptr<RowStore> store_;
  internal::TieredRowStore* const tier_;  // store_ when tiered, else null
  // pending_[s] is guarded by store_'s stripe s lock (shared for reads).
  const std::unique_ptr<internal::PendingStripe[]> pending_;

  // Rows held plus rows reserved by pushes in flight; <= max_rows_. Without
  // a tier, committed_ * charge_ is what the table has charged accountant_.
  std::atomic<uint64_t> committed_{0};

  // Counters (relaxed; added once per request).
  std::atomic<uint64_t> rows_pulled_{0};
  std::atomic<uint64_t> rows_pushed_{0};
  std::atomic<uint64_t> admissions_{0};
  std::atomic<uint64_t> evictions_{0};
  std::atomic<uint64_t> rejected_gradients_{0};
  std::atomic<uint64_t> duplicate_pushes_{0};
  std::atomic<uint64_t> pending_forgotten_{0};
  std::atomic<uint64_t> budget_rejections_{0};
  std::atomic<uint64_t> budget_deferred_{0};
};

}  // namespace brook::ps
