#include "ps/internal/checkpoint_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

}  // namespace

std::string ShardDirName(int32_t shard_index, int32_t num_shards) {
  return absl::StrFormat("shard-%05d-of-%05d", shard_index, num_shards);
}

absl::Status WriteManifest(const std::string& shard_dir, const v1::CheckpointManifest& manifest) {
  std::string body;
  if (!manifest.SerializeToString(&body)) {
    return absl::InternalError(absl::StrCat("cannot serialize the manifest for ", shard_dir));
  }
  std::string file(kManifestMagic, 4);
  PutFixed32(&file, storage::crc32c::Mask(storage::crc32c::Value(body)));
  file += body;
  return storage::WriteFileAtomically(shard_dir + "/" + kManifestName, file);
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
  return m;
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
