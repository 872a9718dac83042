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
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "ps/internal/checkpoint_files.h"
#include "ps/internal/ps_state.h"
#include "ps/parameter_server.h"
#include "sharding/sharding.h"
#include "storage/atomic_file.h"

namespace brook::ps {
namespace {

namespace fs = std::filesystem;
using internal::GateWriter;

constexpr char kLatestName[] = "LATEST";
constexpr size_t kImportBatch = 4096;

int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::Status FsError(const std::string& what, const std::string& path, const std::error_code& ec) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", ec.message()));
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

absl::Status WriteLatest(const std::string& data_dir, const std::string& dir, uint64_t from_lsn) {
  v1::LatestCheckpoint latest;
  latest.set_dir(dir);
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

// Buffers owned rows of one table and imports them in batches.
class RowImporter {
 public:
  RowImporter(Table* table, const Owner& owner) : table_(table), owner_(owner) {}
  absl::Status Add(const char* row, size_t row_bytes) {
    uint64_t key;
    std::memcpy(&key, row, sizeof(key));
    if (!owner_.Owns(key)) return absl::OkStatus();
    row_bytes_ = row_bytes;
    buffer_.insert(buffer_.end(), row, row + row_bytes);
    if (buffer_.size() >= kImportBatch * row_bytes) return Flush();
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
  size_t row_bytes_ = 0;
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
  std::error_code ec;
  fs::create_directories(dir + "/checkpoints", ec);
  if (ec) return FsError("create", dir, ec);

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

  // The live RocksDB is rebuilt from the checkpoint: what it held past the
  // checkpoint comes back through the WAL.
  const std::string live = dir + "/rocksdb";
  fs::remove_all(live, ec);
  if (ec) return FsError("remove", live, ec);
  bool linked = false;
  if (!latest.dir().empty()) {
    ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> parts,
                     internal::ReadCheckpoint(latest.dir()));
    if (static_cast<int32_t>(parts.size()) == options_.num_shards) {
      ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> chain,
                       internal::ReadChain(parts[options_.shard_index]));
      if (chain.front().has_rocksdb()) {
        RETURN_IF_ERROR(
            LinkRocksDb(chain.front().info().shard_dir() + "/" + internal::kRocksDirName, live));
        linked = true;
      }
    }
  }
  ASSIGN_OR_RETURN(state_->db, storage::RocksDb::Open(live, options_.rocksdb));
  StartupInfo& startup = state_->startup;
  startup.data_dir = true;
  startup.wal = options_.wal;
  if (!latest.dir().empty()) {
    GateWriter gate(&state_->gate);
    RETURN_IF_ERROR(RestoreLocked(latest.dir(), /*startup=*/linked).status());
    ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> parts,
                     internal::ReadCheckpoint(latest.dir()));
    startup.restored_checkpoint = latest.dir();
    if (!parts.empty()) {
      startup.restored_step = parts[0].info().step();
      startup.restored_created_unix_micros = parts[0].info().created_unix_micros();
    }
  }

  const std::string wal_dir = dir + "/wal";
  if (options_.wal) {
    storage::WalOptions wo;
    wo.sync =
        options_.wal_fsync ? storage::WalOptions::Sync::kData : storage::WalOptions::Sync::kNone;
    ASSIGN_OR_RETURN(state_->wal, storage::WalWriter::Open(wal_dir, wo));
    RETURN_IF_ERROR(ReplayWal(std::max<uint64_t>(1, latest.replay_from_lsn())));
    state_->push_log.set_wal(state_->wal.get());
  } else {
    // Records of an earlier run with the WAL on would be replayed against
    // the wrong base if it were turned on again.
    fs::remove_all(wal_dir, ec);
  }

  // Checkpoints this shard wrote under the default root, for Stats.
  std::vector<CheckpointInfo> found;
  const std::string mine = internal::ShardDirName(options_.shard_index, options_.num_shards);
  for (const fs::directory_entry& e : fs::directory_iterator(dir + "/checkpoints", ec)) {
    absl::StatusOr<v1::CheckpointManifest> m = internal::ReadManifest((e.path() / mine).string());
    if (m.ok()) found.push_back(rpc::FromProto(m->info()));
  }
  if (!latest.dir().empty()) {  // a checkpoint written outside the default root
    absl::StatusOr<v1::CheckpointManifest> m = internal::ReadManifest(latest.dir() + "/" + mine);
    if (m.ok() && std::none_of(found.begin(), found.end(), [&](const CheckpointInfo& c) {
          return c.shard_dir == m->info().shard_dir();
        })) {
      found.push_back(rpc::FromProto(m->info()));
    }
  }
  std::sort(found.begin(), found.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
    return a.created_unix_micros < b.created_unix_micros;
  });
  std::lock_guard<std::mutex> lock(state_->checkpoint_mu);
  state_->checkpoints = std::move(found);
  state_->force_full = true;
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
  auto apply = [&](uint64_t lsn, std::string_view record) -> absl::Status {
    RETURN_IF_ERROR(parse(lsn, record));
    const std::string where = absl::StrCat(wal_dir, " record ", lsn);
    switch (entry.entry_case()) {
      case v1::WalEntry::kPushPart: {
        const v1::WalPushPart& p = entry.push_part();
        const auto& [seen, of] = parts[p.push_id()];
        if (seen != of) return absl::OkStatus();  // incomplete: never acknowledged
        absl::StatusOr<std::shared_ptr<Table>> t = state_->FindTable(p.table());
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
        ASSIGN_OR_RETURN(TableOptions o, rpc::FromProto(entry.create_table()));
        return CreateTableLocked(o, /*cold_rows_exist=*/false).status();
      }
      case v1::WalEntry::kDropTable: {
        {
          internal::WriterLock lock(&state_->mu);
          state_->tables.erase(entry.drop_table());
        }
        return state_->db->DropColumnFamily(internal::TableFamily(entry.drop_table()));
      }
      case v1::WalEntry::kCreateDense: {
        ASSIGN_OR_RETURN(DenseOptions o, rpc::FromProto(entry.create_dense()));
        ASSIGN_OR_RETURN(std::unique_ptr<internal::DenseVariable> v,
                         internal::DenseVariable::Create(o));
        internal::WriterLock lock(&state_->mu);
        state_->dense.try_emplace(o.name, std::move(v));
        return absl::OkStatus();
      }
      case v1::WalEntry::kDropDense: {
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

absl::StatusOr<CheckpointInfo> ParameterServer::Checkpoint(const CheckpointOptions& options) {
  std::lock_guard<std::mutex> one_at_a_time(state_->checkpoint_mu);
  const auto start = std::chrono::steady_clock::now();
  CheckpointInfo info;
  info.created_unix_micros = UnixMicros();
  info.dir = options.dir;
  if (info.dir.empty()) {
    if (options_.data_dir.empty()) {
      return absl::InvalidArgumentError(
          "checkpoint: no directory given and this PS has no data dir");
    }
    info.dir = absl::StrCat(options_.data_dir, "/checkpoints/ckpt-", info.created_unix_micros);
  }
  info.shard_dir =
      info.dir + "/" + internal::ShardDirName(options_.shard_index, options_.num_shards);
  if (internal::ReadManifest(info.shard_dir).ok()) {
    return absl::AlreadyExistsError(absl::StrCat("checkpoint ", info.shard_dir, " exists"));
  }
  std::error_code ec;
  fs::remove_all(info.shard_dir, ec);  // a half-written attempt
  fs::create_directories(info.shard_dir, ec);
  if (ec) return FsError("create", info.shard_dir, ec);

  info.incremental = options.incremental && !state_->force_full && !state_->last_shard_dir.empty();
  info.step = options.step;
  v1::CheckpointManifest manifest;
  // From here until the manifest is durable a failure leaves rows marked
  // clean that no checkpoint holds: the next one must be full.
  state_->force_full = true;
  const std::string rows_path = info.shard_dir + "/" + internal::kRowsFileName;
  {
    GateWriter gate(&state_->gate);
    info.wal_lsn = state_->wal != nullptr ? state_->wal->stats().last_lsn : 0;
    std::vector<std::shared_ptr<Table>> tables;
    std::vector<std::shared_ptr<internal::DenseVariable>> dense;
    {
      internal::ReaderLock lock(&state_->mu);
      for (const auto& [name, t] : state_->tables) tables.push_back(t);
      for (const auto& [name, v] : state_->dense) dense.push_back(v);
    }
    std::sort(tables.begin(), tables.end(),
              [](const auto& a, const auto& b) { return a->options().name < b->options().name; });
    std::sort(dense.begin(), dense.end(),
              [](const auto& a, const auto& b) { return a->options().name < b->options().name; });
    std::unique_ptr<internal::RowsFileWriter> rows;
    for (int attempt = 0; attempt < 2; ++attempt) {
      ASSIGN_OR_RETURN(rows, internal::RowsFileWriter::Open(rows_path));
      manifest.clear_tables();
      bool complete = true;
      for (const auto& t : tables) {
        rows->set_table(t->options().name);
        const uint64_t before = rows->rows_written();
        bool table_complete = true;
        RETURN_IF_ERROR(t->WriteCheckpoint(info.incremental, rows.get(), &table_complete));
        complete = complete && table_complete;
        v1::CheckpointTable* ct = manifest.add_tables();
        *ct->mutable_config() = internal::ToConfig(t->options());
        ct->set_rows_in_file(rows->rows_written() - before);
        ct->set_has_rocksdb_rows(t->tiered());
      }
      if (complete || !info.incremental) break;
      // A delta overflowed: this checkpoint becomes a full one.
      RETURN_IF_ERROR(rows->Close().status());
      info.incremental = false;
    }
    std::vector<float> values, slots;
    for (const auto& v : dense) {
      v->Export(&values, &slots);
      RETURN_IF_ERROR(rows->Dense(v->options().name, values, slots));
      *manifest.add_dense() = internal::ToConfig(v->options());
    }
    info.rows = rows->rows_written();
    ASSIGN_OR_RETURN(uint64_t rows_bytes, rows->Close());
    manifest.set_rows_file_bytes(rows_bytes);
    if (state_->db != nullptr && !info.incremental) {
      RETURN_IF_ERROR(state_->db->CreateCheckpoint(info.shard_dir + "/" + internal::kRocksDirName));
      manifest.set_has_rocksdb(true);
    }
  }  // pushes resume
  if (info.incremental) {
    info.base_dir = fs::path(state_->last_shard_dir).parent_path().string();
    manifest.set_base_shard_dir(state_->last_shard_dir);
  }
  info.bytes = internal::DirectoryBytes(info.shard_dir);
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  manifest.set_format_version(1);
  rpc::ToProto(info, manifest.mutable_info());
  manifest.set_shard_index(options_.shard_index);
  manifest.set_num_shards(options_.num_shards);
  manifest.set_shard_map_version(options.shard_map_version);
  for (const std::string& a : options.shard_addresses) manifest.add_shard_addresses(a);
  manifest.set_version(Version());
  manifest.set_commit(GitCommit());
  RETURN_IF_ERROR(internal::WriteManifest(info.shard_dir, manifest));
  RETURN_IF_ERROR(storage::SyncDirectory(info.dir));

  if (!options_.data_dir.empty()) {
    // A restart begins here; the WAL before it is no longer needed.
    RETURN_IF_ERROR(WriteLatest(options_.data_dir, info.dir, info.wal_lsn + 1));
    if (state_->wal != nullptr) RETURN_IF_ERROR(state_->wal->DropBefore(info.wal_lsn + 1));
  }
  state_->last_shard_dir = info.shard_dir;
  state_->force_full = false;
  state_->checkpoints.push_back(info);
  return info;
}

absl::StatusOr<RestoreInfo> ParameterServer::Restore(const std::string& dir) {
  std::lock_guard<std::mutex> one_at_a_time(state_->checkpoint_mu);
  // Validate before dropping anything: an incomplete checkpoint changes nothing.
  ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> parts, internal::ReadCheckpoint(dir));
  for (const v1::CheckpointManifest& p : parts) RETURN_IF_ERROR(internal::ReadChain(p).status());
  RestoreInfo info;
  {
    GateWriter gate(&state_->gate);
    {
      internal::WriterLock lock(&state_->mu);
      if (state_->db != nullptr) {
        for (const auto& [name, t] : state_->tables) {
          RETURN_IF_ERROR(state_->db->DropColumnFamily(internal::TableFamily(name)));
        }
      }
      state_->tables.clear();
      state_->dense.clear();
    }
    ASSIGN_OR_RETURN(info, RestoreLocked(dir, /*startup=*/false));
    if (!options_.data_dir.empty()) {
      // A restart restores the same checkpoint and replays what follows now.
      const uint64_t from = state_->wal != nullptr ? state_->wal->stats().last_lsn + 1 : 0;
      RETURN_IF_ERROR(WriteLatest(options_.data_dir, dir, from));
    }
  }
  state_->force_full = true;
  state_->last_shard_dir.clear();
  return info;
}

absl::StatusOr<RestoreInfo> ParameterServer::RestoreLocked(const std::string& dir, bool startup) {
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> parts, internal::ReadCheckpoint(dir));
  std::vector<std::vector<v1::CheckpointManifest>> chains;
  for (const v1::CheckpointManifest& p : parts) {
    ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> chain, internal::ReadChain(p));
    chains.push_back(std::move(chain));
  }
  const int32_t me = options_.shard_index, shards = options_.num_shards;
  const bool same_layout = static_cast<int32_t>(parts.size()) == shards;

  // Tables: every part lists all of them (tables live on every shard).
  absl::flat_hash_map<std::string, TableOptions> tables;
  for (const v1::CheckpointTable& ct : parts[0].tables()) {
    ASSIGN_OR_RETURN(TableOptions o, rpc::FromProto(ct.config()));
    tables.emplace(o.name, o);
  }
  // Dense variables: each on one part; placed again for this shard count.
  std::vector<DenseOptions> dense;
  for (const v1::CheckpointManifest& p : parts) {
    for (const v1::DenseConfig& dc : p.dense()) {
      ASSIGN_OR_RETURN(DenseOptions o, rpc::FromProto(dc));
      dense.push_back(o);
    }
  }
  std::vector<sharding::DenseVariable> placed;
  for (const DenseOptions& o : dense) placed.push_back({o.name, o.num_floats()});
  ASSIGN_OR_RETURN(std::vector<int32_t> dense_shard, sharding::PlaceDenseVariables(placed, shards));
  absl::flat_hash_set<std::string> my_dense;
  for (size_t i = 0; i < dense.size(); ++i) {
    if (dense_shard[i] != me) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<internal::DenseVariable> v,
                     internal::DenseVariable::Create(dense[i]));
    internal::WriterLock lock(&state_->mu);
    state_->dense.emplace(dense[i].name, std::move(v));
    my_dense.insert(dense[i].name);
  }
  // Families of the linked RocksDB whose table is gone.
  if (state_->db != nullptr) {
    for (const std::string& family : state_->db->ColumnFamilies()) {
      bool used = false;
      for (const auto& [name, o] : tables) used = used || internal::TableFamily(name) == family;
      if (!used) RETURN_IF_ERROR(state_->db->DropColumnFamily(family));
    }
  }
  for (const auto& [name, o] : tables) {
    const bool cold = startup && state_->db != nullptr &&
                      state_->db->HasColumnFamily(internal::TableFamily(name));
    RETURN_IF_ERROR(CreateTableLocked(o, cold).status());
  }

  // Size each table's index for the rows coming (Table::ReserveRows says
  // why). With another shard count this shard keeps about 1/shards of each
  // chain.
  for (const auto& [name, o] : tables) {
    uint64_t expected = 0;
    for (size_t j = 0; j < chains.size(); ++j) {
      if (same_layout && static_cast<int32_t>(j) != me) continue;
      const uint64_t rows = ChainRows(chains[j], name);
      expected += same_layout ? rows : rows / static_cast<uint64_t>(shards);
    }
    ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(name));
    t->ReserveRows(expected);
  }

  RestoreInfo info;
  for (size_t j = 0; j < chains.size(); ++j) {
    // With the same shard count, a key's owner has not changed.
    if (same_layout && static_cast<int32_t>(j) != me) continue;
    for (const v1::CheckpointManifest& m : chains[j]) {
      const std::string& part = m.info().shard_dir();
      if (m.has_rocksdb() && !(startup && static_cast<int32_t>(j) == me)) {
        ASSIGN_OR_RETURN(std::unique_ptr<storage::RocksDb> old,
                         storage::RocksDb::OpenReadOnly(part + "/" + internal::kRocksDirName));
        for (const auto& [name, o] : tables) {
          if (!old->HasColumnFamily(internal::TableFamily(name))) continue;
          ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(name));
          RowImporter importer(t.get(), Owner(name, me, shards));
          const size_t row_bytes = t->stored_row_bytes();
          // A named reference for the lambda: clang 14 (the fuzz build's compiler)
          // cannot capture a structured binding.
          const std::string& table_name = name;
          RETURN_IF_ERROR(
              old->ForEach(internal::TableFamily(name), [&](uint64_t key, std::string_view value) {
                if (value.size() != row_bytes) {
                  return absl::DataLossError(absl::StrCat(part, ": table '", table_name, "' key ",
                                                          key, " holds ", value.size(),
                                                          " bytes, expected ", row_bytes));
                }
                return importer.Add(value.data(), row_bytes);
              }));
          RETURN_IF_ERROR(importer.Flush());
          info.rows += importer.rows();
        }
      }
      absl::flat_hash_map<std::string, std::unique_ptr<RowImporter>> importers;
      std::vector<std::shared_ptr<Table>> held;
      RETURN_IF_ERROR(internal::ForEachCheckpointRecord(
          part + "/" + internal::kRowsFileName, [&](const v1::CheckpointRecord& r) -> absl::Status {
            if (r.has_dense()) {
              const v1::DenseBlock& d = r.dense();
              if (!my_dense.contains(d.name())) return absl::OkStatus();
              ASSIGN_OR_RETURN(std::shared_ptr<internal::DenseVariable> v,
                               state_->FindDense(d.name()));
              ++info.dense;
              return v->Import(CopyOut<float>(d.values()), CopyOut<float>(d.slots()));
            }
            const v1::RowBlock& b = r.rows();
            if (!tables.contains(b.table())) return absl::OkStatus();  // dropped later
            auto it = importers.find(b.table());
            if (it == importers.end()) {
              ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(b.table()));
              held.push_back(t);
              it = importers
                       .emplace(b.table(), std::make_unique<RowImporter>(
                                               t.get(), Owner(b.table(), me, shards)))
                       .first;
            }
            if (!b.deleted_keys().empty()) {
              // Rows buffered so far came before these deletes.
              RETURN_IF_ERROR(it->second->Flush());
              const Owner owner(b.table(), me, shards);
              std::vector<uint64_t> keys = CopyOut<uint64_t>(b.deleted_keys());
              keys.erase(std::remove_if(keys.begin(), keys.end(),
                                        [&](uint64_t k) { return !owner.Owns(k); }),
                         keys.end());
              ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(b.table()));
              RETURN_IF_ERROR(t->ImportDeletes(keys));
            }
            const size_t row_bytes = b.row_bytes();
            if (b.rows().empty()) return absl::OkStatus();
            if (row_bytes == 0 || b.rows().size() % row_bytes != 0) {
              return absl::DataLossError(absl::StrCat(part, ": a row block of table '", b.table(),
                                                      "' holds ", b.rows().size(),
                                                      " bytes, not a multiple of ", row_bytes));
            }
            for (size_t off = 0; off < b.rows().size(); off += row_bytes) {
              RETURN_IF_ERROR(it->second->Add(b.rows().data() + off, row_bytes));
            }
            return absl::OkStatus();
          }));
      for (auto& [name, importer] : importers) {
        RETURN_IF_ERROR(importer->Flush());
        info.rows += importer->rows();
      }
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

}  // namespace brook::ps
