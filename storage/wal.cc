// The write-ahead log: group-committing writer and replay. Format and
// contracts are in wal.h.
#include "storage/wal.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/transient_error.h"
#include "storage/atomic_file.h"
#include "storage/crc32c.h"
#include "storage/file.h"
#include "storage/internal/record_framing.h"

namespace brook::storage {
namespace {

using internal::DecodeFixed32;
using internal::DecodeFixed64;
using internal::EncodeFixed32;
using internal::EncodeFixed64;

constexpr size_t kNotFound = static_cast<size_t>(-1);

absl::Status CorruptAt(const std::string& path, size_t offset, absl::string_view problem) {
  return absl::DataLossError(absl::StrCat("WAL ", path, " at offset ", offset, ": ", problem));
}

// The LSN and the payload are adjacent in a frame, so one pass covers both.
uint32_t FrameCrc(const char* frame, uint32_t length) {
  return crc32c::Mask(crc32c::Value(frame + 8, 8 + size_t{length}));
}

// True if a complete frame whose CRC verifies starts at `offset`.
bool IntactFrameAt(std::string_view data, size_t offset, uint32_t* length) {
  if (data.size() - offset < kWalHeaderBytes) return false;
  const char* frame = data.data() + offset;
  *length = DecodeFixed32(frame);
  if (*length > kWalMaxRecordBytes) return false;
  if (data.size() - offset - kWalHeaderBytes < *length) return false;
  return DecodeFixed32(frame + 4) == FrameCrc(frame, *length);
}

// For the error message: what is wrong with the frame at `offset`.
std::string DescribeDamage(std::string_view data, size_t offset) {
  size_t left = data.size() - offset;
  if (left < kWalHeaderBytes) {
    return absl::StrCat("truncated header (", left, " of ", kWalHeaderBytes, " bytes)");
  }
  uint32_t length = DecodeFixed32(data.data() + offset);
  if (length > kWalMaxRecordBytes) {
    return absl::StrCat("length ", length, " exceeds the limit of ", kWalMaxRecordBytes);
  }
  if (left - kWalHeaderBytes < length) {
    return absl::StrCat("truncated payload (", left - kWalHeaderBytes, " of ", length, " bytes)");
  }
  return "CRC mismatch";
}

// The first offset at or after `from` where an intact frame with a plausible
// LSN (>= min_lsn, and no further on than the bytes allow) starts. A torn
// tail is a prefix of what was written, so nothing intact can follow it;
// finding something means the damage sits in the middle of the log, and
// truncating there would silently drop acknowledged records.
size_t FindIntactFrame(std::string_view data, size_t from, uint64_t min_lsn) {
  const uint64_t max_lsn = min_lsn + data.size() / kWalHeaderBytes;
  for (size_t p = from; p + kWalHeaderBytes <= data.size(); ++p) {
    uint64_t lsn = DecodeFixed64(data.data() + p + 8);
    if (lsn < min_lsn || lsn > max_lsn) continue;  // cheap filter before the CRC
    uint32_t length;
    if (IntactFrameAt(data, p, &length)) return p;
  }
  return kNotFound;
}

// Allocates a segment's blocks up front, past its end (the size stays that
// of what was written, so replay and a torn-tail check see only records).
// Appending into allocated blocks skips ext4's per-page block reservation:
// a write(2) of 1 MB took 0.23 ms instead of 0.36. Best effort: a file
// system without fallocate, or without the space, appends as before.
void Preallocate(int fd, uint64_t bytes) {
  if (bytes > 0) ::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes));
}

struct SegmentFile {
  uint64_t first_lsn;
  std::string path;
};

// "wal-" + 20 digits + ".log" -> the digits' value. Other files are not ours.
bool ParseSegmentName(const std::string& name, uint64_t* first_lsn) {
  constexpr size_t kDigits = 20;
  if (name.size() != 4 + kDigits + 4 || name.compare(0, 4, "wal-") != 0 ||
      name.compare(4 + kDigits, 4, ".log") != 0) {
    return false;
  }
  absl::string_view digits(name.data() + 4, kDigits);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  return absl::SimpleAtoi(digits, first_lsn);
}

// The segments in `dir` by first LSN; none if `dir` does not exist.
absl::StatusOr<std::vector<SegmentFile>> ListSegments(const std::string& dir) {
  std::vector<SegmentFile> segments;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return segments;
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    uint64_t first_lsn;
    if (!ParseSegmentName(name, &first_lsn)) continue;
    if (first_lsn == 0) return CorruptAt(dir + "/" + name, 0, "LSNs start at 1");
    segments.push_back({first_lsn, dir + "/" + name});
  }
  if (ec) return ErrnoError(ec.value(), "list WAL directory", dir);
  std::sort(segments.begin(), segments.end(),
            [](const SegmentFile& a, const SegmentFile& b) { return a.first_lsn < b.first_lsn; });
  return segments;
}

struct LogEnd {
  uint64_t next_lsn = 1;         // the LSN after the last valid record
  uint64_t valid_bytes = 0;      // of the last segment, up to its torn tail
  uint64_t torn_tail_bytes = 0;  // of the last segment
};

// Checks every frame and the LSN sequence within and across segments, calling
// fn on each record with LSN >= from_lsn. Segments whose records all lie below
// from_lsn (the next segment starts at or before it) are skipped unread.
absl::StatusOr<LogEnd> ScanLog(const std::vector<SegmentFile>& segments, uint64_t from_lsn,
                               absl::FunctionRef<absl::Status(uint64_t, std::string_view)> fn) {
  LogEnd end;
  bool first = true;
  for (size_t i = 0; i < segments.size(); ++i) {
    const bool last = i + 1 == segments.size();
    if (!last && segments[i + 1].first_lsn <= from_lsn) continue;
    const SegmentFile& segment = segments[i];
    if (first && from_lsn > 1 && segment.first_lsn > from_lsn) {
      return CorruptAt(segment.path, 0,
                       absl::StrCat("the log starts at LSN ", segment.first_lsn,
                                    ", so records from LSN ", from_lsn, " are missing"));
    }
    if (!first && segment.first_lsn != end.next_lsn) {
      return CorruptAt(segment.path, 0,
                       absl::StrCat("segment starts at LSN ", segment.first_lsn,
                                    " but the previous one ends at LSN ", end.next_lsn - 1));
    }
    first = false;

    ASSIGN_OR_RETURN(std::string data, ReadFileToString(segment.path));
    uint64_t lsn = segment.first_lsn;
    size_t offset = 0;
    while (offset < data.size()) {
      uint32_t length = 0;
      if (!IntactFrameAt(data, offset, &length)) {
        std::string problem = DescribeDamage(data, offset);
        // Only the last segment can have been cut short by a crash: a writer
        // starts a new segment only after writing the previous one whole.
        if (!last) return CorruptAt(segment.path, offset, problem);
        size_t next = FindIntactFrame(data, offset + 1, lsn);
        if (next != kNotFound) {
          return CorruptAt(segment.path, offset,
                           absl::StrCat(problem, ", and a valid record follows at offset ", next));
        }
        end.torn_tail_bytes = data.size() - offset;
        break;
      }
      const char* frame = data.data() + offset;
      uint64_t frame_lsn = DecodeFixed64(frame + 8);
      if (frame_lsn != lsn) {
        return CorruptAt(
            segment.path, offset,
            absl::StrCat("record has LSN ", frame_lsn, " where ", lsn, " was expected"));
      }
      if (lsn >= from_lsn)
        RETURN_IF_ERROR(fn(lsn, std::string_view(frame + kWalHeaderBytes, length)));
      offset += kWalHeaderBytes + length;
      ++lsn;
    }
    end.next_lsn = lsn;
    end.valid_bytes = offset;
  }
  return end;
}

}  // namespace

std::string WalSegmentName(uint64_t first_lsn) {
  char name[32];
  std::snprintf(name, sizeof(name), "wal-%020" PRIu64 ".log", first_lsn);
  return name;
}

WalWriter::WalWriter(std::string dir, const WalOptions& options, uint64_t next_lsn)
    : dir_(std::move(dir)),
      options_(options),
      next_lsn_(next_lsn),
      pending_first_lsn_(next_lsn),
      written_lsn_(next_lsn - 1) {}

absl::StatusOr<std::unique_ptr<WalWriter>> WalWriter::Open(const std::string& dir,
                                                           const WalOptions& options) {
  std::error_code ec;
  const bool created = std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoError(ec.value(), "create WAL directory", dir);
  ASSIGN_OR_RETURN(std::vector<SegmentFile> segments, ListSegments(dir));
  ASSIGN_OR_RETURN(LogEnd end, ScanLog(segments, 0, [](uint64_t, std::string_view) {
                     return absl::OkStatus();
                   }));
  std::unique_ptr<WalWriter> writer(new WalWriter(dir, options, end.next_lsn));
  const bool data_sync = options.sync == WalOptions::Sync::kData;

  if (segments.empty()) {
    RETURN_IF_ERROR(writer->StartSegment(end.next_lsn));
    if (created && data_sync) {
      // The new directory's own entry must be durable too.
      std::filesystem::path path = std::filesystem::absolute(dir).lexically_normal();
      if (!path.has_filename()) path = path.parent_path();
      RETURN_IF_ERROR(SyncDirectory(path.parent_path().string()));
    }
    writer->StartEarlyWriter();
    return writer;
  }

  const SegmentFile& tail = segments.back();
  writer->fd_ = ::open(tail.path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (writer->fd_ < 0) return ErrnoError(errno, "open", tail.path);
  if (end.torn_tail_bytes > 0) {
    // New records appended behind a torn frame would be unreachable for replay.
    if (::ftruncate(writer->fd_, static_cast<off_t>(end.valid_bytes)) != 0) {
      return ErrnoError(
          errno, absl::StrCat("truncate torn tail at offset ", end.valid_bytes, " of"), tail.path);
    }
    if (data_sync && ::fdatasync(writer->fd_) != 0)
      return ErrnoError(errno, "fdatasync", tail.path);
  }
  Preallocate(writer->fd_, options.segment_bytes);
  writer->segment_path_ = tail.path;
  writer->segment_size_ = end.valid_bytes;
  for (const SegmentFile& s : segments) writer->segments_.push_back({s.first_lsn, s.path});
  writer->StartEarlyWriter();
  return writer;
}

void WalWriter::StartEarlyWriter() {
  if (options_.sync != WalOptions::Sync::kNone || options_.early_write_bytes == 0) return;
  early_ = true;
  early_writer_ = std::thread([this] { WriteEarly(); });
}

WalWriter::~WalWriter() {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = next_lsn_ - 1;
    stopping_ = true;
  }
  early_cv_.notify_all();
  if (early_writer_.joinable()) early_writer_.join();
  Sync(last).IgnoreError();  // best effort: nobody is left to report to
  if (fd_ >= 0) ::close(fd_);
}

uint64_t WalWriter::Add(std::string_view record) {
  return AddInPlace(record.size(),
                    [&](char* dst) { std::memcpy(dst, record.data(), record.size()); });
}

uint64_t WalWriter::AddInPlace(size_t size, absl::FunctionRef<void(char* dst)> fill) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t lsn = next_lsn_++;
  if (size > kWalMaxRecordBytes && error_.ok()) {
    error_ = absl::InvalidArgumentError(
        absl::StrCat("WAL record ", lsn, " has ", size, " bytes, above the limit of ",
                     kWalMaxRecordBytes, "; the log in ", dir_, " refuses further writes"));
  }
  if (!error_.ok()) return lsn;  // nothing will be written again: hold no memory
  char* frame = pending_.Grow(kWalHeaderBytes + size);
  // The CRC stays 0 here; the writing thread fills it in, outside this lock.
  EncodeFixed32(frame, static_cast<uint32_t>(size));
  EncodeFixed32(frame + 4, 0);
  EncodeFixed64(frame + 8, lsn);
  fill(frame + kWalHeaderBytes);
  if (EarlyWriteDue()) early_cv_.notify_one();
  return lsn;
}

bool WalWriter::EarlyWriteDue() const {
  // Not while a failed write waits for space: Syncs retry it, paced by
  // their callers; this thread would spin.
  return early_ && !writing_ && error_.ok() && !failing_ &&
         pending_.size() >= options_.early_write_bytes;
}

void WalWriter::WriteEarly() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    early_cv_.wait(lock, [&] { return stopping_ || EarlyWriteDue(); });
    if (stopping_) return;
    // A failure is the Syncs' to report (they wait on these records).
    WritePending(lock).IgnoreError();
  }
}

char* WalWriter::FrameBuffer::Grow(size_t n) {
  if (capacity_ - size_ < n) {
    const size_t capacity = std::max({size_t{4096}, size_ + n, 2 * capacity_});
    std::unique_ptr<char[]> grown(new char[capacity]);  // uninitialised: filled by the caller
    if (size_ > 0) std::memcpy(grown.get(), data_.get(), size_);
    data_ = std::move(grown);
    capacity_ = capacity;
  }
  char* end = data_.get() + size_;
  size_ += n;
  return end;
}

void WalWriter::FrameBuffer::Prepend(const FrameBuffer& front) {
  const size_t old_size = size_;
  Grow(front.size_);
  std::memmove(data_.get() + front.size_, data_.get(), old_size);
  if (front.size_ > 0) std::memcpy(data_.get(), front.data_.get(), front.size_);
}

void WalWriter::FrameBuffer::swap(FrameBuffer& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  std::swap(capacity_, other.capacity_);
}

absl::Status WalWriter::Sync(uint64_t lsn) {
  std::unique_lock<std::mutex> lock(mu_);
  lsn = std::min(lsn, next_lsn_ - 1);
  const uint64_t failures_at_start = failures_;
  while (true) {
    if (!error_.ok()) return error_;
    if (written_lsn_ >= lsn) return absl::OkStatus();
    // A write covering this LSN failed for want of space while we waited:
    // report it rather than retrying at once (the caller's retry paces it).
    if (failures_ != failures_at_start && lsn <= failed_last_lsn_) return last_failure_;
    if (!writing_) break;
    written_cv_.wait(lock);
  }
  // This thread writes everything pending, for itself and for whoever waits.
  return WritePending(lock);
}

absl::Status WalWriter::WritePending(std::unique_lock<std::mutex>& lock) {
  // Swapping keeps both buffers' capacity, so steady state allocates nothing.
  writing_ = true;
  group_.clear();
  group_.swap(pending_);
  const uint64_t first = pending_first_lsn_;
  const uint64_t last = next_lsn_ - 1;
  pending_first_lsn_ = next_lsn_;
  lock.unlock();

  bool retryable = false;
  absl::Status status = WriteGroup(group_, first, &retryable);

  lock.lock();
  writing_ = false;
  if (status.ok()) {
    written_lsn_ = last;
    stats_.records += last - first + 1;
    stats_.bytes += group_.size();
    ++stats_.group_writes;
    if (options_.sync == WalOptions::Sync::kData) ++stats_.syncs;
    failing_ = false;
  } else if (retryable) {
    // Undone on disk; keep the records, ahead of what was added meanwhile.
    pending_.Prepend(group_);
    pending_first_lsn_ = first;
    // Marked so a client retries it (common/transient_error.h): space may
    // return, and the same push is then acknowledged once.
    status = MarkTransient(std::move(status), kOutOfSpace);
    ++failures_;
    ++stats_.write_errors;
    failed_last_lsn_ = last;
    last_failure_ = status;
    failing_ = true;
  } else {
    ++stats_.write_errors;
    error_ = status;
  }
  written_cv_.notify_all();
  // Records added during this write may make the next one due already.
  if (EarlyWriteDue()) early_cv_.notify_one();
  return status;
}

bool WalWriter::failing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failing_;
}

absl::Status WalWriter::WriteGroup(FrameBuffer& group, uint64_t first_lsn, bool* retryable) {
  *retryable = false;
  if (segment_size_ > 0 && segment_size_ >= options_.segment_bytes) {
    const absl::Status started = StartSegment(first_lsn);
    // No file made (or an empty one left): nothing to undo.
    *retryable = absl::IsResourceExhausted(started);
    RETURN_IF_ERROR(started);
  }
  for (size_t offset = 0; offset < group.size();) {
    char* frame = group.data() + offset;
    uint32_t length = DecodeFixed32(frame);
    EncodeFixed32(frame + 4, FrameCrc(frame, length));
    offset += kWalHeaderBytes + length;
  }
  // On a failed or partial write the file ends in a torn group. Out of
  // space, it is cut back to the group's start (shrinking a file needs no
  // space) so a later write continues a clean log. Otherwise the error is
  // sticky, nothing is appended behind it and reopening truncates it.
  const uint64_t group_start = segment_size_;
  std::string_view left(group.data(), group.size());
  while (!left.empty()) {
    ssize_t n = ::write(fd_, left.data(), left.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int write_errno = errno;
      absl::Status failed = ErrnoError(
          write_errno, absl::StrCat("write at offset ", segment_size_, " of"), segment_path_);
      if ((write_errno == ENOSPC || write_errno == EDQUOT) &&
          ::ftruncate(fd_, static_cast<off_t>(group_start)) == 0) {
        segment_size_ = group_start;
        *retryable = true;
        return absl::ResourceExhaustedError(absl::StrCat(
            failed.message(), " (WAL in ", dir_, "): pushes are refused until space returns"));
      }
      return failed;
    }
    left.remove_prefix(static_cast<size_t>(n));
    segment_size_ += static_cast<uint64_t>(n);
  }
  if (options_.sync == WalOptions::Sync::kData && ::fdatasync(fd_) != 0) {
    return ErrnoError(errno, "fdatasync", segment_path_);
  }
  return absl::OkStatus();
}

absl::Status WalWriter::StartSegment(uint64_t first_lsn) {
  std::string path = absl::StrCat(dir_, "/", WalSegmentName(first_lsn));
  // O_EXCL: an existing file of that name would be a bug; refuse to clobber it.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "create WAL segment", path);
  Preallocate(fd, options_.segment_bytes);
  if (options_.sync == WalOptions::Sync::kData) {
    // Records synced into a file whose directory entry is lost are lost too.
    absl::Status status = SyncDirectory(dir_);
    if (!status.ok()) {
      ::close(fd);
      return status;
    }
  }
  // Every group in the old segment has been written (and synced under kData).
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  segment_size_ = 0;
  segment_path_ = path;
  std::lock_guard<std::mutex> lock(mu_);
  segments_.push_back({first_lsn, std::move(path)});
  return absl::OkStatus();
}

absl::Status WalWriter::DropBefore(uint64_t lsn) {
  std::vector<std::string> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Segment i holds LSNs below segments_[i + 1].first_lsn; back() is kept.
    size_t n = 0;
    while (n + 1 < segments_.size() && segments_[n + 1].first_lsn <= lsn) ++n;
    for (size_t i = 0; i < n; ++i) doomed.push_back(std::move(segments_[i].path));
    segments_.erase(segments_.begin(), segments_.begin() + static_cast<ptrdiff_t>(n));
  }
  // Oldest first, so that an interruption leaves a log without holes.
  for (const std::string& path : doomed) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoError(errno, "delete", path);
  }
  if (!doomed.empty() && options_.sync == WalOptions::Sync::kData) return SyncDirectory(dir_);
  return absl::OkStatus();
}

WalStats WalWriter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  WalStats stats = stats_;
  stats.segments = segments_.size();
  stats.last_lsn = next_lsn_ - 1;
  stats.failing = failing_;
  return stats;
}

absl::StatusOr<WalReplayStats> ReplayWal(
    const std::string& dir, uint64_t from_lsn,
    absl::FunctionRef<absl::Status(uint64_t lsn, std::string_view record)> fn) {
  ASSIGN_OR_RETURN(std::vector<SegmentFile> segments, ListSegments(dir));
  WalReplayStats stats;
  ASSIGN_OR_RETURN(LogEnd end, ScanLog(segments, from_lsn,
                                       [&](uint64_t lsn, std::string_view record) -> absl::Status {
                                         RETURN_IF_ERROR(fn(lsn, record));
                                         if (stats.records++ == 0) stats.first_lsn = lsn;
                                         stats.last_lsn = lsn;
                                         stats.bytes += record.size();
                                         return absl::OkStatus();
                                       }));
  stats.torn_tail_bytes = end.torn_tail_bytes;
  return stats;
}

}  // namespace brook::storage
