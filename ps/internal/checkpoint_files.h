// The files of a PS checkpoint (docs/formats.md "Checkpoints"):
//
//   <dir>/shard-<i>-of-<n>/         one PS's part, i = 0..n-1 (5 digits each)
//       rocksdb/                    full checkpoints of a PS with a data dir:
//                                   a RocksDB checkpoint (hard links) of the
//                                   cold rows, one column family per table
//       rows.tfrecord               TFRecord of brook.v1.CheckpointRecord:
//                                   rows held in memory (full) or changed
//                                   since the base (incremental), deleted
//                                   keys, and the dense variables
//       MANIFEST                    written last, atomically: "BRKM", u32
//                                   masked CRC32C of the body, the body
//                                   (brook.v1.CheckpointManifest)
//
// A part without a valid MANIFEST is half-written (the PS died during it)
// and is ignored: readers never see it as a checkpoint.
//
// A part is relocatable: its MANIFEST names no absolute path. Its files are
// found beside it, an incremental's base by a path relative to the part, and
// each file is listed with its size and CRC32C, so a copy read after the
// original was overwritten or deleted reads itself or is refused, never the
// original. ReadManifest fills the info's dir, shard_dir, base_dir and
// base_shard_dir in with where the part is now.
//
// Thread-compatible (no shared state).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/table.h"
#include "storage/tfrecord.h"

namespace brook::v1 {
class CheckpointFile;
class CheckpointManifest;
class CheckpointRecord;
}  // namespace brook::v1

namespace brook::ps::internal {

inline constexpr char kManifestName[] = "MANIFEST";
inline constexpr char kRowsFileName[] = "rows.tfrecord";
inline constexpr char kRocksDirName[] = "rocksdb";

std::string ShardDirName(int32_t shard_index, int32_t num_shards);

// Writes <shard_dir>/MANIFEST atomically; returns its size and CRC32C.
absl::StatusOr<v1::CheckpointFile> WriteManifest(const std::string& shard_dir,
                                                 const v1::CheckpointManifest& manifest);
// NOT_FOUND when there is no MANIFEST (a half-written part); DATA_LOSS naming
// the file when it does not verify. Paths in the result are resolved against
// `shard_dir` (see the file comment).
absl::StatusOr<v1::CheckpointManifest> ReadManifest(const std::string& shard_dir);

// Size and CRC32C of one file (path relative to `dir`). Reads it whole.
absl::StatusOr<v1::CheckpointFile> HashFile(const std::string& dir, const std::string& path);

// Remembers the CRC32C of files by inode, size and mtime: a full checkpoint's
// rocksdb/ holds hard links to SST files earlier checkpoints already hashed
// (SSTs never change), so each is read once. Thread-compatible.
class FileHashCache {
 public:
  absl::StatusOr<v1::CheckpointFile> Hash(const std::string& dir, const std::string& path);
  // Forgets files not hashed since the last call (bounds the cache to the
  // files of the newest checkpoints).
  void Trim();

 private:
  struct Entry {
    uint64_t bytes = 0;
    int64_t mtime_ns = 0;
    uint32_t crc32c = 0;
    bool used = false;
  };
  absl::flat_hash_map<uint64_t, Entry> by_inode_;
};

// Every regular file under `shard_dir` but MANIFEST, sorted by path, hashed
// through `cache` (may be null).
absl::StatusOr<std::vector<v1::CheckpointFile>> ListPartFiles(const std::string& shard_dir,
                                                              FileHashCache* cache);

// Checks the files `m` lists (resolved against m.info().shard_dir()): their
// size always, their CRC32C too with `check_crc`. DATA_LOSS naming the file
// for a missing, truncated or changed one. A manifest from before files
// were listed: rows.tfrecord's size only.
absl::Status VerifyPartFiles(const v1::CheckpointManifest& m, bool check_crc);

// `to` as a path relative to the directory `from` (both absolute or both
// relative to the same place), e.g. "../../ckpt-1/shard-00000-of-00001".
std::string RelativePath(const std::string& from, const std::string& to);

// Every part of the checkpoint at `dir`, ordered by shard index. NOT_FOUND if
// `dir` has none; FAILED_PRECONDITION naming the part when one is missing,
// half-written, or the parts disagree on the shard count.
absl::StatusOr<std::vector<v1::CheckpointManifest>> ReadCheckpoint(const std::string& dir);

// The parts to apply to restore `newest`: its full base first, then each
// increment up to `newest`. FAILED_PRECONDITION names a missing base.
absl::StatusOr<std::vector<v1::CheckpointManifest>> ReadChain(const v1::CheckpointManifest& newest);

// Writes rows.tfrecord: the CheckpointSink tables write into, plus dense
// variables. Blocks are cut at ~4 MiB so a reader never holds more.
class RowsFileWriter final : public CheckpointSink {
 public:
  static absl::StatusOr<std::unique_ptr<RowsFileWriter>> Open(const std::string& path);
  ~RowsFileWriter() override;

  void set_table(const std::string& table) { table_ = table; }
  absl::Status Rows(const char* rows, size_t count, size_t row_bytes) override;
  absl::Status Deletes(absl::Span<const uint64_t> keys) override;
  absl::Status Dense(const std::string& name, absl::Span<const float> values,
                     absl::Span<const float> slots);
  // Closes and fsyncs the file; returns its size.
  absl::StatusOr<uint64_t> Close();
  uint64_t rows_written() const { return rows_written_; }

 private:
  explicit RowsFileWriter(std::string path) : path_(std::move(path)) {}
  absl::Status Put(const v1::CheckpointRecord& record);

  std::string path_;
  std::unique_ptr<storage::TFRecordWriter> writer_;
  std::string table_;
  uint64_t rows_written_ = 0;
  std::string buffer_;
};

// Calls fn on every record of a rows file; DATA_LOSS names file and offset.
absl::Status ForEachCheckpointRecord(
    const std::string& path, absl::FunctionRef<absl::Status(const v1::CheckpointRecord&)> fn);

// fsync of a file by path.
absl::Status SyncFile(const std::string& path);
// Sum of the sizes of the regular files under `path` (recursively).
uint64_t DirectoryBytes(const std::string& path);

}  // namespace brook::ps::internal
