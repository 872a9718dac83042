// ParameterServer: opening a data dir, WAL replay, checkpoints and restore
// (docs/decisions.md "PS durability", docs/formats.md "Checkpoints").
//
// What a restart rebuilds, and why it is exact: a checkpoint is a consistent
// cut (taken with every push excluded by the gate) and records the last WAL
// position it includes; the WAL logs each push's raw keys and gradients per
// stripe, under the stripe lock, so replaying the records after that position
// in log order redoes every logged update in the order it was applied. The
// live RocksDB is rebuilt from the checkpoint on every start (its own WAL is
// off, and rows spilled after the checkpoint are redone by the replay).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <system_error>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "brook/v1/storage.pb.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "ps/config_codec.h"
#include "ps/internal/checkpoint_files.h"
#include "ps/internal/ps_state.h"
#include "ps/optimizer.h"
#include "ps/parameter_server.h"
#include "sharding/sharding.h"
#include "storage/atomic_file.h"

namespace brook::ps {
namespace {

namespace fs = std::filesystem;
using internal::GateWriter;

constexpr char kLatestName[] = "LATEST";
constexpr char kCheckpointsDir[] = "checkpoints";
constexpr size_t kImportBatch = 4096;
// Restart points kept under <data_dir>/checkpoints: the newest and the one
// before it (with the parts they build on). The WAL is kept back to the
// older, so either restarts the PS exactly: a newest one damaged or deleted
// by hand is not the end.
constexpr size_t kKeptRestartPoints = 2;

int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::Status FsError(const std::string& what, const std::string& path, const std::error_code& ec) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", ec.message()));
}

// Absolute, normalized, without a trailing separator.
std::string Normalized(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) p = path;
  p = p.lexically_normal();
  if (p.has_relative_path() && p.filename().empty()) p = p.parent_path();
  return p.string();
}

// True when `path` is `dir` or below it.
bool IsUnder(const std::string& path, const std::string& dir) {
  const fs::path rel = fs::path(Normalized(path)).lexically_relative(Normalized(dir));
  return !rel.empty() && *rel.begin() != "..";
}

// Forwards a table's rows to every part that takes the table, so one pass
// over the rows (and one use of their changed-row bookkeeping) fills all.
class TeeSink final : public CheckpointSink {
 public:
  void Add(internal::RowsFileWriter* w) { sinks_.push_back(w); }
  absl::Status Rows(const char* rows, size_t count, size_t row_bytes) override {
    for (internal::RowsFileWriter* w : sinks_) RETURN_IF_ERROR(w->Rows(rows, count, row_bytes));
    return absl::OkStatus();
  }
  absl::Status Deletes(absl::Span<const uint64_t> keys) override {
    for (internal::RowsFileWriter* w : sinks_) RETURN_IF_ERROR(w->Deletes(keys));
    return absl::OkStatus();
  }

 private:
  std::vector<internal::RowsFileWriter*> sinks_;
};

// One part a checkpoint writes: the PS's restart point, or a copy.
struct PartTarget {
  CheckpointInfo info;
  bool restart_point = false;
  std::string prefix;          // only tables and dense variables named so
  std::string base_shard_dir;  // the previous part of the same kind ("" = none)
  std::unique_ptr<internal::RowsFileWriter> rows;
  v1::CheckpointManifest manifest;
  bool Takes(const std::string& name) const { return absl::StartsWith(name, prefix); }
};

// A copy's rocksdb/ is a RocksDB checkpoint of every table: keep the
// families of the copy's tables only (the others' SST links go).
absl::Status KeepOnlyFamiliesOf(const std::string& path, const std::string& prefix,
                                storage::RocksDbOptions options) {
  options.create_if_missing = false;
  // Opened only to drop families: nothing is read or written, so no block
  // cache or memtable room (the PS's own sizes, 256 + 64 MiB, were allocated
  // per copy and grew the process by 70 MiB a checkpoint: BenchSoakTest).
  options.block_cache_bytes = 1 << 20;
  options.write_buffer_bytes = 1 << 20;
  ASSIGN_OR_RETURN(std::unique_ptr<storage::RocksDb> db, storage::RocksDb::Open(path, options));
  const std::string keep = internal::TableFamily(prefix);
  for (const std::string& family : db->ColumnFamilies()) {
    if (!absl::StartsWith(family, keep)) RETURN_IF_ERROR(db->DropColumnFamily(family));
  }
  return absl::OkStatus();
}

// The parts a start restores from `ckpt`: this shard's own part alone when
// it is there for the same shard count (a restart point under a data dir
// holds only its own PS's part), else every part (a checkpoint of the whole
// cluster, written by an earlier version into a shared dir).
absl::StatusOr<std::vector<v1::CheckpointManifest>> StartParts(const std::string& ckpt, int32_t me,
                                                               int32_t shards) {
  absl::StatusOr<v1::CheckpointManifest> mine =
      internal::ReadManifest(ckpt + "/" + internal::ShardDirName(me, shards));
  if (mine.ok() && mine->num_shards() == shards && mine->shard_index() == me) {
    return std::vector<v1::CheckpointManifest>{*std::move(mine)};
  }
  return internal::ReadCheckpoint(ckpt);
}

// A complete restart point under <data_dir>/checkpoints.
struct RestartPoint {
  std::string dir;
  v1::CheckpointManifest manifest;  // this shard's part
};

// Complete restart points (this shard's part has a MANIFEST; copies, which
// carry a table prefix, are not), newest first.
absl::StatusOr<std::vector<RestartPoint>> ListRestartPoints(const std::string& root,
                                                            const std::string& part_name) {
  std::vector<RestartPoint> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    if (!absl::StartsWith(e.path().filename().string(), "ckpt-")) continue;
    absl::StatusOr<v1::CheckpointManifest> m =
        internal::ReadManifest((e.path() / part_name).string());
    if (!m.ok() || !m->info().table_prefix().empty()) continue;
    out.push_back({Normalized(e.path().string()), *std::move(m)});
  }
  if (ec && ec != std::errc::no_such_file_or_directory) return FsError("list", root, ec);
  std::sort(out.begin(), out.end(), [](const RestartPoint& a, const RestartPoint& b) {
    const int64_t ta = a.manifest.info().created_unix_micros();
    const int64_t tb = b.manifest.info().created_unix_micros();
    return ta != tb ? ta > tb : a.dir > b.dir;
  });
  return out;
}

// The first LSN the WAL at `dir` still holds (its oldest segment's name);
// 0 when it has no segment.
uint64_t FirstWalLsn(const std::string& dir) {
  uint64_t first = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    unsigned long long lsn = 0;
    int consumed = 0;
    const std::string name = e.path().filename().string();
    if (std::sscanf(name.c_str(), "wal-%llu.log%n", &lsn, &consumed) != 1 ||
        static_cast<size_t>(consumed) != name.size()) {
      continue;
    }
    if (first == 0 || lsn < first) first = lsn;
  }
  return first;
}

// A RocksDB checkpoint copied as a live DB: SST files are immutable, so they
// are hard-linked; the small metadata files RocksDB may rewrite are copied.
absl::Status LinkRocksDb(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::create_directories(to, ec);
  if (ec) return FsError("create", to, ec);
  for (const fs::directory_entry& e : fs::directory_iterator(from, ec)) {
    if (!e.is_regular_file()) continue;
    const fs::path dst = fs::path(to) / e.path().filename();
    if (e.path().extension() == ".sst") {
      fs::create_hard_link(e.path(), dst, ec);
    } else {
      fs::copy_file(e.path(), dst, fs::copy_options::overwrite_existing, ec);
    }
    if (ec) return FsError("link", e.path().string(), ec);
  }
  if (ec) return FsError("list", from, ec);
  return absl::OkStatus();
}

template <typename T>
std::vector<T> CopyOut(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

// A logged push's learning-rate scale: 0 is an entry from before the field
// existed (or a scale of 1, which is not written).
float ReplayScale(float logged) { return logged == 0.0f ? 1.0f : logged; }

// LATEST names its checkpoint relative to the data dir: the data dir, like
// everything in it, may be moved.
absl::Status WriteLatest(const std::string& data_dir, const std::string& dir, uint64_t from_lsn) {
  v1::LatestCheckpoint latest;
  latest.set_dir(internal::RelativePath(data_dir, dir));
  latest.set_replay_from_lsn(from_lsn);
  return storage::WriteFileAtomically(data_dir + "/" + kLatestName, latest.SerializeAsString());
}

// Which keys of a table this shard keeps when restoring.
class Owner {
 public:
  Owner(const std::string& table, int32_t shard, int32_t shards)
      : table_id_(sharding::TableId(table)), shard_(shard), shards_(shards) {}
  bool Owns(uint64_t key) const {
    return shards_ <= 1 || sharding::ShardForKey(table_id_, key, shards_) == shard_;
  }

 private:
  uint64_t table_id_;
  int32_t shard_, shards_;
};

// The deleted keys of a checkpoint's row block that `owner`'s shard keeps.
std::vector<uint64_t> OwnedDeletedKeys(const v1::RowBlock& b, const Owner& owner) {
  std::vector<uint64_t> keys = CopyOut<uint64_t>(b.deleted_keys());
  keys.erase(std::remove_if(keys.begin(), keys.end(), [&](uint64_t k) { return !owner.Owns(k); }),
             keys.end());
  return keys;
}

// The size of each row of a block of `part`'s rows file: DATA_LOSS when its
// bytes are not whole rows. 0 for a block without rows.
absl::StatusOr<size_t> RowBytesOf(const v1::RowBlock& b, const std::string& part) {
  if (b.rows().empty()) return size_t{0};
  const size_t row_bytes = b.row_bytes();
  if (row_bytes == 0 || b.rows().size() % row_bytes != 0) {
    return absl::DataLossError(absl::StrCat(part, ": a row block of table '", b.table(), "' holds ",
                                            b.rows().size(), " bytes, not a multiple of ",
                                            row_bytes));
  }
  return row_bytes;
}

// The bytes of one stored row of a table with options `o` (Table's layout:
// header, weights, optimizer slots).
absl::StatusOr<size_t> StoredRowBytes(int dim, const OptimizerOptions& o) {
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, CreateOptimizer(o));
  return sizeof(RowHeader) + static_cast<size_t>(dim + optimizer->SlotFloats(dim)) * sizeof(float);
}

// Buffers owned rows of one table and imports them in batches. Rows come as
// the checkpoint stored them (`source_row_bytes`, the checkpoint's options);
// the table may keep fewer (weights_only: header and weights, no slots).
class RowImporter {
 public:
  RowImporter(Table* table, const Owner& owner, size_t source_row_bytes)
      : table_(table),
        owner_(owner),
        source_row_bytes_(source_row_bytes),
        row_bytes_(std::min(source_row_bytes, table->stored_row_bytes())) {}
  absl::Status Add(const char* row, size_t row_bytes) {
    if (row_bytes != source_row_bytes_) {
      return absl::DataLossError(absl::StrCat("table '", table_->options().name, "': a row of ",
                                              row_bytes, " bytes, its options say ",
                                              source_row_bytes_));
    }
    uint64_t key;
    std::memcpy(&key, row, sizeof(key));
    if (!owner_.Owns(key)) return absl::OkStatus();
    buffer_.insert(buffer_.end(), row, row + row_bytes_);
    if (buffer_.size() >= kImportBatch * row_bytes_) return Flush();
    return absl::OkStatus();
  }
  absl::Status Flush() {
    if (buffer_.empty()) return absl::OkStatus();
    const size_t n = buffer_.size() / row_bytes_;
    RETURN_IF_ERROR(table_->ImportRows(buffer_.data(), n, row_bytes_));
    rows_ += n;
    buffer_.clear();
    return absl::OkStatus();
  }
  uint64_t rows() const { return rows_; }

 private:
  Table* table_;
  Owner owner_;
  const size_t source_row_bytes_;
  const size_t row_bytes_;  // of each row kept
  std::vector<char> buffer_;
  uint64_t rows_ = 0;
};

// The rows of table `name` one checkpoint chain holds: its largest part's
// (a chain's parts repeat rows).
uint64_t ChainRows(const std::vector<v1::CheckpointManifest>& chain, const std::string& name) {
  uint64_t largest = 0;
  for (const v1::CheckpointManifest& m : chain) {
    for (const v1::CheckpointTable& ct : m.tables()) {
      if (ct.config().name() == name) largest = std::max<uint64_t>(largest, ct.rows_in_file());
    }
  }
  return largest;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Open(
    const ParameterServerOptions& options) {
  auto ps = std::make_unique<ParameterServer>(options);
  if (options.data_dir.empty()) return ps;
  ps->options_.data_dir = options.data_dir;
  RETURN_IF_ERROR(ps->OpenDurable());
  return ps;
}

absl::Status ParameterServer::OpenDurable() {
  const std::string& dir = options_.data_dir;
  const std::string root = absl::StrCat(dir, "/", kCheckpointsDir);
  const std::string wal_dir = dir + "/wal";
  const std::string part_name = internal::ShardDirName(options_.shard_index, options_.num_shards);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return FsError("create", dir, ec);
  // Before anything under it is read or written: a second process there
  // would replace the first one's RocksDB files and WAL under it.
  ASSIGN_OR_RETURN(data_dir_lock_, storage::DirLock::Acquire(dir));
  StartupInfo& startup = state_->startup;

  v1::LatestCheckpoint latest;
  {
    absl::StatusOr<std::string> bytes = storage::ReadFileToString(dir + "/" + kLatestName);
    if (bytes.ok()) {
      if (!latest.ParseFromString(*bytes)) {
        return absl::DataLossError(absl::StrCat(dir, "/", kLatestName, " does not parse"));
      }
    } else if (!absl::IsNotFound(bytes.status())) {
      return bytes.status();
    }
  }

  // Which checkpoint to begin from: the one LATEST names if it is whole,
  // else the newest whole restart point under the data dir whose WAL is
  // still all there. A checkpoint some job wrote outside the data dir
  // (LATEST of an earlier version pointed there) is used while it exists,
  // and a restart point under the data dir is taken at once so the PS no
  // longer depends on it; one that was moved or deleted is fallen back from.
  const uint64_t first_wal_lsn = options_.wal ? FirstWalLsn(wal_dir) : 0;
  auto whole = [&](const std::string& ckpt) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> parts,
                     StartParts(ckpt, options_.shard_index, options_.num_shards));
    for (const v1::CheckpointManifest& p : parts) {
      ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> chain, internal::ReadChain(p));
      // Sizes only: reading every SST of a large tier at each start would
      // cost minutes; a restore from a copy (Restore) checks the CRCs.
      for (const v1::CheckpointManifest& m : chain) {
        RETURN_IF_ERROR(internal::VerifyPartFiles(m, /*check_crc=*/false));
      }
    }
    return absl::OkStatus();
  };
  std::string from_dir;
  uint64_t replay_from = 1;
  bool take_restart_point = false;
  std::string latest_dir = latest.dir();
  if (!latest_dir.empty() && fs::path(latest_dir).is_relative()) {
    latest_dir = absl::StrCat(dir, "/", latest_dir);
  }
  if (!latest_dir.empty()) {
    const absl::Status ok = whole(latest_dir);
    if (ok.ok()) {
      from_dir = latest_dir;
      replay_from = std::max<uint64_t>(1, latest.replay_from_lsn());
      if (!IsUnder(latest_dir, dir)) {
        startup.notes.push_back(absl::StrCat(
            dir, "/", kLatestName, " names checkpoint ", latest_dir,
            ", outside the data dir (the layout of an earlier version): restored from it, and a "
            "restart point is being written under ",
            root, " so that restarts no longer need it"));
        take_restart_point = true;
      }
    } else {
      const std::string why = absl::StrCat(dir, "/", kLatestName, " names checkpoint ", latest_dir,
                                           ", which cannot be used (", ok.message(), ")");
      ASSIGN_OR_RETURN(std::vector<RestartPoint> points, ListRestartPoints(root, part_name));
      std::string newest_seen;
      for (const RestartPoint& p : points) {
        if (Normalized(p.dir) == Normalized(latest_dir)) continue;
        if (!whole(p.dir).ok()) continue;
        const uint64_t from = p.manifest.info().wal_lsn() + 1;
        if (newest_seen.empty()) {
          newest_seen = absl::StrCat(p.dir, " (through WAL record ", from - 1, ")");
        }
        // The WAL must still hold every record after it (or there is no WAL
        // to lose anything from).
        if (options_.wal && first_wal_lsn > from) continue;
        from_dir = p.dir;
        replay_from = from;
        break;
      }
      if (!from_dir.empty()) {
        startup.notes.push_back(absl::StrCat(why, "; starting from the restart point ", from_dir,
                                             " and the WAL from record ", replay_from));
      } else if (!options_.wal || first_wal_lsn <= 1) {
        // No WAL (nothing acknowledged is promised), or a WAL that still
        // begins at its first record: it alone rebuilds everything.
        startup.notes.push_back(absl::StrCat(
            why, options_.wal
                     ? "; no whole restart point under the data dir: replaying the whole WAL"
                     : "; no whole restart point under the data dir and no WAL: starting empty"));
      } else {
        return absl::FailedPreconditionError(absl::StrCat(
            why, ". The WAL in ", wal_dir, " begins at record ", first_wal_lsn,
            ", so the pushes acknowledged before it are only in that checkpoint; ",
            newest_seen.empty() ? absl::StrCat("there is no whole restart point under ", root)
                                : absl::StrCat("the newest whole restart point is ", newest_seen),
            ". Put the checkpoint back at ", latest_dir, " and start again."));
      }
      take_restart_point = true;
    }
  }

  // The live RocksDB is rebuilt from the checkpoint: what it held past the
  // checkpoint comes back through the WAL.
  const std::string live = dir + "/rocksdb";
  fs::remove_all(live, ec);
  if (ec) return FsError("remove", live, ec);
  bool linked = false;
  std::vector<v1::CheckpointManifest> start_parts;
  if (!from_dir.empty()) {
    ASSIGN_OR_RETURN(start_parts, StartParts(from_dir, options_.shard_index, options_.num_shards));
    const std::vector<v1::CheckpointManifest>& parts = start_parts;
    if (parts.size() == 1 || static_cast<int32_t>(parts.size()) == options_.num_shards) {
      ASSIGN_OR_RETURN(
          std::vector<v1::CheckpointManifest> chain,
          internal::ReadChain(parts.size() == 1 ? parts[0] : parts[options_.shard_index]));
      if (chain.front().has_rocksdb()) {
        RETURN_IF_ERROR(
            LinkRocksDb(chain.front().info().shard_dir() + "/" + internal::kRocksDirName, live));
        linked = true;
      }
    }
  }
  ASSIGN_OR_RETURN(state_->db, storage::RocksDb::Open(live, options_.rocksdb));
  startup.data_dir = true;
  startup.wal = options_.wal;
  if (!from_dir.empty()) {
    GateWriter gate(&state_->gate);
    RETURN_IF_ERROR(RestoreLocked(start_parts, /*startup=*/linked).status());
    startup.restored_checkpoint = from_dir;
    startup.restored_step = start_parts[0].info().step();
    startup.restored_created_unix_micros = start_parts[0].info().created_unix_micros();
  }

  if (options_.wal) {
    storage::WalOptions wo;
    wo.sync =
        options_.wal_fsync ? storage::WalOptions::Sync::kData : storage::WalOptions::Sync::kNone;
    ASSIGN_OR_RETURN(state_->wal, storage::WalWriter::Open(wal_dir, wo));
    RETURN_IF_ERROR(ReplayWal(replay_from));
    state_->push_log.set_wal(state_->wal.get());
  } else {
    // Records of an earlier run with the WAL on would be replayed against
    // the wrong base if it were turned on again.
    fs::remove_all(wal_dir, ec);
  }

  // Checkpoints this shard wrote under its data dir, for Stats.
  std::vector<CheckpointInfo> found;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    absl::StatusOr<v1::CheckpointManifest> m =
        internal::ReadManifest((e.path() / part_name).string());
    if (m.ok()) found.push_back(FromProto(m->info()));
  }
  std::sort(found.begin(), found.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
    return a.created_unix_micros < b.created_unix_micros;
  });
  std::lock_guard<std::mutex> lock(state_->checkpoint_mu);
  state_->checkpoints = std::move(found);
  state_->force_full = true;
  if (take_restart_point) {
    // The state now is the restored checkpoint plus the WAL after it: make
    // it a restart point under the data dir, so the next start needs
    // nothing from outside.
    RETURN_IF_ERROR(
        CheckpointLocked(CheckpointOptions{}, /*gate_held=*/false, kKeptRestartPoints).status());
  }
  return absl::OkStatus();
}

absl::Status ParameterServer::ReplayWal(uint64_t from_lsn) {
  const std::string wal_dir = options_.data_dir + "/wal";
  // Pass 1: which pushes have every part in the log. A push cut short by a
  // crash was never acknowledged; redoing only part of it would apply some
  // of its gradients twice when the client retries it.
  absl::flat_hash_map<uint64_t, std::pair<uint32_t, uint32_t>> parts;  // id -> (seen, of)
  uint64_t max_push_id = 0;
  v1::WalEntry entry;
  auto parse = [&](uint64_t lsn, std::string_view record) -> absl::Status {
    if (!entry.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
      return absl::DataLossError(absl::StrCat(wal_dir, ": record ", lsn, " is not a WalEntry (",
                                              record.size(), " bytes)"));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(storage::ReplayWal(wal_dir, from_lsn,
                                     [&](uint64_t lsn, std::string_view record) -> absl::Status {
                                       RETURN_IF_ERROR(parse(lsn, record));
                                       ++state_->startup.wal_records_replayed;
                                       if (!entry.has_push_part()) return absl::OkStatus();
                                       const v1::WalPushPart& p = entry.push_part();
                                       auto& [seen, of] = parts[p.push_id()];
                                       ++seen;
                                       of = p.parts();
                                       max_push_id = std::max(max_push_id, p.push_id());
                                       return absl::OkStatus();
                                     })
                      .status());
  state_->next_push_id.store(max_push_id + 1);

  // Pass 2: redo in log order.
  auto note_applied = [&](uint64_t client, uint64_t sequence, uint64_t stream) {
    if (stream != 0) {
      if (state_->dedup.BeginStream(0, stream, sequence) == internal::PushDedup::Claim::kFresh) {
        state_->dedup.EndStream(stream, sequence, /*applied=*/true);
      }
      return;
    }
    if (client == 0) return;
    if (state_->dedup.Begin(client, sequence) == internal::PushDedup::Claim::kFresh) {
      state_->dedup.End(client, sequence, /*applied=*/true);
    }
  };
  // Tables and dense variables dropped earlier in the log: a push that
  // found its table just before a DropTable may be logged just after it (it
  // changed a table already gone), so its record is skipped, not an error.
  absl::flat_hash_set<std::string> dropped_tables, dropped_dense;
  auto apply = [&](uint64_t lsn, std::string_view record) -> absl::Status {
    RETURN_IF_ERROR(parse(lsn, record));
    const std::string where = absl::StrCat(wal_dir, " record ", lsn);
    switch (entry.entry_case()) {
      case v1::WalEntry::kPushPart: {
        const v1::WalPushPart& p = entry.push_part();
        const auto& [seen, of] = parts[p.push_id()];
        if (seen != of) return absl::OkStatus();  // incomplete: never acknowledged
        absl::StatusOr<std::shared_ptr<Table>> t = state_->FindTable(p.table());
        if (!t.ok() && dropped_tables.contains(p.table())) return absl::OkStatus();
        if (!t.ok()) return absl::DataLossError(absl::StrCat(where, ": ", t.status().message()));
        const std::vector<uint64_t> keys = CopyOut<uint64_t>(p.keys());
        const std::vector<float> grads = CopyOut<float>(p.grads());
        absl::StatusOr<PreparedPush> prepared = (*t)->PreparePush(keys, grads);
        const float scale = ReplayScale(p.learning_rate_scale());
        absl::Status st =
            prepared.ok() ? (*t)->ApplyPush(*prepared, p.step(), scale) : prepared.status();
        if (!st.ok()) return absl::DataLossError(absl::StrCat(where, ": ", st.message()));
        if (p.part() == 0) note_applied(p.client_id(), p.sequence(), p.stream_id());
        return absl::OkStatus();
      }
      case v1::WalEntry::kDensePush: {
        const v1::WalDensePush& d = entry.dense_push();
        absl::StatusOr<std::shared_ptr<internal::DenseVariable>> v = state_->FindDense(d.name());
        if (!v.ok() && dropped_dense.contains(d.name())) return absl::OkStatus();
        if (!v.ok()) return absl::DataLossError(absl::StrCat(where, ": ", v.status().message()));
        const std::vector<float> grads = CopyOut<float>(d.grads());
        absl::StatusOr<uint64_t> nonfinite = (*v)->Check(grads);
        if (!nonfinite.ok()) {
          return absl::DataLossError(absl::StrCat(where, ": ", nonfinite.status().message()));
        }
        (*v)->Apply(grads, *nonfinite, ReplayScale(d.learning_rate_scale()));
        note_applied(d.client_id(), d.sequence(), d.stream_id());
        return absl::OkStatus();
      }
      case v1::WalEntry::kCreateTable: {
        ASSIGN_OR_RETURN(TableOptions o, FromProto(entry.create_table()));
        dropped_tables.erase(o.name);
        return CreateTableLocked(o, /*cold_rows_exist=*/false).status();
      }
      case v1::WalEntry::kDropTable: {
        dropped_tables.insert(entry.drop_table());
        {
          internal::WriterLock lock(&state_->mu);
          auto it = state_->tables.find(entry.drop_table());
          if (it != state_->tables.end()) {
            it->second->RetireTier();
            state_->tables.erase(it);
          }
        }
        return state_->db->DropColumnFamily(internal::TableFamily(entry.drop_table()));
      }
      case v1::WalEntry::kCreateDense: {
        ASSIGN_OR_RETURN(DenseOptions o, FromProto(entry.create_dense()));
        dropped_dense.erase(o.name);
        ASSIGN_OR_RETURN(std::unique_ptr<internal::DenseVariable> v,
                         internal::DenseVariable::Create(o));
        internal::WriterLock lock(&state_->mu);
        state_->dense.try_emplace(o.name, std::move(v));
        return absl::OkStatus();
      }
      case v1::WalEntry::kDropDense: {
        dropped_dense.insert(entry.drop_dense());
        internal::WriterLock lock(&state_->mu);
        state_->dense.erase(entry.drop_dense());
        return absl::OkStatus();
      }
      case v1::WalEntry::ENTRY_NOT_SET:
        break;
    }
    return absl::DataLossError(absl::StrCat(where, ": empty entry"));
  };
  return storage::ReplayWal(wal_dir, from_lsn, apply).status();
}

// A caller that got no reply retries its checkpoint (GrpcPsClient, the
// chief's retry window) while the first attempt may have finished: the
// retry gets the first attempt's answer, as a retried push is acknowledged
// once. Any other complete part at the target is someone else's checkpoint
// and is never overwritten.
absl::StatusOr<std::optional<CheckpointInfo>> ParameterServer::WrittenCheckpoint(
    const CheckpointOptions& options, const std::string& shard_dir) const {
  absl::StatusOr<v1::CheckpointManifest> m = internal::ReadManifest(shard_dir);
  if (!m.ok()) return std::nullopt;  // none, or half-written: (re)written below
  const v1::CheckpointInfo& done = m->info();
  if (m->shard_index() != options_.shard_index || m->num_shards() != options_.num_shards ||
      done.step() != options.step || done.table_prefix() != options.table_prefix ||
      m->shard_map_version() != options.shard_map_version) {
    return absl::AlreadyExistsError(absl::StrCat(
        "checkpoint ", shard_dir, " exists: it holds step ", done.step(), " of tables '",
        done.table_prefix(), "*' (shard ", m->shard_index(), " of ", m->num_shards(),
        "), not step ", options.step, " of '", options.table_prefix, "*'"));
  }
  // This process wrote it: the very answer it gave.
  for (auto it = state_->checkpoints.rbegin(); it != state_->checkpoints.rend(); ++it) {
    if (it->shard_dir == shard_dir) return *it;
  }
  // An earlier run of this shard wrote it before a restart: read the answer back.
  CheckpointInfo info = FromProto(done);
  ASSIGN_OR_RETURN(v1::CheckpointFile manifest,
                   internal::HashFile(shard_dir, internal::kManifestName));
  info.manifest_bytes = manifest.bytes();
  info.manifest_crc32c = manifest.crc32c();
  return info;
}

absl::StatusOr<CheckpointInfo> ParameterServer::Checkpoint(const CheckpointOptions& options) {
  std::lock_guard<std::mutex> one_at_a_time(state_->checkpoint_mu);
  return CheckpointLocked(options, /*gate_held=*/false, kKeptRestartPoints);
}

// A checkpoint to a given dir is a copy (of the tables under its prefix);
// with a data dir the PS writes its own restart point, of everything, in the
// same pass at the same instant: one cut, one read of every row, and the
// restart point is exactly the state the copy shows, so the WAL can be cut
// there. (Taking the restart point right before the copy instead would read
// every row twice and hold pushes twice as long.)
absl::StatusOr<CheckpointInfo> ParameterServer::CheckpointLocked(const CheckpointOptions& options,
                                                                 bool gate_held,
                                                                 size_t keep_restart_points) {
  State& st = *state_;
  const auto start = std::chrono::steady_clock::now();
  const int64_t created = UnixMicros();
  const bool durable = !options_.data_dir.empty();
  if (options.dir.empty() && !durable) {
    return absl::InvalidArgumentError("checkpoint: no directory given and this PS has no data dir");
  }
  const std::string part_name = internal::ShardDirName(options_.shard_index, options_.num_shards);
  std::vector<PartTarget> targets;
  if (durable) {
    PartTarget t;
    t.restart_point = true;
    t.info.dir = absl::StrCat(options_.data_dir, "/", kCheckpointsDir, "/ckpt-", created);
    t.base_shard_dir = st.last_shard_dir;
    targets.push_back(std::move(t));
  }
  if (!options.dir.empty()) {
    PartTarget t;
    t.info.dir = options.dir;
    t.prefix = options.table_prefix;
    if (st.last_copy_prefix == t.prefix) t.base_shard_dir = st.last_copy_shard_dir;
    targets.push_back(std::move(t));
  }
  if (!options.dir.empty()) {
    ASSIGN_OR_RETURN(std::optional<CheckpointInfo> written,
                     WrittenCheckpoint(options, options.dir + "/" + part_name));
    if (written.has_value()) return *written;
  }
  bool incremental = options.incremental && !st.force_full;
  for (const PartTarget& t : targets) incremental = incremental && !t.base_shard_dir.empty();
  std::error_code ec;
  for (PartTarget& t : targets) {
    t.info.created_unix_micros = created;
    t.info.step = options.step;
    t.info.table_prefix = t.prefix;
    t.info.shard_dir = t.info.dir + "/" + part_name;
    fs::remove_all(t.info.shard_dir, ec);  // a half-written attempt
    fs::create_directories(t.info.shard_dir, ec);
    if (ec) return FsError("create", t.info.shard_dir, ec);
  }

  // From here until the manifests are durable a failure leaves rows marked
  // clean that no checkpoint holds: the next one must be full.
  st.force_full = true;
  st.last_copy_shard_dir.clear();
  uint64_t wal_lsn = 0;
  auto cut = [&]() -> absl::Status {
    wal_lsn = st.wal != nullptr ? st.wal->stats().last_lsn : 0;
    std::vector<std::shared_ptr<Table>> tables;
    std::vector<std::shared_ptr<internal::DenseVariable>> dense;
    {
      internal::ReaderLock lock(&st.mu);
      for (const auto& [name, t] : st.tables) tables.push_back(t);
      for (const auto& [name, v] : st.dense) dense.push_back(v);
    }
    std::sort(tables.begin(), tables.end(),
              [](const auto& a, const auto& b) { return a->options().name < b->options().name; });
    std::sort(dense.begin(), dense.end(),
              [](const auto& a, const auto& b) { return a->options().name < b->options().name; });
    for (int attempt = 0; attempt < 2; ++attempt) {
      for (PartTarget& t : targets) {
        ASSIGN_OR_RETURN(t.rows, internal::RowsFileWriter::Open(t.info.shard_dir + "/" +
                                                                internal::kRowsFileName));
        t.manifest.clear_tables();
      }
      bool complete = true;
      for (const auto& table : tables) {
        const std::string& name = table->options().name;
        TeeSink tee;
        std::vector<std::pair<PartTarget*, uint64_t>> taking;  // target, rows before
        for (PartTarget& t : targets) {
          if (!t.Takes(name)) continue;
          t.rows->set_table(name);
          tee.Add(t.rows.get());
          taking.emplace_back(&t, t.rows->rows_written());
        }
        if (taking.empty()) continue;  // not in this copy (and no restart point)
        bool table_complete = true;
        RETURN_IF_ERROR(table->WriteCheckpoint(incremental, &tee, &table_complete));
        complete = complete && table_complete;
        for (const auto& [t, before] : taking) {
          v1::CheckpointTable* ct = t->manifest.add_tables();
          ToProto(table->options(), ct->mutable_config());
          ct->set_rows_in_file(t->rows->rows_written() - before);
          ct->set_has_rocksdb_rows(table->has_cold_family());
        }
      }
      if (complete || !incremental) break;
      // A delta overflowed: this checkpoint becomes a full one.
      for (PartTarget& t : targets) RETURN_IF_ERROR(t.rows->Close().status());
      incremental = false;
    }
    std::vector<float> values, slots;
    for (const auto& v : dense) {
      bool exported = false;
      for (PartTarget& t : targets) {
        if (!t.Takes(v->options().name)) continue;
        if (!exported) v->Export(&values, &slots);
        exported = true;
        RETURN_IF_ERROR(t.rows->Dense(v->options().name, values, slots));
        ToProto(v->options(), t.manifest.add_dense());
      }
    }
    for (PartTarget& t : targets) {
      t.info.rows = t.rows->rows_written();
      ASSIGN_OR_RETURN(uint64_t rows_bytes, t.rows->Close());
      t.manifest.set_rows_file_bytes(rows_bytes);
      if (st.db != nullptr && !incremental) {
        RETURN_IF_ERROR(st.db->CreateCheckpoint(t.info.shard_dir + "/" + internal::kRocksDirName));
        t.manifest.set_has_rocksdb(true);
      }
    }
    return absl::OkStatus();
  };
  if (gate_held) {
    RETURN_IF_ERROR(cut());
  } else {
    GateWriter gate(&st.gate);
    RETURN_IF_ERROR(cut());
  }

  // Pushes go on; what follows touches only the new parts.
  for (PartTarget& t : targets) {
    CheckpointInfo& info = t.info;
    v1::CheckpointManifest& manifest = t.manifest;
    info.incremental = incremental;
    info.wal_lsn = wal_lsn;
    const std::string rocks = info.shard_dir + "/" + internal::kRocksDirName;
    if (!t.prefix.empty() && manifest.has_rocksdb()) {
      RETURN_IF_ERROR(KeepOnlyFamiliesOf(rocks, t.prefix, options_.rocksdb));
    }
    if (incremental) {
      info.base_dir = fs::path(t.base_shard_dir).parent_path().string();
      manifest.set_base_shard_dir(internal::RelativePath(info.shard_dir, t.base_shard_dir));
    }
    ASSIGN_OR_RETURN(std::vector<v1::CheckpointFile> files,
                     internal::ListPartFiles(info.shard_dir, &st.hash_cache));
    info.bytes = 0;
    for (v1::CheckpointFile& f : files) {
      info.bytes += f.bytes();
      *manifest.add_files() = std::move(f);
    }
    info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    manifest.set_format_version(1);
    ToProto(info, manifest.mutable_info());
    // No absolute path in a manifest: readers resolve these against where
    // the part is when it is read (checkpoint_files.h).
    manifest.mutable_info()->set_dir("..");
    manifest.mutable_info()->set_shard_dir(".");
    manifest.mutable_info()->set_base_dir(
        incremental ? fs::path(manifest.base_shard_dir()).parent_path().string() : "");
    manifest.set_shard_index(options_.shard_index);
    manifest.set_num_shards(options_.num_shards);
    manifest.set_shard_map_version(options.shard_map_version);
    for (const std::string& a : options.shard_addresses) manifest.add_shard_addresses(a);
    manifest.set_version(Version());
    manifest.set_commit(GitCommit());
    ASSIGN_OR_RETURN(v1::CheckpointFile written, internal::WriteManifest(info.shard_dir, manifest));
    info.manifest_bytes = written.bytes();
    info.manifest_crc32c = written.crc32c();
    RETURN_IF_ERROR(storage::SyncDirectory(info.dir));
  }
  if (!incremental) st.hash_cache.Trim();

  if (durable) {
    // A restart begins here; the WAL before the oldest kept restart point is
    // no longer needed.
    const PartTarget& restart = targets.front();
    RETURN_IF_ERROR(WriteLatest(options_.data_dir, restart.info.dir, wal_lsn + 1));
    ASSIGN_OR_RETURN(uint64_t keep_from, PruneRestartPoints(keep_restart_points));
    if (st.wal != nullptr) RETURN_IF_ERROR(st.wal->DropBefore(keep_from));
    st.last_shard_dir = restart.info.shard_dir;
  }
  if (!options.dir.empty()) {
    st.last_copy_shard_dir = targets.back().info.shard_dir;
    st.last_copy_prefix = targets.back().prefix;
  }
  st.force_full = false;
  st.checkpoints.push_back(targets.back().info);
  return targets.back().info;
}

absl::StatusOr<uint64_t> ParameterServer::PruneRestartPoints(size_t keep) {
  const std::string root = absl::StrCat(options_.data_dir, "/", kCheckpointsDir);
  const std::string part_name = internal::ShardDirName(options_.shard_index, options_.num_shards);
  ASSIGN_OR_RETURN(std::vector<RestartPoint> points, ListRestartPoints(root, part_name));
  absl::flat_hash_set<std::string> kept;
  uint64_t keep_from = std::numeric_limits<uint64_t>::max();
  size_t taken = 0;
  for (const RestartPoint& p : points) {  // newest first
    if (taken == keep) break;
    absl::StatusOr<std::vector<v1::CheckpointManifest>> chain = internal::ReadChain(p.manifest);
    if (!chain.ok()) continue;
    for (const v1::CheckpointManifest& m : *chain) kept.insert(m.info().dir());
    keep_from = std::min<uint64_t>(keep_from, p.manifest.info().wal_lsn() + 1);
    ++taken;
  }
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (!absl::StartsWith(name, "ckpt-")) continue;
    if (kept.contains(Normalized(e.path().string()))) continue;
    std::error_code rm;
    fs::remove_all(e.path(), rm);
    if (rm) return FsError("remove", e.path().string(), rm);
  }
  if (ec) return FsError("list", root, ec);
  return keep_from == std::numeric_limits<uint64_t>::max() ? 1 : keep_from;
}

absl::StatusOr<RestoreInfo> ParameterServer::Restore(const std::string& dir) {
  std::lock_guard<std::mutex> one_at_a_time(state_->checkpoint_mu);
  // Validate before dropping anything: an incomplete checkpoint, or one
  // whose files do not match their manifests, changes nothing.
  ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> parts, internal::ReadCheckpoint(dir));
  for (const v1::CheckpointManifest& p : parts) {
    ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> chain, internal::ReadChain(p));
    for (const v1::CheckpointManifest& m : chain) {
      RETURN_IF_ERROR(internal::VerifyPartFiles(m, /*check_crc=*/true));
    }
  }
  RestoreInfo info;
  {
    GateWriter gate(&state_->gate);
    // Whatever happens from here, followers copy everything again: the
    // change log lists no restored row (reset before pushes resume).
    absl::Cleanup forget_changes = [this] { state_->changes.Reset(); };
    {
      internal::WriterLock lock(&state_->mu);
      if (state_->db != nullptr) {
        for (const auto& [name, t] : state_->tables) {
          t->RetireTier();
          RETURN_IF_ERROR(state_->db->DropColumnFamily(internal::TableFamily(name)));
        }
      }
      state_->tables.clear();
      state_->dense.clear();
    }
    state_->force_full = true;
    state_->last_shard_dir.clear();
    state_->last_copy_shard_dir.clear();
    ASSIGN_OR_RETURN(info, RestoreLocked(parts, /*startup=*/false));
    if (!options_.data_dir.empty()) {
      // A restart begins from a restart point of what was restored, under
      // the data dir (never from `dir`, which may be moved or deleted).
      // Taken before any push lands, and the older restart points go: the
      // WAL does not log the restore, so no replay may begin before it.
      RETURN_IF_ERROR(CheckpointLocked(CheckpointOptions{}, /*gate_held=*/true,
                                       /*keep_restart_points=*/1)
                          .status());
    }
  }
  return info;
}

// What a restore takes from its parts, decided before anything changes.
struct ParameterServer::RestorePlan {
  // Each part's chain, newest last (an incremental part's bases first).
  std::vector<std::vector<v1::CheckpointManifest>> chains;
  int32_t me = 0, shards = 1;
  // This shard's own part alone (StartParts): everything in it is this
  // shard's, dense variables included.
  bool own_part = false;
  // As many parts as shards (or the own part): a key's owner has not changed.
  bool same_layout = false;
  absl::flat_hash_map<std::string, TableOptions> tables;  // every part lists all
  std::vector<DenseOptions> dense;                        // every part's
  absl::flat_hash_set<std::string> my_dense;              // placed on this shard

  int32_t ShardOf(size_t part) const { return own_part ? me : static_cast<int32_t>(part); }
  // Parts this shard reads: with the same layout only its own.
  bool Reads(size_t part) const { return !same_layout || ShardOf(part) == me; }
};

absl::StatusOr<ParameterServer::RestorePlan> ParameterServer::PlanRestore(
    const std::vector<v1::CheckpointManifest>& parts) const {
  RestorePlan plan;
  for (const v1::CheckpointManifest& p : parts) {
    ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> chain, internal::ReadChain(p));
    plan.chains.push_back(std::move(chain));
  }
  plan.me = options_.shard_index;
  plan.shards = options_.num_shards;
  plan.own_part = parts.size() == 1 && plan.shards > 1;
  plan.same_layout = plan.own_part || static_cast<int32_t>(parts.size()) == plan.shards;
  for (const v1::CheckpointTable& ct : parts[0].tables()) {
    ASSIGN_OR_RETURN(TableOptions o, FromProto(ct.config()));
    plan.tables.emplace(o.name, o);
  }
  // Dense variables: each on one part; placed again for this shard count.
  for (const v1::CheckpointManifest& p : parts) {
    for (const v1::DenseConfig& dc : p.dense()) {
      ASSIGN_OR_RETURN(DenseOptions o, FromProto(dc));
      plan.dense.push_back(o);
    }
  }
  std::vector<sharding::DenseVariable> placed;
  for (const DenseOptions& o : plan.dense) placed.push_back({o.name, o.num_floats()});
  ASSIGN_OR_RETURN(std::vector<int32_t> dense_shard,
                   sharding::PlaceDenseVariables(placed, plan.shards));
  for (size_t i = 0; i < plan.dense.size(); ++i) {
    if (plan.own_part || dense_shard[i] == plan.me) plan.my_dense.insert(plan.dense[i].name);
  }
  return plan;
}

absl::Status ParameterServer::CreateRestoredVariables(const RestorePlan& plan, bool startup) {
  for (const DenseOptions& o : plan.dense) {
    if (!plan.my_dense.contains(o.name)) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<internal::DenseVariable> v,
                     internal::DenseVariable::Create(o));
    internal::WriterLock lock(&state_->mu);
    state_->dense.emplace(o.name, std::move(v));
  }
  // Families of the linked RocksDB whose table is gone.
  if (state_->db != nullptr) {
    for (const std::string& family : state_->db->ColumnFamilies()) {
      bool used = false;
      for (const auto& [name, o] : plan.tables)
        used = used || internal::TableFamily(name) == family;
      if (!used) RETURN_IF_ERROR(state_->db->DropColumnFamily(family));
    }
  }
  for (const auto& [name, o] : plan.tables) {
    const bool cold = startup && state_->db != nullptr &&
                      state_->db->HasColumnFamily(internal::TableFamily(name));
    RETURN_IF_ERROR(CreateTableLocked(o, cold).status());
  }
  // Size each table's index for the rows coming (Table::ReserveRows says
  // why). With another shard count this shard keeps about 1/shards of each
  // chain.
  for (const auto& [name, o] : plan.tables) {
    uint64_t expected = 0;
    for (size_t j = 0; j < plan.chains.size(); ++j) {
      if (!plan.Reads(j)) continue;
      const uint64_t rows = ChainRows(plan.chains[j], name);
      expected += plan.same_layout ? rows : rows / static_cast<uint64_t>(plan.shards);
    }
    ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(name));
    t->ReserveRows(expected);
  }
  return absl::OkStatus();
}

absl::Status ParameterServer::ImportPartRocksDb(const RestorePlan& plan, const std::string& part,
                                                RestoreInfo* info) {
  ASSIGN_OR_RETURN(std::unique_ptr<storage::RocksDb> old,
                   storage::RocksDb::OpenReadOnly(part + "/" + internal::kRocksDirName));
  for (const auto& [name, o] : plan.tables) {
    if (!old->HasColumnFamily(internal::TableFamily(name))) continue;
    ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(name));
    ASSIGN_OR_RETURN(const size_t row_bytes, StoredRowBytes(o.dim, o.optimizer));
    RowImporter importer(t.get(), Owner(name, plan.me, plan.shards), row_bytes);
    // A named reference for the lambda: clang 14 (the fuzz build's compiler)
    // cannot capture a structured binding.
    const std::string& table_name = name;
    RETURN_IF_ERROR(
        old->ForEach(internal::TableFamily(name), [&](uint64_t key, std::string_view value) {
          if (value.size() != row_bytes) {
            return absl::DataLossError(absl::StrCat(part, ": table '", table_name, "' key ", key,
                                                    " holds ", value.size(), " bytes, expected ",
                                                    row_bytes));
          }
          return importer.Add(value.data(), row_bytes);
        }));
    RETURN_IF_ERROR(importer.Flush());
    info->rows += importer.rows();
  }
  return absl::OkStatus();
}

absl::Status ParameterServer::ImportPartRowsFile(const RestorePlan& plan, const std::string& part,
                                                 RestoreInfo* info) {
  absl::flat_hash_map<std::string, std::unique_ptr<RowImporter>> importers;
  std::vector<std::shared_ptr<Table>> held;
  RETURN_IF_ERROR(internal::ForEachCheckpointRecord(
      part + "/" + internal::kRowsFileName, [&](const v1::CheckpointRecord& r) -> absl::Status {
        if (r.has_dense()) {
          const v1::DenseBlock& d = r.dense();
          if (!plan.my_dense.contains(d.name())) return absl::OkStatus();
          ASSIGN_OR_RETURN(std::shared_ptr<internal::DenseVariable> v, state_->FindDense(d.name()));
          ++info->dense;
          return v->Import(CopyOut<float>(d.values()), CopyOut<float>(d.slots()));
        }
        const v1::RowBlock& b = r.rows();
        if (!plan.tables.contains(b.table())) return absl::OkStatus();  // dropped later
        auto it = importers.find(b.table());
        if (it == importers.end()) {
          ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(b.table()));
          held.push_back(t);
          const TableOptions& o = plan.tables.find(b.table())->second;
          ASSIGN_OR_RETURN(const size_t source_bytes, StoredRowBytes(o.dim, o.optimizer));
          it = importers
                   .emplace(b.table(),
                            std::make_unique<RowImporter>(
                                t.get(), Owner(b.table(), plan.me, plan.shards), source_bytes))
                   .first;
        }
        if (!b.deleted_keys().empty()) {
          // Rows buffered so far came before these deletes.
          RETURN_IF_ERROR(it->second->Flush());
          ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(b.table()));
          RETURN_IF_ERROR(
              t->ImportDeletes(OwnedDeletedKeys(b, Owner(b.table(), plan.me, plan.shards))));
        }
        ASSIGN_OR_RETURN(const size_t row_bytes, RowBytesOf(b, part));
        for (size_t off = 0; off < b.rows().size(); off += row_bytes) {
          RETURN_IF_ERROR(it->second->Add(b.rows().data() + off, row_bytes));
        }
        return absl::OkStatus();
      }));
  for (auto& [name, importer] : importers) {
    RETURN_IF_ERROR(importer->Flush());
    info->rows += importer->rows();
  }
  return absl::OkStatus();
}

absl::StatusOr<RestoreInfo> ParameterServer::RestoreLocked(
    const std::vector<v1::CheckpointManifest>& parts, bool startup) {
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const RestorePlan plan, PlanRestore(parts));
  RETURN_IF_ERROR(CreateRestoredVariables(plan, startup));
  RestoreInfo info;
  for (size_t j = 0; j < plan.chains.size(); ++j) {
    if (!plan.Reads(j)) continue;
    for (const v1::CheckpointManifest& m : plan.chains[j]) {
      const std::string& part = m.info().shard_dir();
      // At startup this shard's own RocksDB is the linked one already.
      if (m.has_rocksdb() && !(startup && plan.ShardOf(j) == plan.me)) {
        RETURN_IF_ERROR(ImportPartRocksDb(plan, part, &info));
      }
      RETURN_IF_ERROR(ImportPartRowsFile(plan, part, &info));
    }
  }
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return info;
}

absl::Status ParameterServer::CompactStorage() {
  if (state_->db == nullptr) return absl::OkStatus();
  return state_->db->CompactAll();
}

std::vector<CheckpointInfo> ParameterServer::Checkpoints() const {
  std::lock_guard<std::mutex> lock(state_->checkpoint_mu);
  return state_->checkpoints;
}

absl::StatusOr<CheckpointContents> ReadCheckpointContents(const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> parts, internal::ReadCheckpoint(dir));
  CheckpointContents out;
  out.table_prefix = parts[0].info().table_prefix();
  out.step = parts[0].info().step();
  for (const v1::CheckpointTable& ct : parts[0].tables()) {
    ASSIGN_OR_RETURN(TableOptions o, FromProto(ct.config()));
    out.tables.push_back(std::move(o));
  }
  for (const v1::CheckpointManifest& p : parts) {
    for (const v1::DenseConfig& dc : p.dense()) {
      ASSIGN_OR_RETURN(DenseOptions o, FromProto(dc));
      out.dense.push_back(std::move(o));
    }
  }
  return out;
}

namespace {

// One table or dense variable an import takes.
struct ImportPlan {
  std::string from;  // its name in the checkpoint
  std::string to;    // its name on this PS
  bool dense = false;
  bool create = false;  // a table this PS does not have yet
  TableOptions table;   // the target's options (tables)
  DenseOptions var;     // the target's options (dense)
  OptimizerOptions source_optimizer;
  int source_dim = 0;               // tables: the source's dim
  bool slots = false;               // keep the source's slots
  std::unique_ptr<Optimizer> init;  // !slots: the target's optimizer, for InitSlots
  std::shared_ptr<Table> target;    // held while rows go in
  std::unique_ptr<RowImporter> importer;
  std::vector<char> row;  // !slots: one converted row
  uint64_t rows = 0;
};

// A stored row of the source re-laid for the target: the header and
// weights as they are, the target optimizer's initial slots.
absl::Status AddImportedRow(ImportPlan& p, size_t target_row_bytes, const char* row,
                            size_t row_bytes, const std::string& where) {
  const size_t weights_end = sizeof(RowHeader) + sizeof(float) * static_cast<size_t>(p.source_dim);
  if (row_bytes < weights_end) {
    return absl::DataLossError(absl::StrCat(where, ": a row of table '", p.from, "' holds ",
                                            row_bytes, " bytes, fewer than its dim ", p.source_dim,
                                            " needs"));
  }
  if (p.slots) return p.importer->Add(row, row_bytes);
  p.row.resize(target_row_bytes);
  std::memcpy(p.row.data(), row, weights_end);
  std::vector<float> slots((target_row_bytes - weights_end) / sizeof(float));
  p.init->InitSlots(absl::MakeSpan(slots));
  if (!slots.empty()) std::memcpy(p.row.data() + weights_end, slots.data(), slots.size() * 4);
  return p.importer->Add(p.row.data(), target_row_bytes);
}

}  // namespace

absl::StatusOr<ImportInfo> ParameterServer::ImportTables(const ImportOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> one_at_a_time(state_->checkpoint_mu);
  const std::string& dir = options.dir;
  ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> parts, internal::ReadCheckpoint(dir));
  std::vector<std::vector<v1::CheckpointManifest>> chains;
  for (const v1::CheckpointManifest& p : parts) {
    ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> chain, internal::ReadChain(p));
    for (const v1::CheckpointManifest& m : chain) {
      RETURN_IF_ERROR(internal::VerifyPartFiles(m, /*check_crc=*/true));
    }
    chains.push_back(std::move(chain));
  }
  ASSIGN_OR_RETURN(CheckpointContents src, ReadCheckpointContents(dir));
  const std::string& from = src.table_prefix;

  // Plan and check everything before changing anything.
  absl::flat_hash_set<std::string> wanted(options.names.begin(), options.names.end());
  absl::flat_hash_set<std::string> held;
  std::vector<ImportPlan> plans;
  auto take = [&](const std::string& name) -> std::optional<std::string> {
    if (!absl::StartsWith(name, from)) return std::nullopt;
    std::string bare = name.substr(from.size());
    held.insert(bare);
    if (!wanted.empty() && !wanted.contains(bare)) return std::nullopt;
    return bare;
  };
  for (const TableOptions& o : src.tables) {
    std::optional<std::string> bare = take(o.name);
    if (!bare) continue;
    ImportPlan p;
    p.from = o.name;
    p.to = options.to_prefix + *bare;
    p.source_optimizer = o.optimizer;
    p.source_dim = o.dim;
    absl::StatusOr<std::shared_ptr<Table>> existing = state_->FindTable(p.to);
    if (existing.ok()) {
      p.table = (*existing)->options();
      if (p.table.dim != o.dim) {
        return absl::InvalidArgumentError(absl::StrCat("import: table '", *bare, "' has dim ",
                                                       o.dim, " in ", dir, ", but '", p.to,
                                                       "' has dim ", p.table.dim));
      }
    } else {
      p.table = o;
      p.table.name = p.to;
      p.create = true;
    }
    plans.push_back(std::move(p));
  }
  for (const DenseOptions& o : src.dense) {
    std::optional<std::string> bare = take(o.name);
    if (!bare) continue;
    // A dense variable lives on one shard, which its client chose when it
    // was created: the shard that holds the target imports it.
    absl::StatusOr<std::shared_ptr<internal::DenseVariable>> existing =
        state_->FindDense(options.to_prefix + *bare);
    if (!existing.ok()) continue;
    ImportPlan p;
    p.dense = true;
    p.from = o.name;
    p.to = options.to_prefix + *bare;
    p.source_optimizer = o.optimizer;
    p.var = (*existing)->options();
    if (p.var.num_floats() != o.num_floats()) {
      return absl::InvalidArgumentError(absl::StrCat("import: dense variable '", *bare, "' has ",
                                                     o.num_floats(), " floats in ", dir, ", but '",
                                                     p.to, "' has ", p.var.num_floats()));
    }
    plans.push_back(std::move(p));
  }
  for (const std::string& n : options.names) {
    if (!held.contains(n)) {
      std::vector<std::string> names(held.begin(), held.end());
      std::sort(names.begin(), names.end());
      return absl::NotFoundError(absl::StrCat("import: ", dir,
                                              " holds no table or dense variable '", n,
                                              "'; it holds: ", absl::StrJoin(names, ", ")));
    }
  }
  for (ImportPlan& p : plans) {
    const OptimizerOptions& target = p.dense ? p.var.optimizer : p.table.optimizer;
    p.slots = target.kind == p.source_optimizer.kind;
    if (!p.slots) {
      ASSIGN_OR_RETURN(p.init, CreateOptimizer(target));
    }
  }

  ImportInfo info;
  info.from_prefix = from;
  GateWriter gate(&state_->gate);
  // From here a failure (a file that changed since it was verified) may
  // leave part of the import applied: the next checkpoints are full, and
  // followers copy everything again (the change log lists no imported row).
  state_->force_full = true;
  absl::Cleanup forget_changes = [this] { state_->changes.Reset(); };
  state_->last_copy_shard_dir.clear();
  absl::flat_hash_map<std::string, ImportPlan*> by_source;
  const int32_t me = options_.shard_index, shards = options_.num_shards;
  for (ImportPlan& p : plans) {
    if (!p.dense) {
      if (p.create) {
        ASSIGN_OR_RETURN(bool created, CreateTableLocked(p.table, /*cold_rows_exist=*/false));
        if (created) {
          RETURN_IF_ERROR(state_->LogAndSync(
              [&](v1::WalEntry* e) { ToProto(p.table, e->mutable_create_table()); }));
        }
      }
      ASSIGN_OR_RETURN(p.target, state_->FindTable(p.to));
      // Rows reach the importer as stored (slots kept) or re-laid as the
      // target stores them (AddImportedRow).
      size_t source_bytes = p.target->stored_row_bytes();
      if (p.slots) {
        ASSIGN_OR_RETURN(source_bytes, StoredRowBytes(p.source_dim, p.source_optimizer));
      }
      p.importer =
          std::make_unique<RowImporter>(p.target.get(), Owner(p.to, me, shards), source_bytes);
    }
    by_source[p.from] = &p;
  }
  for (const std::vector<v1::CheckpointManifest>& chain : chains) {
    for (const v1::CheckpointManifest& m : chain) {
      const std::string& part = m.info().shard_dir();
      if (m.has_rocksdb()) {
        ASSIGN_OR_RETURN(std::unique_ptr<storage::RocksDb> old,
                         storage::RocksDb::OpenReadOnly(part + "/" + internal::kRocksDirName));
        for (ImportPlan& p : plans) {
          if (p.dense || !old->HasColumnFamily(internal::TableFamily(p.from))) continue;
          const size_t target_bytes = p.target->stored_row_bytes();
          RETURN_IF_ERROR(
              old->ForEach(internal::TableFamily(p.from), [&](uint64_t, std::string_view value) {
                return AddImportedRow(p, target_bytes, value.data(), value.size(), part);
              }));
        }
      }
      RETURN_IF_ERROR(internal::ForEachCheckpointRecord(
          part + "/" + internal::kRowsFileName, [&](const v1::CheckpointRecord& r) -> absl::Status {
            const std::string& name = r.has_dense() ? r.dense().name() : r.rows().table();
            auto it = by_source.find(name);
            if (it == by_source.end() || it->second->dense != r.has_dense())
              return absl::OkStatus();
            ImportPlan& p = *it->second;
            if (p.dense) {
              ASSIGN_OR_RETURN(std::shared_ptr<internal::DenseVariable> v, state_->FindDense(p.to));
              std::vector<float> slots = CopyOut<float>(r.dense().slots());
              if (!p.slots) {
                slots.assign(
                    static_cast<size_t>(p.init->SlotFloats(static_cast<int>(p.var.num_floats()))),
                    0.0f);
                p.init->InitSlots(absl::MakeSpan(slots));
              }
              return v->Import(CopyOut<float>(r.dense().values()), slots);
            }
            const v1::RowBlock& b = r.rows();
            Table* t = p.target.get();
            if (!b.deleted_keys().empty()) {
              RETURN_IF_ERROR(p.importer->Flush());
              RETURN_IF_ERROR(t->ImportDeletes(OwnedDeletedKeys(b, Owner(p.to, me, shards))));
            }
            ASSIGN_OR_RETURN(const size_t row_bytes, RowBytesOf(b, part));
            if (row_bytes == 0) return absl::OkStatus();
            const size_t target_bytes = t->stored_row_bytes();
            for (size_t off = 0; off < b.rows().size(); off += row_bytes) {
              RETURN_IF_ERROR(
                  AddImportedRow(p, target_bytes, b.rows().data() + off, row_bytes, part));
            }
            return absl::OkStatus();
          }));
    }
    // Rows of one source part are final once its chain is applied.
    for (ImportPlan& p : plans) {
      if (p.importer != nullptr) RETURN_IF_ERROR(p.importer->Flush());
    }
  }
  for (ImportPlan& p : plans) {
    info.parts.push_back({.name = p.to,
                          .dense = p.dense,
                          .rows = p.importer != nullptr ? p.importer->rows() : p.rows,
                          .slots = p.slots});
  }
  std::sort(info.parts.begin(), info.parts.end(),
            [](const ImportedPart& a, const ImportedPart& b) { return a.name < b.name; });
  if (!options_.data_dir.empty()) {
    // The WAL does not log imported rows: a restart begins from a restart
    // point taken now, before any push lands on them.
    RETURN_IF_ERROR(CheckpointLocked(CheckpointOptions{}, /*gate_held=*/true,
                                     /*keep_restart_points=*/1)
                        .status());
  }
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return info;
}

}  // namespace brook::ps
