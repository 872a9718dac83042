#include "ps/internal/checkpoint_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "brook/v1/storage.pb.h"
#include "common/status_macros.h"
#include "storage/atomic_file.h"
#include "storage/crc32c.h"
#include "storage/tfrecord.h"

namespace brook::ps::internal {
namespace {

namespace fs = std::filesystem;

constexpr char kManifestMagic[4] = {'B', 'R', 'K', 'M'};
constexpr size_t kBlockBytes = 4u << 20;

void PutFixed32(std::string* out, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);  // little-endian platforms only (wire.h asserts it)
  out->append(b, 4);
}

// Parses "shard-<i>-of-<n>"; false for anything else.
bool ParseShardDirName(const std::string& name, int32_t* index, int32_t* num) {
  int i = 0, n = 0, consumed = 0;
  if (std::sscanf(name.c_str(), "shard-%d-of-%d%n", &i, &n, &consumed) != 2) return false;
  if (static_cast<size_t>(consumed) != name.size() || n <= 0 || i < 0 || i >= n) return false;
  *index = i;
  *num = n;
  return true;
}

// Absolute, normalized, without a trailing separator.
fs::path Normalized(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) p = path;
  p = p.lexically_normal();
  if (p.has_relative_path() && p.filename().empty()) p = p.parent_path();
  return p;
}

}  // namespace

std::string ShardDirName(int32_t shard_index, int32_t num_shards) {
  return absl::StrFormat("shard-%05d-of-%05d", shard_index, num_shards);
}

absl::StatusOr<v1::CheckpointFile> WriteManifest(const std::string& shard_dir,
                                                 const v1::CheckpointManifest& manifest) {
  std::string body;
  if (!manifest.SerializeToString(&body)) {
    return absl::InternalError(absl::StrCat("cannot serialize the manifest for ", shard_dir));
  }
  std::string file(kManifestMagic, 4);
  PutFixed32(&file, storage::crc32c::Mask(storage::crc32c::Value(body)));
  file += body;
  RETURN_IF_ERROR(storage::WriteFileAtomically(shard_dir + "/" + kManifestName, file));
  v1::CheckpointFile out;
  out.set_path(kManifestName);
  out.set_bytes(file.size());
  out.set_crc32c(storage::crc32c::Value(file));
  return out;
}

absl::StatusOr<v1::CheckpointManifest> ReadManifest(const std::string& shard_dir) {
  const std::string path = shard_dir + "/" + kManifestName;
  absl::StatusOr<std::string> file = storage::ReadFileToString(path);
  if (!file.ok()) {
    if (absl::IsNotFound(file.status())) {
      return absl::NotFoundError(
          absl::StrCat(shard_dir, " has no ", kManifestName, " (a half-written checkpoint)"));
    }
    return file.status();
  }
  if (file->size() < 8 || std::memcmp(file->data(), kManifestMagic, 4) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not a checkpoint manifest (bad magic)"));
  }
  uint32_t masked;
  std::memcpy(&masked, file->data() + 4, 4);
  const std::string_view body(file->data() + 8, file->size() - 8);
  if (storage::crc32c::Unmask(masked) != storage::crc32c::Value(body)) {
    return absl::DataLossError(
        absl::StrCat(path, ": checksum mismatch over ", body.size(), " bytes at offset 8"));
  }
  v1::CheckpointManifest m;
  if (!m.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return absl::DataLossError(absl::StrCat(path, ": body does not parse"));
  }
  if (m.format_version() != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": format version ", m.format_version(), ", this build reads 1"));
  }
  // Where the part is now, not where it was written: a moved or copied
  // checkpoint reads itself.
  const fs::path here = Normalized(shard_dir);
  v1::CheckpointInfo* info = m.mutable_info();
  info->set_shard_dir(here.string());
  info->set_dir(here.parent_path().string());
  if (!m.base_shard_dir().empty()) {
    fs::path base(m.base_shard_dir());
    if (base.is_relative()) base = Normalized((here / base).string());
    m.set_base_shard_dir(base.string());
    info->set_base_dir(base.parent_path().string());
  }
  return m;
}

absl::StatusOr<v1::CheckpointFile> HashFile(const std::string& dir, const std::string& path) {
  const std::string full = dir + "/" + path;
  const int fd = ::open(full.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string what = absl::StrCat(full, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(what) : absl::InternalError(what);
  }
  v1::CheckpointFile f;
  f.set_path(path);
  std::vector<char> buf(1 << 20);
  uint32_t crc = 0;
  uint64_t bytes = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("read ", full, ": ", std::strerror(err)));
    }
    if (n == 0) break;
    crc = storage::crc32c::Extend(crc, buf.data(), static_cast<size_t>(n));
    bytes += static_cast<uint64_t>(n);
  }
  ::close(fd);
  f.set_bytes(bytes);
  f.set_crc32c(crc);
  return f;
}

absl::StatusOr<v1::CheckpointFile> FileHashCache::Hash(const std::string& dir,
                                                       const std::string& path) {
  const std::string full = dir + "/" + path;
  struct stat st {};
  if (::stat(full.c_str(), &st) != 0) {
    return absl::InternalError(absl::StrCat("stat ", full, ": ", std::strerror(errno)));
  }
  const int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  const uint64_t inode = static_cast<uint64_t>(st.st_ino);
  auto it = by_inode_.find(inode);
  if (it != by_inode_.end() && it->second.bytes == static_cast<uint64_t>(st.st_size) &&
      it->second.mtime_ns == mtime_ns) {
    it->second.used = true;
    v1::CheckpointFile f;
    f.set_path(path);
    f.set_bytes(it->second.bytes);
    f.set_crc32c(it->second.crc32c);
    return f;
  }
  ASSIGN_OR_RETURN(v1::CheckpointFile f, HashFile(dir, path));
  by_inode_[inode] =
      Entry{.bytes = f.bytes(), .mtime_ns = mtime_ns, .crc32c = f.crc32c(), .used = true};
  return f;
}

void FileHashCache::Trim() {
  absl::erase_if(by_inode_, [](const auto& kv) { return !kv.second.used; });
  for (auto& [inode, e] : by_inode_) e.used = false;
}

absl::StatusOr<std::vector<v1::CheckpointFile>> ListPartFiles(const std::string& shard_dir,
                                                              FileHashCache* cache) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(shard_dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string rel = it->path().lexically_relative(shard_dir).string();
    const std::string name = it->path().filename().string();
    if (rel == kManifestName) continue;
    // RocksDB's info log and lock file change whenever the DB is opened
    // (a restore opens it read-only): not part of the data.
    if (absl::StartsWith(name, "LOG") || name == "LOCK") continue;
    paths.push_back(rel);
  }
  if (ec) return absl::InternalError(absl::StrCat("list ", shard_dir, ": ", ec.message()));
  std::sort(paths.begin(), paths.end());
  std::vector<v1::CheckpointFile> out;
  for (const std::string& p : paths) {
    absl::StatusOr<v1::CheckpointFile> f =
        cache != nullptr ? cache->Hash(shard_dir, p) : HashFile(shard_dir, p);
    RETURN_IF_ERROR(f.status());
    out.push_back(*std::move(f));
  }
  return out;
}

absl::Status VerifyPartFiles(const v1::CheckpointManifest& m, bool check_crc) {
  const std::string& dir = m.info().shard_dir();
  const std::string manifest = dir + "/" + kManifestName;
  auto size_of = [&](const std::string& path, uint64_t* bytes) -> absl::Status {
    std::error_code ec;
    const uintmax_t n = fs::file_size(path, ec);
    if (ec) {
      return absl::DataLossError(
          absl::StrCat(path, ": ", ec.message(), " (listed in ", manifest, ")"));
    }
    *bytes = static_cast<uint64_t>(n);
    return absl::OkStatus();
  };
  if (m.files().empty()) {  // written before files were listed
    const std::string rows = dir + "/" + kRowsFileName;
    uint64_t bytes = 0;
    RETURN_IF_ERROR(size_of(rows, &bytes));
    if (bytes != m.rows_file_bytes()) {
      return absl::DataLossError(
          absl::StrCat(rows, ": ", bytes, " bytes, ", manifest, " records ", m.rows_file_bytes()));
    }
    return absl::OkStatus();
  }
  for (const v1::CheckpointFile& f : m.files()) {
    const std::string path = dir + "/" + f.path();
    if (fs::path(f.path()).is_absolute() || absl::StrContains(f.path(), "..")) {
      return absl::DataLossError(
          absl::StrCat(manifest, ": file path '", f.path(), "' is outside the part"));
    }
    uint64_t bytes = 0;
    RETURN_IF_ERROR(size_of(path, &bytes));
    if (bytes != f.bytes()) {
      return absl::DataLossError(absl::StrCat(path, ": ", bytes, " bytes, ", manifest, " records ",
                                              f.bytes(),
                                              " (truncated or replaced since it was written)"));
    }
    if (!check_crc) continue;
    absl::StatusOr<v1::CheckpointFile> now = HashFile(dir, f.path());
    if (!now.ok()) return absl::DataLossError(now.status().message());
    if (now->crc32c() != f.crc32c()) {
      return absl::DataLossError(absl::StrFormat(
          "%s: CRC32C %08x, %s records %08x (the file changed since it was written)", path,
          now->crc32c(), manifest, f.crc32c()));
    }
  }
  return absl::OkStatus();
}

std::string RelativePath(const std::string& from, const std::string& to) {
  return Normalized(to).lexically_relative(Normalized(from)).string();
}

absl::StatusOr<std::vector<v1::CheckpointManifest>> ReadCheckpoint(const std::string& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("checkpoint ", dir, ": ", ec.message()));
  int32_t n = -1;
  std::vector<std::string> parts;
  for (const fs::directory_entry& e : it) {
    int32_t i = 0, num = 0;
    if (!e.is_directory() || !ParseShardDirName(e.path().filename().string(), &i, &num)) continue;
    if (n != -1 && num != n) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", dir, " mixes parts of ", n, " and ", num, " shards"));
    }
    n = num;
    parts.push_back(e.path().string());
  }
  if (n == -1) return absl::NotFoundError(absl::StrCat("checkpoint ", dir, " has no shard parts"));
  std::vector<v1::CheckpointManifest> out(n);
  std::vector<bool> seen(n, false);
  for (const std::string& p : parts) {
    absl::StatusOr<v1::CheckpointManifest> m = ReadManifest(p);
    if (!m.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", dir, " is incomplete: ", m.status().message()));
    }
    const int32_t i = m->shard_index();
    if (i < 0 || i >= n || m->num_shards() != n || seen[i]) {
      return absl::FailedPreconditionError(
          absl::StrCat(p, ": manifest says shard ", i, " of ", m->num_shards()));
    }
    seen[i] = true;
    out[i] = *std::move(m);
  }
  for (int32_t i = 0; i < n; ++i) {
    if (!seen[i]) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", dir, " is incomplete: no part ", ShardDirName(i, n)));
    }
  }
  return out;
}

absl::StatusOr<std::vector<v1::CheckpointManifest>> ReadChain(
    const v1::CheckpointManifest& newest) {
  std::vector<v1::CheckpointManifest> chain{newest};
  while (chain.back().info().incremental()) {
    if (chain.size() > 10000) return absl::FailedPreconditionError("checkpoint chain loops");
    const std::string base = chain.back().base_shard_dir();
    absl::StatusOr<v1::CheckpointManifest> m = ReadManifest(base);
    if (!m.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("incremental checkpoint ", chain.back().info().shard_dir(),
                       " needs its base ", base, ": ", m.status().message()));
    }
    chain.push_back(*std::move(m));
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

absl::StatusOr<std::unique_ptr<RowsFileWriter>> RowsFileWriter::Open(const std::string& path) {
  std::unique_ptr<RowsFileWriter> w(new RowsFileWriter(path));
  ASSIGN_OR_RETURN(w->writer_, storage::TFRecordWriter::Open(path, {}));
  return w;
}

RowsFileWriter::~RowsFileWriter() = default;

absl::Status RowsFileWriter::Put(const v1::CheckpointRecord& record) {
  buffer_.clear();
  if (!record.SerializeToString(&buffer_)) {
    return absl::InternalError(absl::StrCat(path_, ": cannot serialize a record"));
  }
  return writer_->Write(buffer_);
}

absl::Status RowsFileWriter::Rows(const char* rows, size_t count, size_t row_bytes) {
  const size_t per_block = std::max<size_t>(1, kBlockBytes / row_bytes);
  v1::CheckpointRecord record;
  v1::RowBlock* block = record.mutable_rows();
  block->set_table(table_);
  block->set_row_bytes(static_cast<uint32_t>(row_bytes));
  for (size_t i = 0; i < count; i += per_block) {
    const size_t m = std::min(per_block, count - i);
    block->set_rows(rows + i * row_bytes, m * row_bytes);
    RETURN_IF_ERROR(Put(record));
  }
  rows_written_ += count;
  return absl::OkStatus();
}

absl::Status RowsFileWriter::Deletes(absl::Span<const uint64_t> keys) {
  const size_t per_block = kBlockBytes / sizeof(uint64_t);
  v1::CheckpointRecord record;
  v1::RowBlock* block = record.mutable_rows();
  block->set_table(table_);
  for (size_t i = 0; i < keys.size(); i += per_block) {
    const size_t m = std::min(per_block, keys.size() - i);
    block->set_deleted_keys(reinterpret_cast<const char*>(keys.data() + i), m * sizeof(uint64_t));
    RETURN_IF_ERROR(Put(record));
  }
  return absl::OkStatus();
}

absl::Status RowsFileWriter::Dense(const std::string& name, absl::Span<const float> values,
                                   absl::Span<const float> slots) {
  v1::CheckpointRecord record;
  v1::DenseBlock* d = record.mutable_dense();
  d->set_name(name);
  d->set_values(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  d->set_slots(reinterpret_cast<const char*>(slots.data()), slots.size() * sizeof(float));
  return Put(record);
}

absl::StatusOr<uint64_t> RowsFileWriter::Close() {
  RETURN_IF_ERROR(writer_->Close());
  RETURN_IF_ERROR(SyncFile(path_));
  std::error_code ec;
  const uintmax_t size = fs::file_size(path_, ec);
  if (ec) return absl::InternalError(absl::StrCat(path_, ": ", ec.message()));
  return static_cast<uint64_t>(size);
}

absl::Status ForEachCheckpointRecord(
    const std::string& path, absl::FunctionRef<absl::Status(const v1::CheckpointRecord&)> fn) {
  ASSIGN_OR_RETURN(std::unique_ptr<storage::TFRecordReader> reader,
                   storage::TFRecordReader::Open(path, {}));
  v1::CheckpointRecord record;
  for (;;) {
    const uint64_t offset = reader->offset();
    std::string_view bytes;
    ASSIGN_OR_RETURN(bool more, reader->Next(&bytes));
    if (!more) return absl::OkStatus();
    if (!record.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return absl::DataLossError(
          absl::StrCat(path, ": record at offset ", offset, " is not a CheckpointRecord"));
    }
    RETURN_IF_ERROR(fn(record));
  }
}

absl::Status SyncFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return absl::InternalError(absl::StrCat("fsync ", path, ": ", std::strerror(err)));
  return absl::OkStatus();
}

uint64_t DirectoryBytes(const std::string& path) {
  std::error_code ec;
  uint64_t total = 0;
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

}  // namespace brook::ps::internal
