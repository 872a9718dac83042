// The value types of the PS API that its clients share with the core: what a
// checkpoint, restore, import, drop and stats call returns, and the parts of a
// batch pull. Plain structs with no behaviour, so a client (ps/client/) and
// the wire codecs (ps/wire/) need this header and ps/options.h, never the PS
// core (ps/parameter_server.h) or its storage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "ps/options.h"
#include "storage/storage_stats.h"

namespace brook::ps {

struct CheckpointOptions {
  // The PS writes <dir>/shard-<i>-of-<n>/. Empty: its own restart point,
  // <data_dir>/checkpoints/ckpt-<unix micros> (INVALID_ARGUMENT without a
  // data_dir). A dir given is a copy the PS never depends on: with a
  // data_dir the PS writes its own restart point under it at the same
  // instant, so moving or deleting `dir` never stops it from restarting.
  std::string dir;
  // Only tables and dense variables whose name starts with this (a job's
  // TablePrefix, "<job id>/"), so a job's checkpoint or export holds only
  // its own tables on shared PS nodes. "" = everything. Ignored for the
  // restart point (always everything).
  std::string table_prefix;
  // Only what changed since this PS's previous checkpoint to the same kind
  // of place (a dir with this table_prefix, or the restart point); a full
  // one when there is none (or after a restart, a restore, a failed
  // checkpoint, or a checkpoint of another kind in between).
  bool incremental = false;
  int64_t step = 0;
  uint64_t shard_map_version = 0;
  std::vector<std::string> shard_addresses;
};

struct CheckpointInfo {
  std::string dir;        // the checkpoint (every shard's part)
  std::string shard_dir;  // this shard's part
  bool incremental = false;
  std::string base_dir;  // incremental: its base's part for this shard
  int64_t step = 0;
  uint64_t wal_lsn = 0;  // last WAL record included (0 without a WAL)
  int64_t created_unix_micros = 0;
  uint64_t rows = 0;   // rows in the rows file
  uint64_t bytes = 0;  // the part's bytes on disk
  double seconds = 0;  // duration; pushes waited this long
  // The part's MANIFEST: size and CRC32C (an export's manifest pins them).
  uint64_t manifest_bytes = 0;
  uint32_t manifest_crc32c = 0;
  std::string table_prefix;  // CheckpointOptions::table_prefix
};

struct RestoreInfo {
  uint64_t rows = 0;   // rows this shard kept
  uint64_t dense = 0;  // dense variables this shard kept
  double seconds = 0;
};

// ImportTables: a warm start (job spec `init_from`) from another job's
// checkpoint or export.
struct ImportOptions {
  std::string dir;  // a checkpoint: shard-<i>-of-<n>/ for every i (any n)
  // Names without the checkpoint's table_prefix (the model's table and
  // dense variable names) to take; empty = everything it holds.
  std::vector<std::string> names;
  // Name `n` is imported as to_prefix + n (the new job's "<job id>/").
  std::string to_prefix;
};
struct ImportedPart {
  std::string name;  // the target's name (to_prefix + n)
  bool dense = false;
  uint64_t rows = 0;  // rows this shard took (tables)
  // The optimizer slots came along (the target's optimizer is of the same
  // kind as the source's); else the weights only, slots from InitSlots.
  bool slots = false;
};
struct ImportInfo {
  std::string from_prefix;  // the checkpoint's table_prefix
  // Per imported table (every shard lists each) and dense variable (only
  // the shard that holds it), sorted by name.
  std::vector<ImportedPart> parts;
  double seconds = 0;
};

enum class PushOutcome { kApplied, kDuplicate };

// What DropTablesWithPrefix dropped (summed over shards by a client).
struct DroppedTables {
  uint64_t tables = 0;
  uint64_t dense = 0;
};

// One table's part of a batch pull: rows for `keys` (duplicates allowed) into
// `out` (keys.size() x dim). Shared by ParameterServer::PullBatch and
// PsClient::PullBatch.
struct TablePull {
  std::string_view table;
  absl::Span<const uint64_t> keys;
  absl::Span<float> out;
};
struct DensePull {
  std::string_view name;
  absl::Span<float> out;
};

struct TableStats {
  std::string name;
  int dim = 0;
  uint64_t rows = 0;          // admitted rows held
  uint64_t pending_keys = 0;  // seen, not yet admitted
  uint64_t memory_bytes = 0;  // everything the table holds, index included
  double bytes_per_row = 0;   // memory_bytes / rows
  uint64_t index_grows = 0;   // index rebuilds (RowStoreStats::index_grows)
  uint64_t rows_pulled = 0;
  uint64_t rows_pushed = 0;
  uint64_t admissions = 0;
  uint64_t evictions = 0;
  uint64_t rejected_gradients = 0;  // pushes refused or values zeroed for NaN/Inf
  uint64_t duplicate_pushes = 0;
  uint64_t memory_budget_bytes = 0;  // TableOptions.memory_budget_bytes
  uint64_t pending_forgotten = 0;    // pending keys dropped past max_pending_keys
  uint64_t budget_rejections = 0;    // pushes refused (RESOURCE_EXHAUSTED) for the budget
  // New keys of applied pushes whose row could not be created because a
  // concurrent push took the last room in the budget; their gradient is
  // dropped and they stay pending (a later push admits them).
  uint64_t budget_deferred = 0;
  // The RocksDB tier (zero when the table has none). Lookups count keys.
  bool tiered = false;
  uint64_t hot_hits = 0;         // answered from memory
  uint64_t cold_hits = 0;        // answered from RocksDB
  uint64_t cold_misses = 0;      // asked RocksDB, absent (new keys)
  uint64_t cold_rows = 0;        // RocksDB's estimate of the rows it holds
  bool tier_family = false;      // its RocksDB column family exists (it spilled)
  uint64_t tier_evictions = 0;   // rows moved out of memory
  uint64_t tier_promotions = 0;  // rows brought back by pushes
  uint64_t tier_errors = 0;      // failed RocksDB reads/writes
};

struct DenseStats {
  std::string name;
  uint64_t num_floats = 0;
  uint64_t pushes = 0;
  uint64_t rejected_gradients = 0;
};

// How this PS process started: what a restart kept. The chief compares
// incarnations to notice a PS that restarted, and reports to the jobs what
// the restart rolled back (a PS without a WAL goes back to its checkpoint).
struct StartupInfo {
  uint64_t incarnation = 0;  // random per process start, never 0
  int64_t started_unix_micros = 0;
  bool data_dir = false;            // started over a data dir (else: memory only, empty)
  bool wal = false;                 // with its write-ahead log: nothing acknowledged is lost
  std::string restored_checkpoint;  // the checkpoint it began from ("" = none)
  int64_t restored_step = 0;        // that checkpoint's step
  int64_t restored_created_unix_micros = 0;
  uint64_t wal_records_replayed = 0;
  // What the start had to work around, one line each, for the daemon to
  // log: LATEST naming a checkpoint outside the data dir (an older layout)
  // or one that is gone, and the checkpoint it fell back to.
  std::vector<std::string> notes;
};

// The change log of a PS (ParameterServerOptions::change_log_bytes).
struct ChangeLogStats {
  uint64_t budget_bytes = 0;  // 0: off
  uint64_t bytes = 0;         // what the held records and their names take
  uint64_t records = 0;       // held
  // The oldest sequence a follower may still read from (next_sequence when
  // none is held), and the sequence the next record gets.
  uint64_t oldest_sequence = 1;
  uint64_t next_sequence = 1;
};

struct ServerStats {
  std::vector<TableStats> tables;
  std::vector<DenseStats> dense;
  std::vector<CheckpointInfo> checkpoints;  // ParameterServer::Checkpoints()
  // The RocksDB row tier (block cache, compaction debt, stalls); nullopt
  // without a data dir.
  std::optional<storage::RocksDbStats> rocksdb;
  // The write-ahead log (records, bytes, failed writes, out of space now);
  // nullopt without one.
  std::optional<storage::WalStats> wal;
  StartupInfo startup;
  uint64_t fenced_clients = 0;  // FenceClients
  uint64_t fenced_pushes = 0;   // pushes (or batch parts) refused as fenced
  uint64_t push_streams = 0;    // work-unit push streams seen (PushContext::stream_id)
  // The node-wide memory limit (0: none), the bytes the rows of all tables
  // hold in memory against it, and pushes it refused (no RocksDB tier).
  uint64_t memory_limit_bytes = 0;
  uint64_t memory_used_bytes = 0;
  uint64_t memory_limit_rejections = 0;
  // Of memory_used_bytes: keys of rows spilled while changed since the last
  // checkpoint (MemoryAccountant::TryChargeBookkeeping).
  uint64_t memory_bookkeeping_bytes = 0;
  ChangeLogStats change_log;
};

}  // namespace brook::ps
