// RocksDb: a thin wrapper over RocksDB for the parameter server's cold-row
// tier and its checkpoints. Keys are uint64 stored as 8 big-endian bytes, so
// RocksDB's bytewise order is numeric order. Values are opaque fixed-size rows
// (a 16-byte header + floats). Each embedding table that has spilled rows is
// one column family; the "default" family exists only because RocksDB
// requires it. RocksDB rewrites its OPTIONS file, listing every family, on
// each CreateColumnFamily and DropColumnFamily, so their cost grows with the
// families the DB has: create them only when rows need one (the PS does it on
// a table's first spill). DropColumnFamily of a missing family touches no file.
//
// Safe for concurrent access from multiple threads without external
// synchronization. Column families are created and dropped under an internal
// mutex; operations look their family up under a shared lock and hold a
// reference to its handle, so dropping a family while another thread reads it
// is safe (the reader finishes on the dropped family).
//
// The option choices (cache, filters, compression, ...) and why are in
// rocks_db.cc and docs/rocksdb-options.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "storage/storage_stats.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class Statistics;
struct ColumnFamilyOptions;
}  // namespace rocksdb

namespace brook::storage {

struct RocksDbOptions {
  // Shared LRU cache for data, index and filter blocks of every family.
  uint64_t block_cache_bytes = 256ull << 20;
  // Memtable budget for all families together (a busy family may use all of
  // it; when the total is exceeded the largest memtable is flushed).
  uint64_t write_buffer_bytes = 64ull << 20;
  int bloom_bits_per_key = 10;
  // The PS keeps its own WAL (storage/wal.h) and checkpoints; RocksDB's WAL is
  // redundant on the spill path. Without it, rows are durable once Flush()
  // (or CreateCheckpoint(), or a clean close) has returned.
  bool disable_wal = true;
  bool create_if_missing = true;
};

class RocksDb {
 public:
  // Opens (or creates, per options) the DB at `path` with every column family
  // it has. NOT_FOUND if it does not exist and !create_if_missing.
  static absl::StatusOr<std::unique_ptr<RocksDb>> Open(const std::string& path,
                                                       const RocksDbOptions& options);
  // Opens an existing DB (e.g. a checkpoint) read-only, with default options.
  // Writes, family changes and CreateCheckpoint fail FAILED_PRECONDITION;
  // Flush is a no-op.
  static absl::StatusOr<std::unique_ptr<RocksDb>> OpenReadOnly(const std::string& path);

  // Closes the DB. With disable_wal the memtables are flushed first (RocksDB
  // does that on close when it has unpersisted data), so a clean close loses
  // nothing; a crash loses what was written since the last Flush().
  ~RocksDb();
  RocksDb(const RocksDb&) = delete;
  RocksDb& operator=(const RocksDb&) = delete;

  absl::Status CreateColumnFamily(const std::string& name);  // OK if it exists
  absl::Status DropColumnFamily(const std::string& name);    // OK if missing
  bool HasColumnFamily(const std::string& name) const;
  std::vector<std::string> ColumnFamilies() const;  // sorted, without "default"

  // For each key: found[i] = present; if present, copies exactly value_bytes
  // into values + i * value_bytes (untouched when absent). A stored value of
  // another size is DATA_LOSS naming the family and the key; outputs for
  // other keys are then unspecified. NOT_FOUND if the family does not exist.
  absl::Status MultiGet(const std::string& cf, absl::Span<const uint64_t> keys, size_t value_bytes,
                        char* values, bool* found) const;

  // One atomic WriteBatch: puts keys[i] -> values + i * value_bytes, then
  // deletes `deletes` (a key in both ends up deleted).
  absl::Status Write(const std::string& cf, absl::Span<const uint64_t> keys, const char* values,
                     size_t value_bytes, absl::Span<const uint64_t> deletes);

  // Calls fn(key, value) for every entry of the family in key order (on a
  // consistent snapshot); stops and returns fn's first error. `value` is valid
  // only during the call. Does not fill the block cache, so exporting a table
  // does not evict the rows lookups need.
  absl::Status ForEach(
      const std::string& cf,
      absl::FunctionRef<absl::Status(uint64_t key, std::string_view value)> fn) const;

  // RocksDB's estimate ("rocksdb.estimate-num-keys"): exact after a flush and
  // compaction without overwrites, otherwise approximate. 0 for a missing family.
  uint64_t ApproximateKeys(const std::string& cf) const;

  // Flushes the memtables and hard-links the live files into `dir` (which
  // must not exist: ALREADY_EXISTS), a DB that OpenReadOnly (or Open) reads.
  // Rows written concurrently may or may not be included.
  absl::Status CreateCheckpoint(const std::string& dir);

  // Flushes every family's memtable to SST files and waits. With disable_wal
  // this is what makes earlier writes survive a crash.
  absl::Status Flush();

  // Compacts every family down to its bottom level and waits. For after bulk
  // loads (and benchmarks): lookups then probe one level, and no background
  // compaction competes with what follows.
  absl::Status CompactAll();

  using Stats = RocksDbStats;
  Stats GetStats() const;

  const std::string& path() const { return path_; }
  bool read_only() const { return read_only_; }

 private:
  using HandlePtr = std::shared_ptr<rocksdb::ColumnFamilyHandle>;

  RocksDb(std::string path, bool read_only, const RocksDbOptions& options);
  static absl::StatusOr<std::unique_ptr<RocksDb>> OpenImpl(const std::string& path,
                                                           const RocksDbOptions& options,
                                                           bool read_only);
  // The handle of `cf`, or NOT_FOUND naming the path and the family.
  absl::StatusOr<HandlePtr> Family(const std::string& cf) const;
  absl::Status CheckWritable(absl::string_view what) const;
  HandlePtr Adopt(rocksdb::ColumnFamilyHandle* handle);

  const std::string path_;
  const bool read_only_;
  const RocksDbOptions options_;
  std::shared_ptr<rocksdb::Statistics> statistics_;
  std::unique_ptr<rocksdb::ColumnFamilyOptions> cf_options_;
  // Declared before the handles so that it is destroyed after them (handles
  // must be released before the DB is closed; ~RocksDb does it explicitly too).
  std::unique_ptr<rocksdb::DB> db_;
  // std mutexes, not absl::Mutex: Debian's abseil is not TSan-instrumented
  // (docs/decisions.md). change_mu_ serializes CreateColumnFamily and
  // DropColumnFamily and is taken before mu_; mu_ guards the two fields below.
  std::mutex change_mu_;
  mutable std::shared_mutex mu_;
  HandlePtr default_family_;                   // guarded by mu_
  std::map<std::string, HandlePtr> families_;  // guarded by mu_; without "default"
};

}  // namespace brook::storage
