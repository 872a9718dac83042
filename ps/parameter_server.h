// The parameter-server core: the embedding tables and dense variables of one
// PS shard, with optimizers applied server-side. No network in here; the gRPC
// service in ps/rpc/ is a thin adapter over this class, and an in-process
// client drives it directly in tests.
//
// Thread-safe: every method may be called concurrently from any number of
// threads without external synchronization.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/options.h"
#include "ps/types.h"
#include "storage/dir_lock.h"
#include "storage/rocks_db.h"
#include "storage/wal.h"

namespace brook {
class PartRunner;
}
namespace brook::v1 {
class CheckpointManifest;  // brook/v1/storage.pb.h, private to the .cc files
}

namespace brook::ps {

class Table;

struct ParameterServerOptions {
  int32_t shard_index = 0;
  int32_t num_shards = 1;
  // Pushes larger than this many keys (or floats for dense) are
  // RESOURCE_EXHAUSTED; protects memory from a runaway client.
  uint64_t max_keys_per_request = 1u << 20;
  // How many recent sequence numbers per client the dedup window remembers.
  uint32_t dedup_window = 1u << 16;
  // Bytes of rows all tables together may hold in memory (brook ps
  // --memory-limit; ps/memory_accountant.h), on top of each table's own
  // memory_budget_bytes. Past it rows go to the RocksDB tier (with a
  // data_dir), else pushes that would create rows are RESOURCE_EXHAUSTED.
  // 0: no node-wide limit.
  uint64_t memory_limit_bytes = 0;
  // Seconds on a monotonic clock, for ttl_seconds; called from any thread.
  // Empty = std::chrono::steady_clock. Tests inject a fake.
  std::function<double()> now;

  // Durability (docs/decisions.md "PS durability"). Without a data_dir the
  // PS is memory only: no WAL, no RocksDB tier (a table past its budget
  // refuses new rows); Checkpoint/Restore to a given dir still work.
  // With one (use Open()): <data_dir>/rocksdb holds rows past each table's
  // memory budget, <data_dir>/wal the write-ahead log, <data_dir>/LATEST the
  // checkpoint a restart begins from, <data_dir>/checkpoints the default
  // checkpoint root.
  std::string data_dir;
  // Log every push before acknowledging it: a kill -9 loses no acknowledged
  // push. Off: a restart returns to the last checkpoint.
  bool wal = true;
  // fdatasync each WAL group write as well: survives power loss too.
  bool wal_fsync = false;
  storage::RocksDbOptions rocksdb;
  // Bytes of the change log (ChangesSince): which keys of which tables and
  // which dense variables each push changed, newest kept, for a follower
  // (a serving replica) to copy only those. 0: off.
  uint64_t change_log_bytes = 64ull << 20;
  // A serving copy: tables hold weights only. Every table is created (and
  // restored) with plain SGD, whose rows carry no optimizer slots, and a
  // restore skips the slots the checkpoint holds: Adam's two would triple
  // the memory of rows that are only read. Pushes still apply (as SGD).
  bool weights_only = false;
};

// What changed on one PS since a position of its change log
// (ParameterServer::ChangesSince).
struct Changes {
  // This PS process's (StartupInfo::incarnation): positions are only
  // meaningful to the process that gave them.
  uint64_t incarnation = 0;
  // The position to ask from next time.
  uint64_t next = 0;
  // Changed keys per table (names as on the PS), sorted by name; keys
  // sorted and distinct.
  std::vector<std::pair<std::string, std::vector<uint64_t>>> tables;
  std::vector<std::string> dense;  // changed dense variables, sorted
  // Stopped at max_keys: ask again from `next` for the rest.
  bool more = false;
};

// What a checkpoint holds (ReadCheckpointContents): a finished job's tables
// and dense variables, named with its table_prefix ("<job id>/").
struct CheckpointContents {
  std::string table_prefix;
  int64_t step = 0;
  std::vector<TableOptions> tables;  // names as on the PS (prefixed)
  std::vector<DenseOptions> dense;
};
// NOT_FOUND / FAILED_PRECONDITION as internal ReadCheckpoint: `dir` must
// hold a complete checkpoint (every part with a valid MANIFEST). Reads the
// MANIFESTs only.
absl::StatusOr<CheckpointContents> ReadCheckpointContents(const std::string& dir);

// Identifies a push for exactly-once application: a retried push with the
// same (client_id, sequence) is acknowledged without being applied again.
// client_id 0 disables dedup (tools, tests).
struct PushContext {
  uint64_t client_id = 0;
  uint64_t sequence = 0;
  int64_t step = 0;  // the trainer's global step; drives step-based TTL
  // Multiplies every optimizer's learning rate for this push (the trainer's
  // schedule: warmup, decay), as if the table were configured with
  // learning_rate * learning_rate_scale. Finite and > 0, else
  // INVALID_ARGUMENT. Logged with the push, so WAL replay reproduces it.
  float learning_rate_scale = 1.0f;
  // Non-zero: dedup by (stream_id, sequence), sequence = step <<
  // kStreamPartBits | part, instead of (client_id, sequence); the
  // client id is still checked against the fence. Every trainer that trains
  // a given work unit's epoch pushes its steps under the same stream, so a
  // step one of them pushed is never applied again by another
  // (internal::PushDedup, "Streams").
  uint64_t stream_id = 0;
  // Borrowed; null: none. A push of at least Table::kMinSplitPushKeys keys
  // to one table applies its stripes in parts on this runner's idle helper
  // threads (brook ps --helpers). Not logged: results are the same.
  PartRunner* helpers = nullptr;
};

// One table's or dense variable's part of a batch push as one PS applies it:
// unique keys, and its own sequence number (exactly-once per part).
struct TablePushPart {
  std::string_view table;
  absl::Span<const uint64_t> keys;
  absl::Span<const float> grads;  // keys.size() x dim
  uint64_t sequence = 0;
};
struct DensePushPart {
  std::string_view name;
  absl::Span<const float> grads;
  uint64_t sequence = 0;
};

// Per part, in request order.
struct PushBatchOutcome {
  std::vector<PushOutcome> tables;
  std::vector<PushOutcome> dense;
};

class ParameterServer {
 public:
  // A PS with nothing in it (options.data_dir is ignored: use Open).
  explicit ParameterServer(const ParameterServerOptions& options);
  // A PS over options.data_dir: restores the checkpoint named in LATEST (if
  // any), then replays the WAL after it, so it serves what it acknowledged
  // before it stopped. Without a data_dir the same as the constructor.
  static absl::StatusOr<std::unique_ptr<ParameterServer>> Open(
      const ParameterServerOptions& options);
  ~ParameterServer();
  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;

  // Creates a table. Creating an existing table with identical options is OK
  // (idempotent, so a restarted trainer can re-declare); with different
  // options ALREADY_EXISTS. INVALID_ARGUMENT names the bad option.
  absl::Status CreateTable(const TableOptions& options);
  // NOT_FOUND if absent.
  absl::Status DropTable(std::string_view name);
  // Drops every table and dense variable whose name starts with `prefix`
  // (a finished job's: rows in memory and RocksDB, logged like DropTable).
  // INVALID_ARGUMENT for an empty prefix.
  absl::StatusOr<DroppedTables> DropTablesWithPrefix(std::string_view prefix);

  // Writes keys.size() x dim floats into `out` (row i for keys[i]). Unknown
  // keys read their initial value (a pure function of seed and key). Pulls do
  // not create rows. NOT_FOUND for an unknown table, INVALID_ARGUMENT when
  // out.size() != keys.size() * dim, RESOURCE_EXHAUSTED past the key limit.
  absl::Status Pull(std::string_view table, absl::Span<const uint64_t> keys, absl::Span<float> out,
                    PartRunner* helpers = nullptr);

  // Applies the table's optimizer to each row with grads[i*dim, (i+1)*dim).
  // Keys must be unique within one push (the client sums duplicates);
  // duplicates are INVALID_ARGUMENT. Errors change no state. A (client_id,
  // sequence) already applied returns kDuplicate and changes nothing.
  // Errors: NOT_FOUND (table), RESOURCE_EXHAUSTED (key limit; or the rows it
  // would create exceed the table's memory budget or, without a RocksDB
  // tier, the node-wide memory_limit_bytes), INVALID_ARGUMENT (sizes,
  // duplicate keys, NaN/Inf under kReject), FAILED_PRECONDITION (sequence
  // older than the client's dedup window: it cannot be proven fresh, so it is
  // neither applied nor acknowledged). A push identical to one still being
  // applied waits for it, then answers kDuplicate (or applies, if the first
  // failed). Sequences are per client across all tables and dense variables.
  absl::StatusOr<PushOutcome> Push(std::string_view table, absl::Span<const uint64_t> keys,
                                   absl::Span<const float> grads, const PushContext& ctx);

  // Everything one training step pulls from this shard. The whole batch is
  // checked first (NOT_FOUND, INVALID_ARGUMENT for sizes, RESOURCE_EXHAUSTED
  // for a part past the key limit: the error names the table or variable),
  // then each part is read as Pull / PullDense would.
  absl::Status PullBatch(absl::Span<const TablePull> tables, absl::Span<const DensePull> dense);

  // Everything one training step pushes to this shard. The whole batch is
  // validated before anything is applied: every error Push / PushDense find
  // without touching rows (unknown name, sizes, duplicate keys, NaN/Inf under
  // kReject, key limit, a bad ctx.learning_rate_scale), plus a sequence used
  // twice in the batch, changes nothing anywhere and names the part. Then
  // each part is applied with its own (ctx.client_id, part sequence) dedup
  // (ctx.sequence is not used), in increasing sequence order, under one
  // checkpoint gate and one WAL sync. An error while applying (memory budget,
  // tier, sequence older than the dedup window) stops the batch: parts
  // applied before it stay applied, and a retry of the same batch applies
  // only the others.
  absl::StatusOr<PushBatchOutcome> PushBatch(absl::Span<const TablePushPart> tables,
                                             absl::Span<const DensePushPart> dense,
                                             const PushContext& ctx);

  // Dense variables: same idempotence and error rules as tables (a shape
  // larger than max_keys_per_request floats is INVALID_ARGUMENT at creation,
  // since it could never be pushed). Names are separate from table names.
  absl::Status CreateDense(const DenseOptions& options);
  absl::Status DropDense(std::string_view name);
  absl::Status PullDense(std::string_view name, absl::Span<float> out);
  absl::StatusOr<PushOutcome> PushDense(std::string_view name, absl::Span<const float> grads,
                                        const PushContext& ctx);

  // Fences push clients: every later push or push batch carrying one of
  // these client ids is refused with ABORTED and changes nothing. The chief
  // fences the client id of a trainer whose lease expired (presumed dead, its
  // data re-leased to others), so a zombie that wakes up cannot apply stale
  // gradients. Pushes already being applied finish. Kept in memory only: the
  // chief sends its fence list again periodically, so a restarted PS learns
  // it back. Returns how many ids were not fenced before.
  uint64_t FenceClients(absl::Span<const uint64_t> client_ids);
  uint64_t fenced_clients() const;
  // How this process started (constant after Open).
  const StartupInfo& startup() const;

  // Drops rows whose TTL has passed (given the current step / wall time);
  // returns how many. Called periodically by the daemon.
  uint64_t Evict(int64_t current_step);

  // Calls fn(key, weights, slots) for every row of `table` (for checkpoints
  // and export), on the calling thread, one stripe at a time under its shared
  // lock: not a snapshot of concurrent pushes. fn must not call back into
  // this ParameterServer. NOT_FOUND for an unknown table.
  using RowVisitor = std::function<void(uint64_t key, absl::Span<const float> weights,
                                        absl::Span<const float> slots)>;
  absl::Status ScanTable(std::string_view table, const RowVisitor& fn) const;

  // Calls fn(keys, weights) for every row of `table` (weights keys.size() x
  // dim; no optimizer slots), in chunks of at most chunk_rows rows, on the
  // calling thread, with no lock of the table held: fn may block (a slow
  // network reader stalls no push) and may call this ParameterServer. Not a
  // snapshot: a row changed during the scan is seen before or after the
  // change, and (tiered) a row that moves between memory and RocksDB
  // meanwhile may be seen twice; take ChangeLogHead() first and read the
  // changes after it to catch up. Stops at fn's first error and returns it.
  // NOT_FOUND for an unknown table, INVALID_ARGUMENT for chunk_rows 0.
  using ChunkVisitor =
      std::function<absl::Status(absl::Span<const uint64_t> keys, absl::Span<const float> weights)>;
  absl::Status ScanRows(std::string_view table, size_t chunk_rows, const ChunkVisitor& fn) const;

  // The change log (options.change_log_bytes). Records of pushes (Push,
  // PushBatch, PushDense), AssignRows / AssignDense and TTL evictions with
  // sequence >= since, of the tables and dense variables whose names start
  // with `prefix`, up to about max_keys keys (whole records; more = true
  // when it stopped early: ask again from next). OUT_OF_RANGE when records
  // at or after `since` are no longer held (the byte budget dropped them, or
  // a Restore / ImportTables replaced rows wholesale): the follower must copy
  // everything again, after taking ChangeLogHead(). FAILED_PRECONDITION when
  // the log is off. WAL replay at Open is not recorded: a restarted PS has a
  // new incarnation, so every follower copies everything anyway.
  absl::StatusOr<Changes> ChangesSince(std::string_view prefix, uint64_t since,
                                       uint64_t max_keys) const;
  // The sequence the next change record will get: where a follower that
  // copies everything now reads on from.
  uint64_t ChangeLogHead() const;

  // For a serving replica that follows another PS: sets the weights of
  // `keys` (weights is keys.size() x dim, row i for keys[i]), creating rows
  // that are missing (their optimizer slots start as the table's optimizer
  // initializes them; existing rows keep theirs). Recorded in the change
  // log, not in the WAL (a restart returns to the last checkpoint). Works on
  // tiered tables (rows in RocksDB are read back into memory as a push
  // would). NOT_FOUND for an unknown table; INVALID_ARGUMENT for sizes or
  // duplicate keys; RESOURCE_EXHAUSTED when the rows it would create do not
  // fit the memory budget (no RocksDB tier). Pushes and checkpoints see each
  // row before or after.
  absl::Status AssignRows(std::string_view table, absl::Span<const uint64_t> keys,
                          absl::Span<const float> weights);
  // Removes the rows of `keys` (keys without a row are skipped), from
  // memory and the RocksDB tier: a later pull reads their initial values, as
  // for a key never pushed. For a follower's copy of a PS that no longer
  // holds them. Recorded in the change log, not in the WAL. NOT_FOUND for
  // an unknown table.
  absl::Status EraseRows(std::string_view table, absl::Span<const uint64_t> keys);
  // Sets a dense variable's values (its optimizer slots stay). INVALID_ARGUMENT
  // naming the variable and both sizes when values.size() differs.
  absl::Status AssignDense(std::string_view name, absl::Span<const float> values);

  // Writes a consistent checkpoint: rows, optimizer slots and dense
  // variables as of one instant (pushes wait while it is taken; pulls go
  // on), then its manifest, last. With a data_dir, a restart begins from it
  // and the WAL before it is dropped. One checkpoint at a time.
  absl::StatusOr<CheckpointInfo> Checkpoint(const CheckpointOptions& options);
  // Replaces everything this PS holds with the checkpoint at `dir` (written
  // by any number of shards): keeps the keys and dense variables this shard
  // owns among options().num_shards, with their optimizer state.
  // FAILED_PRECONDITION for an incomplete checkpoint (nothing changes).
  absl::StatusOr<RestoreInfo> Restore(const std::string& dir);
  // Loads tables and dense variables from the checkpoint at options.dir
  // (written by any number of shards) under new names, replacing nothing
  // else (unlike Restore): the keys this shard owns of each table (by the
  // target's name), and the dense variables of the target names this shard
  // holds. A target table that exists keeps its options and takes the rows
  // (an import into a job's freshly created tables); one that does not is
  // created with the source's options. Slots are kept when the target's
  // optimizer has the source's kind, else start from its InitSlots.
  // Everything is checked before anything changes: NOT_FOUND names a listed
  // name the checkpoint lacks, INVALID_ARGUMENT a target whose dim or shape
  // differs, FAILED_PRECONDITION / DATA_LOSS an incomplete checkpoint or a
  // file that does not verify. Pushes wait while it runs. With a data_dir a
  // restart point follows (the WAL does not log imported rows), so a
  // restart keeps the import.
  absl::StatusOr<ImportInfo> ImportTables(const ImportOptions& options);
  // Compacts the RocksDB tier (all tables) and waits: after a bulk load, so
  // that lookups do not share the disk with background compaction. No-op
  // without a data dir.
  absl::Status CompactStorage();
  // Complete checkpoints this PS wrote (found under <data_dir>/checkpoints
  // at Open, and since), oldest first.
  std::vector<CheckpointInfo> Checkpoints() const;

  ServerStats Stats() const;  // tables and dense variables sorted by name
  const ParameterServerOptions& options() const { return options_; }

 private:
  struct State;
  struct Durable;
  absl::Status OpenDurable();
  absl::Status ReplayWal(uint64_t from_lsn);
  // Restores `parts` (a whole checkpoint, or this shard's own part alone).
  absl::StatusOr<RestoreInfo> RestoreLocked(const std::vector<v1::CheckpointManifest>& parts,
                                            bool startup);
  // RestoreLocked's steps: what to take (no change yet), the tables and
  // dense variables to create, then each part's rows.
  struct RestorePlan;
  absl::StatusOr<RestorePlan> PlanRestore(const std::vector<v1::CheckpointManifest>& parts) const;
  absl::Status CreateRestoredVariables(const RestorePlan& plan, bool startup);
  absl::Status ImportPartRocksDb(const RestorePlan& plan, const std::string& part,
                                 RestoreInfo* info);
  absl::Status ImportPartRowsFile(const RestorePlan& plan, const std::string& part,
                                  RestoreInfo* info);
  // Checkpoint's work. REQUIRES: checkpoint_mu held; with gate_held, the
  // caller holds the gate exclusively throughout (else it is taken for the
  // cut only). Keeps `keep_restart_points` restart points.
  absl::StatusOr<CheckpointInfo> CheckpointLocked(const CheckpointOptions& options, bool gate_held,
                                                  size_t keep_restart_points);
  // The info of the checkpoint part at `shard_dir` when it is this request's,
  // already written (a retry whose first reply was lost); nullopt when
  // there is no complete part; ALREADY_EXISTS for another checkpoint's.
  // REQUIRES: checkpoint_mu held.
  absl::StatusOr<std::optional<CheckpointInfo>> WrittenCheckpoint(
      const CheckpointOptions& options, const std::string& shard_dir) const;
  // Deletes restart points under <data_dir>/checkpoints but the newest
  // `keep` (and the parts they build on); returns the WAL LSN the oldest
  // kept one replays from. REQUIRES: checkpoint_mu held.
  absl::StatusOr<uint64_t> PruneRestartPoints(size_t keep);
  // Creates the table unless it exists with the same options; true if it
  // was created. ALREADY_EXISTS for other options.
  absl::StatusOr<bool> CreateTableLocked(const TableOptions& options, bool cold_rows_exist);
  // A follower's write to `keys` of one table (AssignRows, EraseRows):
  // checked, applied under the gate, recorded in the change log (after a
  // tier error too, which may leave part of it applied).
  absl::Status WriteRows(std::string_view table, absl::Span<const uint64_t> keys,
                         absl::FunctionRef<absl::Status(Table&)> write);
  ParameterServerOptions options_;
  // Held while the data dir is open; released after state_ (declared
  // before it) has closed RocksDB and the WAL.
  std::unique_ptr<storage::DirLock> data_dir_lock_;
  std::unique_ptr<State> state_;
};

}  // namespace brook::ps
