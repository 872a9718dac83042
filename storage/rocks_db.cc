#include "storage/rocks_db.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "rocksdb/cache.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/slice.h"
#include "rocksdb/statistics.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"

namespace brook::storage {
namespace {

// ---------------------------------------------------------------------------
// Option choices. The workload: point lookups (batched MultiGet) of
// fixed-size rows of ~64-1100 bytes, many of them misses (keys the PS has
// never seen), batched overwrites when the PS spills rows, and full scans only
// when a table is exported. Nothing range-scans on the hot path. Durability
// comes from the PS's own WAL and checkpoints, not from RocksDB's WAL.
// docs/rocksdb-options.md carries the same reasoning at length.
//
// Table format (BlockBasedTableOptions):
// - One LRU block cache shared by every family (one per embedding table), so
//   the memory bound is one number however many tables a PS holds.
// - Full-key Bloom filter, bloom_bits_per_key (10: ~1% false positives), in
//   format_version 5 (the cache-local "fast" Bloom). A miss then costs a
//   filter probe per level instead of an index + data block read per level.
// - optimize_filters_for_hits = false: that option drops the bottom level's
//   filters, which only pays when almost every lookup hits. Ours miss often
//   (new keys), and a miss would then read a bottom-level data block.
// - cache_index_and_filter_blocks: index and filter blocks are charged to
//   the block cache (so its capacity is the memory bound), at high priority,
//   and pinned in every file (metadata_cache_options.unpartitioned_pinning =
//   kAll, a superset of pinning L0's): a lookup then reaches them through the
//   table reader's reference, without a cache lookup each. Measured here
//   (1M x 256 B rows, cache 10% of data, 4096-key MultiGet): pinning L0 only
//   gave 0.166 M rows/s, pinning all 0.187 M (7 of 7 interleaved pairs).
//   Pinned metadata is ~10 bits (filter) + ~2 bytes (index) per row, ~1% of
//   256-byte rows, well inside a cache sized at >= 10% of the data. Not
//   partitioned, for the same reason; revisit (kTwoLevelIndexSearch +
//   partition_filters) if metadata no longer fits comfortably in the cache.
// - data_block_index_type = kDataBlockBinaryAndHash: a hash index inside each
//   data block maps a key to its restart interval in one probe instead of a
//   binary search over restart points, and answers "not in this block" from
//   an empty bucket (Bloom false positives). ~1 byte per key. The gain grows
//   with rows per block: none measurable for 256-byte rows (16 a block, one
//   restart interval), meant for the 64-byte rows (64 a block).
// - block_size 4 KiB (RocksDB's default, and the page size): a block holds
//   ~4-60 rows. Smaller blocks would not read less from disk (a page is the
//   unit) and would grow the index.
// - optimize_filters_for_memory: sizes filters to malloc size classes, so
//   cache charge matches real memory; costs nothing on lookups.
// - XXH3 block checksums (the default) stay on: corruption must surface as
//   DATA_LOSS, and XXH3 is cheap next to a block read.
//
// Column family options:
// - compression: none on L0 .. L(n-1), LZ4 only at the bottommost level (if
//   this RocksDB has LZ4). Trained float rows compress poorly (RocksDB then
//   stores a block raw when LZ4 saves < 12.5%), and compressing on every
//   flush/compaction of the upper levels would cost CPU on every spill. The
//   bottom level holds ~90% of the data and changes least; rows that are
//   still mostly zeros (fresh optimizer slots) do compress there.
// - level_compaction_dynamic_level_bytes: level targets are derived from the
//   bottom level, so ~90% of data sits at the bottom and space amplification
//   stays ~1.1x; fewer levels means fewer filter probes per miss.
// - write_buffer_size = write_buffer_bytes per family, and db_write_buffer_size
//   = write_buffer_bytes across families: a single busy table can use the
//   whole budget, and many tables cannot multiply it.
// - memtable whole-key Bloom (memtable_prefix_bloom_size_ratio 0.002 with
//   memtable_whole_key_filtering): misses skip the memtable skiplist search
//   (~20 dependent cache misses). The Bloom is allocated whole with each
//   memtable, empty or not, and counts against db_write_buffer_size: at 2%
//   (1.3 MiB a family) the 52 families of one Criteo-shaped job took the
//   whole 64 MiB with their empty Blooms, and RocksDB flushed a memtable of
//   a few hundred rows every few milliseconds (35 k flushes in 6 minutes,
//   compaction of the tiny files then took half the PS's CPU). At 0.2%
//   (134 KiB) it is ~50 bits a row for the memtables such a job flushes
//   (~1 MiB each) and still ~1 bit a row for one family alone filling 64 MiB.
// - arena_block_size 64 KiB: a memtable's arena grows by blocks, the first
//   allocated at its first write; RocksDB's default (1 MiB here) alone made 52
//   families with a few rows each hold 55 of the 64 MiB.
//
// DB options:
// - max_background_jobs = 2: flushes and compactions run beside the PS's own
//   threads; more would only contend on small machines.
// - bytes_per_sync = 1 MiB: SST writes are written back incrementally instead
//   of in one burst at file close, which otherwise stalls foreground reads.
// - Statistics at kExceptHistogramOrTimers: tickers only (per-core counters,
//   no clock reads), enough for cache hit rates and bytes in GetStats().
// - avoid_flush_during_shutdown = false (the default, set explicitly): with
//   the WAL off, closing flushes the memtables, so a clean shutdown keeps
//   everything; only a crash loses what came after the last Flush().
// - WAL: WriteOptions::disableWAL = disable_wal on every write (default on).
// ---------------------------------------------------------------------------

constexpr absl::string_view kDefaultFamily = "default";  // rocksdb::kDefaultColumnFamilyName

rocksdb::ColumnFamilyOptions MakeColumnFamilyOptions(const RocksDbOptions& options,
                                                     std::shared_ptr<rocksdb::Cache> cache) {
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = std::move(cache);
  table.block_size = 4 << 10;
  table.format_version = 5;
  if (options.bloom_bits_per_key > 0) {
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(options.bloom_bits_per_key));
    table.whole_key_filtering = true;
    table.optimize_filters_for_memory = true;
  }
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  // Pinned in every file (kAll supersedes pin_l0_filter_and_index_blocks_in_cache).
  table.metadata_cache_options.unpartitioned_pinning = rocksdb::PinningTier::kAll;
  table.data_block_index_type = rocksdb::BlockBasedTableOptions::kDataBlockBinaryAndHash;
  table.data_block_hash_table_util_ratio = 0.75;

  rocksdb::ColumnFamilyOptions cf;
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  cf.optimize_filters_for_hits = false;
  cf.level_compaction_dynamic_level_bytes = true;
  cf.write_buffer_size = options.write_buffer_bytes;
  cf.memtable_whole_key_filtering = true;
  cf.memtable_prefix_bloom_size_ratio = 0.002;
  cf.arena_block_size = 64 << 10;
  cf.compression = rocksdb::kNoCompression;
  const auto supported = rocksdb::GetSupportedCompressions();
  const bool has_lz4 =
      std::find(supported.begin(), supported.end(), rocksdb::kLZ4Compression) != supported.end();
  cf.bottommost_compression = has_lz4 ? rocksdb::kLZ4Compression : rocksdb::kNoCompression;
  return cf;
}

rocksdb::DBOptions MakeDbOptions(const RocksDbOptions& options,
                                 std::shared_ptr<rocksdb::Statistics> statistics) {
  rocksdb::DBOptions db;
  db.create_if_missing = options.create_if_missing;
  db.max_background_jobs = 2;
  db.bytes_per_sync = 1 << 20;
  db.db_write_buffer_size = options.write_buffer_bytes;
  db.statistics = std::move(statistics);
  db.avoid_flush_during_shutdown = false;
  db.keep_log_file_num = 4;  // RocksDB's info LOG files, not the WAL
  return db;
}

// Maps a rocksdb::Status to absl, prefixing `context` (which names the path,
// and the family where there is one).
absl::Status FromRocks(const rocksdb::Status& s, absl::string_view context) {
  if (s.ok()) return absl::OkStatus();
  std::string message = absl::StrCat(context, ": ", s.ToString());
  switch (s.code()) {
    case rocksdb::Status::kNotFound:
    case rocksdb::Status::kColumnFamilyDropped:
      return absl::NotFoundError(message);
    case rocksdb::Status::kCorruption:
      return absl::DataLossError(message);
    case rocksdb::Status::kInvalidArgument:
      return absl::InvalidArgumentError(message);
    case rocksdb::Status::kNotSupported:
      return absl::UnimplementedError(message);
    case rocksdb::Status::kIOError:
      if (s.IsNoSpace()) return absl::ResourceExhaustedError(message);
      if (s.IsPathNotFound()) return absl::NotFoundError(message);
      // A local disk error is rarely cured by retrying: not UNAVAILABLE.
      return absl::InternalError(message);
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTryAgain:
    case rocksdb::Status::kTimedOut:
    case rocksdb::Status::kShutdownInProgress:
    case rocksdb::Status::kIncomplete:
      return absl::UnavailableError(message);
    case rocksdb::Status::kAborted:
    case rocksdb::Status::kMergeInProgress:
      return absl::AbortedError(message);
    default:
      return absl::InternalError(message);
  }
}

void EncodeKey(uint64_t key, char* out) {
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(key & 0xff);
    key >>= 8;
  }
}

uint64_t DecodeKey(const char* in) {
  uint64_t key = 0;
  for (int i = 0; i < 8; ++i) key = (key << 8) | static_cast<unsigned char>(in[i]);
  return key;
}

std::string Context(absl::string_view op, const std::string& path, absl::string_view cf) {
  return absl::StrCat("RocksDB ", op, " ", path, " family '", cf, "'");
}

bool DbExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(path) / "CURRENT", ec);
}

// Column family names in the DB at `path` ({"default"} for a new DB), with
// "default" first.
absl::StatusOr<std::vector<std::string>> ListFamilies(const rocksdb::DBOptions& db_options,
                                                      const std::string& path) {
  std::vector<std::string> names;
  if (DbExists(path)) {
    RETURN_IF_ERROR(FromRocks(rocksdb::DB::ListColumnFamilies(db_options, path, &names),
                              absl::StrCat("RocksDB list column families ", path)));
  }
  names.erase(std::remove(names.begin(), names.end(), kDefaultFamily), names.end());
  names.insert(names.begin(), std::string(kDefaultFamily));
  return names;
}

}  // namespace

RocksDb::RocksDb(std::string path, bool read_only, const RocksDbOptions& options)
    : path_(std::move(path)), read_only_(read_only), options_(options) {}

RocksDb::~RocksDb() {
  {
    std::unique_lock lock(mu_);
    families_.clear();
    default_family_.reset();
  }
  if (db_ != nullptr) {
    // Flushes memtables when the WAL is off (avoid_flush_during_shutdown is
    // false). A failure here has no caller to report to; data written since
    // the last successful Flush() may then be lost, as after a crash.
    db_->Close().PermitUncheckedError();
    db_.reset();
  }
}

RocksDb::HandlePtr RocksDb::Adopt(rocksdb::ColumnFamilyHandle* handle) {
  rocksdb::DB* db = db_.get();
  return HandlePtr(handle, [db](rocksdb::ColumnFamilyHandle* h) {
    db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  });
}

absl::StatusOr<std::unique_ptr<RocksDb>> RocksDb::Open(const std::string& path,
                                                       const RocksDbOptions& options) {
  if (options.write_buffer_bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RocksDB open ", path, ": write_buffer_bytes must be > 0"));
  }
  if (!options.create_if_missing && !DbExists(path)) {
    return absl::NotFoundError(absl::StrCat("RocksDB open ", path, ": no database there"));
  }
  return OpenImpl(path, options, /*read_only=*/false);
}

absl::StatusOr<std::unique_ptr<RocksDb>> RocksDb::OpenReadOnly(const std::string& path) {
  if (!DbExists(path)) {
    return absl::NotFoundError(
        absl::StrCat("RocksDB open read-only ", path, ": no database there"));
  }
  RocksDbOptions options;
  options.create_if_missing = false;
  return OpenImpl(path, options, /*read_only=*/true);
}

absl::StatusOr<std::unique_ptr<RocksDb>> RocksDb::OpenImpl(const std::string& path,
                                                           const RocksDbOptions& options,
                                                           bool read_only) {
  std::unique_ptr<RocksDb> db(new RocksDb(path, read_only, options));
  db->statistics_ = rocksdb::CreateDBStatistics();
  db->statistics_->set_stats_level(rocksdb::StatsLevel::kExceptHistogramOrTimers);
  db->cf_options_ = std::make_unique<rocksdb::ColumnFamilyOptions>(
      MakeColumnFamilyOptions(options, rocksdb::NewLRUCache(options.block_cache_bytes)));
  const rocksdb::DBOptions db_options = MakeDbOptions(options, db->statistics_);

  // RocksDB must be given every family the DB has, "default" included.
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListFamilies(db_options, path));
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names) descriptors.emplace_back(name, *db->cf_options_);
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  if (read_only) {
    RETURN_IF_ERROR(
        FromRocks(rocksdb::DB::OpenForReadOnly(db_options, path, descriptors, &handles, &raw),
                  absl::StrCat("RocksDB open read-only ", path)));
  } else {
    RETURN_IF_ERROR(FromRocks(rocksdb::DB::Open(db_options, path, descriptors, &handles, &raw),
                              absl::StrCat("RocksDB open ", path)));
  }
  db->db_.reset(raw);
  std::unique_lock lock(db->mu_);
  db->default_family_ = db->Adopt(handles[0]);
  for (size_t i = 1; i < handles.size(); ++i) db->families_[names[i]] = db->Adopt(handles[i]);
  return db;
}

absl::Status RocksDb::CheckWritable(absl::string_view what) const {
  if (!read_only_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("RocksDB ", what, " ", path_, ": opened read-only"));
}

absl::StatusOr<RocksDb::HandlePtr> RocksDb::Family(const std::string& cf) const {
  std::shared_lock lock(mu_);
  auto it = families_.find(cf);
  if (it == families_.end()) {
    return absl::NotFoundError(absl::StrCat("RocksDB ", path_, ": no column family '", cf, "'"));
  }
  return it->second;
}

absl::Status RocksDb::CreateColumnFamily(const std::string& name) {
  RETURN_IF_ERROR(CheckWritable(absl::StrCat("create column family '", name, "' in")));
  if (name.empty() || name == kDefaultFamily) {
    return absl::InvalidArgumentError(
        absl::StrCat("RocksDB create column family in ", path_, ": '", name, "' is reserved"));
  }
  // change_mu_ (not mu_) is held across RocksDB's MANIFEST write, so lookups
  // by other threads are not blocked by it.
  std::lock_guard change(change_mu_);
  if (HasColumnFamily(name)) return absl::OkStatus();
  rocksdb::ColumnFamilyHandle* handle = nullptr;
  RETURN_IF_ERROR(FromRocks(db_->CreateColumnFamily(*cf_options_, name, &handle),
                            Context("create column family in", path_, name)));
  HandlePtr owned = Adopt(handle);
  std::unique_lock lock(mu_);
  families_[name] = std::move(owned);
  return absl::OkStatus();
}

absl::Status RocksDb::DropColumnFamily(const std::string& name) {
  RETURN_IF_ERROR(CheckWritable(absl::StrCat("drop column family '", name, "' in")));
  std::lock_guard change(change_mu_);
  auto handle = Family(name);
  if (!handle.ok()) return absl::OkStatus();
  RETURN_IF_ERROR(FromRocks(db_->DropColumnFamily(handle->get()),
                            Context("drop column family in", path_, name)));
  std::unique_lock lock(mu_);
  // Readers that still hold the handle finish on the dropped family; RocksDB
  // deletes its files when the last handle is destroyed.
  families_.erase(name);
  return absl::OkStatus();
}

bool RocksDb::HasColumnFamily(const std::string& name) const {
  std::shared_lock lock(mu_);
  return families_.contains(name);
}

std::vector<std::string> RocksDb::ColumnFamilies() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> names;
  names.reserve(families_.size());
  for (const auto& [name, handle] : families_) names.push_back(name);
  return names;
}

absl::Status RocksDb::MultiGet(const std::string& cf, absl::Span<const uint64_t> keys,
                               size_t value_bytes, char* values, bool* found) const {
  if (keys.empty()) return absl::OkStatus();
  if (found == nullptr || (values == nullptr && value_bytes > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Context("MultiGet in", path_, cf), ": null output buffer"));
  }
  ASSIGN_OR_RETURN(HandlePtr handle, Family(cf));
  const size_t n = keys.size();
  std::vector<char> key_bytes(n * 8);
  std::vector<rocksdb::Slice> slices(n);
  for (size_t i = 0; i < n; ++i) {
    EncodeKey(keys[i], &key_bytes[i * 8]);
    slices[i] = rocksdb::Slice(&key_bytes[i * 8], 8);
  }
  std::vector<rocksdb::PinnableSlice> results(n);
  std::vector<rocksdb::Status> statuses(n);
  db_->MultiGet(rocksdb::ReadOptions(), handle.get(), n, slices.data(), results.data(),
                statuses.data(), /*sorted_input=*/false);
  for (size_t i = 0; i < n; ++i) {
    if (statuses[i].IsNotFound()) {
      found[i] = false;
      continue;
    }
    if (!statuses[i].ok()) {
      return FromRocks(statuses[i],
                       absl::StrCat(Context("MultiGet in", path_, cf), " key ", keys[i]));
    }
    if (results[i].size() != value_bytes) {
      return absl::DataLossError(absl::StrCat(Context("MultiGet in", path_, cf), " key ", keys[i],
                                              ": stored value is ", results[i].size(),
                                              " bytes, expected ", value_bytes));
    }
    if (value_bytes > 0) std::memcpy(values + i * value_bytes, results[i].data(), value_bytes);
    found[i] = true;
  }
  return absl::OkStatus();
}

absl::Status RocksDb::Write(const std::string& cf, absl::Span<const uint64_t> keys,
                            const char* values, size_t value_bytes,
                            absl::Span<const uint64_t> deletes) {
  RETURN_IF_ERROR(CheckWritable(absl::StrCat("write to family '", cf, "' of")));
  if (keys.empty() && deletes.empty()) return absl::OkStatus();
  if (!keys.empty() && values == nullptr && value_bytes > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Context("write to", path_, cf), ": null values"));
  }
  ASSIGN_OR_RETURN(HandlePtr handle, Family(cf));
  // ~12 bytes of WriteBatch framing per entry beside key and value.
  rocksdb::WriteBatch batch(keys.size() * (value_bytes + 8 + 12) + deletes.size() * (8 + 12) + 12);
  char key[8];
  for (size_t i = 0; i < keys.size(); ++i) {
    EncodeKey(keys[i], key);
    RETURN_IF_ERROR(FromRocks(batch.Put(handle.get(), rocksdb::Slice(key, 8),
                                        rocksdb::Slice(values + i * value_bytes, value_bytes)),
                              Context("write to", path_, cf)));
  }
  for (uint64_t k : deletes) {
    EncodeKey(k, key);
    RETURN_IF_ERROR(FromRocks(batch.Delete(handle.get(), rocksdb::Slice(key, 8)),
                              Context("write to", path_, cf)));
  }
  rocksdb::WriteOptions write_options;
  write_options.disableWAL = options_.disable_wal;
  return FromRocks(db_->Write(write_options, &batch), Context("write to", path_, cf));
}

absl::Status RocksDb::ForEach(
    const std::string& cf,
    absl::FunctionRef<absl::Status(uint64_t key, std::string_view value)> fn) const {
  ASSIGN_OR_RETURN(HandlePtr handle, Family(cf));
  rocksdb::ReadOptions read_options;
  read_options.fill_cache = false;  // a full scan must not evict the lookups' working set
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options, handle.get()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    rocksdb::Slice key = it->key();
    if (key.size() != 8) {
      return absl::DataLossError(absl::StrCat(Context("scan of", path_, cf), ": a key of ",
                                              key.size(), " bytes (expected 8)"));
    }
    rocksdb::Slice value = it->value();
    RETURN_IF_ERROR(fn(DecodeKey(key.data()), std::string_view(value.data(), value.size())));
  }
  return FromRocks(it->status(), Context("scan of", path_, cf));
}

uint64_t RocksDb::ApproximateKeys(const std::string& cf) const {
  auto handle = Family(cf);
  if (!handle.ok()) return 0;
  uint64_t keys = 0;
  if (!db_->GetIntProperty(handle->get(), "rocksdb.estimate-num-keys", &keys)) return 0;
  return keys;
}

absl::Status RocksDb::CreateCheckpoint(const std::string& dir) {
  RETURN_IF_ERROR(CheckWritable(absl::StrCat("checkpoint to ", dir, " of")));
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) {
    return absl::AlreadyExistsError(
        absl::StrCat("RocksDB checkpoint of ", path_, ": ", dir, " already exists"));
  }
  rocksdb::Checkpoint* raw = nullptr;
  const std::string context = absl::StrCat("RocksDB checkpoint of ", path_, " to ", dir);
  RETURN_IF_ERROR(FromRocks(rocksdb::Checkpoint::Create(db_.get(), &raw), context));
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush = 0: always flush the memtables first. With the WAL off
  // they are the only copy of recent writes, and a checkpoint that copied
  // WAL files instead would miss them.
  return FromRocks(checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0), context);
}

absl::Status RocksDb::Flush() {
  // Nothing to flush in a read-only DB: it never writes.
  if (read_only_) return absl::OkStatus();
  std::vector<HandlePtr> owned;
  {
    std::shared_lock lock(mu_);
    owned.push_back(default_family_);
    for (const auto& [name, handle] : families_) owned.push_back(handle);
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  for (const HandlePtr& h : owned) handles.push_back(h.get());
  rocksdb::FlushOptions flush_options;
  flush_options.wait = true;
  // One call lets the background jobs flush families in parallel.
  rocksdb::Status status = db_->Flush(flush_options, handles);
  if (status.IsColumnFamilyDropped()) {
    // A family was dropped by another thread after we listed it; it has
    // nothing left to persist. Flush the others one by one.
    status = rocksdb::Status::OK();
    for (rocksdb::ColumnFamilyHandle* handle : handles) {
      rocksdb::Status one = db_->Flush(flush_options, handle);
      if (!one.ok() && !one.IsColumnFamilyDropped()) {
        status = one;
        break;
      }
    }
  }
  return FromRocks(status, absl::StrCat("RocksDB flush ", path_));
}

absl::Status RocksDb::CompactAll() {
  RETURN_IF_ERROR(CheckWritable("compaction of"));
  std::vector<std::pair<std::string, HandlePtr>> owned;
  {
    std::shared_lock lock(mu_);
    owned.assign(families_.begin(), families_.end());
  }
  rocksdb::CompactRangeOptions compact_options;
  // The default (kIfHaveCompactionFilter) leaves files already at the bottom
  // alone instead of rewriting the whole family.
  for (const auto& [name, handle] : owned) {
    rocksdb::Status status = db_->CompactRange(compact_options, handle.get(), nullptr, nullptr);
    if (status.IsColumnFamilyDropped()) continue;  // dropped meanwhile: nothing to do
    RETURN_IF_ERROR(FromRocks(status, Context("compaction of", path_, name)));
  }
  return absl::OkStatus();
}

RocksDb::Stats RocksDb::GetStats() const {
  Stats stats;
  stats.block_cache_hits = statistics_->getTickerCount(rocksdb::BLOCK_CACHE_HIT);
  stats.block_cache_misses = statistics_->getTickerCount(rocksdb::BLOCK_CACHE_MISS);
  stats.bytes_read = statistics_->getTickerCount(rocksdb::BYTES_READ) +
                     statistics_->getTickerCount(rocksdb::NUMBER_MULTIGET_BYTES_READ) +
                     statistics_->getTickerCount(rocksdb::ITER_BYTES_READ);
  stats.bytes_written = statistics_->getTickerCount(rocksdb::BYTES_WRITTEN);
  stats.stall_micros = statistics_->getTickerCount(rocksdb::STALL_MICROS);
  std::vector<HandlePtr> owned;
  {
    std::shared_lock lock(mu_);
    owned.push_back(default_family_);
    for (const auto& [name, handle] : families_) owned.push_back(handle);
  }
  for (const HandlePtr& h : owned) {
    uint64_t bytes = 0;
    if (db_->GetIntProperty(h.get(), "rocksdb.total-sst-files-size", &bytes)) {
      stats.sst_bytes += bytes;
    }
    if (db_->GetIntProperty(h.get(), "rocksdb.estimate-pending-compaction-bytes", &bytes)) {
      stats.pending_compaction_bytes += bytes;
    }
    if (db_->GetIntProperty(h.get(), "rocksdb.cur-size-all-mem-tables", &bytes)) {
      stats.memtable_bytes += bytes;
    }
    if (db_->GetIntProperty(h.get(), "rocksdb.estimate-table-readers-mem", &bytes)) {
      stats.table_reader_bytes += bytes;
    }
  }
  // One cache shared by every family: read through any of them.
  uint64_t bytes = 0;
  if (db_->GetIntProperty(default_family_.get(), "rocksdb.block-cache-usage", &bytes)) {
    stats.block_cache_bytes = bytes;
  }
  if (db_->GetIntProperty(default_family_.get(), "rocksdb.block-cache-pinned-usage", &bytes)) {
    stats.block_cache_pinned_bytes = bytes;
  }
  return stats;
}

}  // namespace brook::storage
