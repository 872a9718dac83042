// The TFRecord reader: a frame parser over a growable window of the
// (decompressed) stream.
//
// Memory: the window starts at options.buffer_bytes and grows only when one
// frame does not fit, and then only as fast as bytes actually arrive, so a
// corrupt or hostile length can never make it allocate more than about twice
// what the file really holds past that point, and never beyond
// max(buffer_bytes, max_record_bytes + 16).
//
// Every frame is checked in this order: header complete, length CRC, length
// against max_record_bytes, frame complete, data CRC. Nothing is trusted, and
// nothing is allocated for it, before the check that vouches for it.
#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "storage/crc32c.h"
#include "storage/internal/record_framing.h"
#include "storage/internal/zlib_stream.h"
#include "storage/tfrecord.h"

namespace brook::storage {
namespace {

using internal::kFrameOverheadBytes;
using internal::kHeaderBytes;
using internal::kLengthBytes;

constexpr size_t kMinCompressedBufferBytes = 16 << 10;
// Mapped files: resident pages behind the read position are dropped every
// kReleaseEveryBytes, keeping the last kKeepMappedBytes (records handed out
// recently stay valid for callers that hold a few).
constexpr size_t kReleaseEveryBytes = size_t{32} << 20;
constexpr size_t kKeepMappedBytes = size_t{16} << 20;
constexpr size_t kPrefetchBytes = 8 << 10;

// What CheckFrame found at the start of the window. Plain numbers, so that
// scanning for a frame (skip_corrupt) formats no message per byte.
struct FrameCheck {
  enum Kind {
    kRecord,           // a good frame of `length` data bytes
    kEnd,              // no bytes left: clean end of file
    kTruncatedHeader,  // the file ends `available` bytes into the header
    kLengthCrc,        // stored_crc (unmasked) != computed_crc over the length
    kTooLong,          // `length` above max_record_bytes
    kTruncatedRecord,  // the file ends `available` bytes into the frame
    kDataCrc,          // stored_crc (unmasked) != computed_crc over the data
  };
  Kind kind = kEnd;
  uint64_t length = 0;
  size_t available = 0;
  uint32_t stored_crc = 0;
  uint32_t computed_crc = 0;
};

class TFRecordReaderImpl final : public TFRecordReader {
 public:
  TFRecordReaderImpl(std::unique_ptr<InputStream> stream, const TFRecordReaderOptions& options)
      : stream_(std::move(stream)), options_(options), name_(stream_->name()) {}

  absl::Status Init() {
    if (options_.use_mmap && options_.compression == Compression::kNone) {
      if (std::optional<std::string_view> mapped = stream_->MapRemaining()) {
        // The whole file is the window; Fill() has nothing left to do.
        mapped_ = true;
        base_ = mapped->data();
        end_ = mapped->size();
        capacity_ = mapped->size();
        eof_ = true;
        return absl::OkStatus();
      }
    }
    return Reserve(std::max<size_t>(options_.buffer_bytes, kFrameOverheadBytes));
  }

  absl::StatusOr<bool> Next(std::string_view* record) override {
    if (!error_.ok()) return error_;
    absl::StatusOr<bool> result = NextImpl(record);
    if (!result.ok()) error_ = result.status();  // sticky: no reading on from a bad state
    return result;
  }

  uint64_t offset() const override { return offset_; }
  uint64_t record_index() const override { return record_index_; }
  const TFRecordReaderStats& stats() const override { return stats_; }
  const std::string& name() const override { return name_; }

 private:
  size_t available() const { return end_ - pos_; }
  const char* window() const { return base_ + pos_; }

  absl::StatusOr<bool> NextImpl(std::string_view* record) {
    while (true) {
      FrameCheck check;
      RETURN_IF_ERROR(WithFrameContext(CheckFrame(options_.verify_data_crc, &check)));
      switch (check.kind) {
        case FrameCheck::kEnd:
          return false;
        case FrameCheck::kRecord: {
          *record = std::string_view(window() + kHeaderBytes, check.length);
          Consume(check.length + kFrameOverheadBytes);
          if (mapped_) PrefetchAhead();
          stats_.bytes += check.length + kFrameOverheadBytes;
          ++stats_.records;
          ++record_index_;
          return true;
        }
        default:
          if (!options_.skip_corrupt) return Corruption(Describe(check));
          RETURN_IF_ERROR(WithFrameContext(SkipToNextGoodFrame()));
          break;  // read the frame found, or see the clean end
      }
    }
  }

  // Examines the frame at the start of the window without consuming it.
  absl::Status CheckFrame(bool verify_data_crc, FrameCheck* check) {
    RETURN_IF_ERROR(Fill(kHeaderBytes));
    if (available() == 0) {
      check->kind = FrameCheck::kEnd;
      return absl::OkStatus();
    }
    check->available = available();
    if (available() < kHeaderBytes) {
      check->kind = FrameCheck::kTruncatedHeader;
      return absl::OkStatus();
    }
    check->stored_crc = crc32c::Unmask(internal::DecodeFixed32(window() + kLengthBytes));
    check->computed_crc = crc32c::Value(window(), kLengthBytes);
    if (check->stored_crc != check->computed_crc) {
      check->kind = FrameCheck::kLengthCrc;
      return absl::OkStatus();
    }
    const uint64_t length = internal::DecodeFixed64(window());
    check->length = length;
    if (length > options_.max_record_bytes ||
        length > std::numeric_limits<size_t>::max() - kFrameOverheadBytes) {
      check->kind = FrameCheck::kTooLong;
      return absl::OkStatus();
    }
    const size_t frame_bytes = static_cast<size_t>(length) + kFrameOverheadBytes;
    RETURN_IF_ERROR(Fill(frame_bytes));
    check->available = available();
    if (available() < frame_bytes) {
      check->kind = FrameCheck::kTruncatedRecord;
      return absl::OkStatus();
    }
    if (verify_data_crc) {
      const char* data = window() + kHeaderBytes;
      check->stored_crc =
          crc32c::Unmask(internal::DecodeFixed32(data + frame_bytes - kFrameOverheadBytes));
      check->computed_crc = crc32c::Value(data, static_cast<size_t>(length));
      if (check->stored_crc != check->computed_crc) {
        check->kind = FrameCheck::kDataCrc;
        return absl::OkStatus();
      }
    }
    check->kind = FrameCheck::kRecord;
    return absl::OkStatus();
  }

  // What went wrong with a frame, for the error message. REQUIRES: the window
  // still starts at that frame.
  std::string Describe(const FrameCheck& check) const {
    switch (check.kind) {
      case FrameCheck::kTruncatedHeader:
        return absl::StrCat("truncated length header: the file ends ", check.available,
                            " bytes into the ", kHeaderBytes, "-byte frame header");
      case FrameCheck::kLengthCrc:
        return absl::StrFormat("length CRC mismatch (stored 0x%08x, computed 0x%08x)%s",
                               check.stored_crc, check.computed_crc, FormatHint());
      case FrameCheck::kTooLong:
        return absl::StrCat("record length ", check.length, " exceeds max_record_bytes ",
                            options_.max_record_bytes);
      case FrameCheck::kTruncatedRecord:
        return absl::StrCat("truncated record: expected ", check.length + kFrameOverheadBytes,
                            " bytes (record length ", check.length, " + ", kFrameOverheadBytes,
                            " bytes of framing), file ends after ", check.available);
      case FrameCheck::kDataCrc:
        return absl::StrFormat(
            "data CRC mismatch (stored 0x%08x, computed 0x%08x) in a record of %d bytes",
            check.stored_crc, check.computed_crc, check.length);
      case FrameCheck::kRecord:
      case FrameCheck::kEnd:
        break;
    }
    return "no problem";
  }

  // A file that is not TFRecord at all fails the first length CRC; say what it
  // looks like when that is cheap to tell.
  std::string FormatHint() const {
    if (offset_ != 0 || options_.compression != Compression::kNone) return "";
    const auto b0 = static_cast<unsigned char>(window()[0]);
    const auto b1 = static_cast<unsigned char>(window()[1]);
    if (b0 == 0x1f && b1 == 0x8b)
      return "; the file starts like a GZIP stream: read it with compression GZIP (a job's "
             "data.compression: gzip, or --compression gzip)";
    if ((b0 & 0x0f) == 8 && (b0 * 256 + b1) % 31 == 0) {
      return "; the file starts like a ZLIB stream: read it with compression ZLIB";
    }
    return "; is this a TFRecord file?";
  }

  // skip_corrupt: the frame at the window start is bad. Drops bytes one at a
  // time until a frame verifies completely or the file ends; everything
  // dropped is one skipped region. The data CRC is checked here whatever
  // verify_data_crc says: scanning gigabytes of garbage, a chance match of
  // the 32-bit length CRC alone is to be expected.
  absl::Status SkipToNextGoodFrame() {
    const uint64_t region_start = offset_;
    Consume(1);
    while (true) {
      FrameCheck check;
      RETURN_IF_ERROR(CheckFrame(/*verify_data_crc=*/true, &check));
      if (check.kind == FrameCheck::kRecord || check.kind == FrameCheck::kEnd) break;
      if (check.kind == FrameCheck::kTruncatedHeader) {
        Consume(available());  // a torn tail: nothing after it can be a frame
        break;
      }
      Consume(1);
    }
    const uint64_t skipped = offset_ - region_start;
    ++stats_.skipped_regions;
    stats_.skipped_bytes += skipped;
    stats_.bytes += skipped;
    return absl::OkStatus();
  }

  absl::Status Corruption(absl::string_view problem) const {
    return absl::DataLossError(absl::StrCat(name_, ": corrupt TFRecord frame at offset ", offset_,
                                            DecompressedNote(), " (record index ", record_index_,
                                            "): ", problem));
  }

  // Errors from below (I/O, decompression) keep their code and gain the frame.
  absl::Status WithFrameContext(absl::Status status) const {
    if (status.ok()) return status;
    return absl::Status(
        status.code(),
        absl::StrCat(status.message(), " (while reading the TFRecord frame at offset ", offset_,
                     DecompressedNote(), " of ", name_, ")"));
  }

  const char* DecompressedNote() const {
    return options_.compression == Compression::kNone ? "" : " in the decompressed stream";
  }

  void Consume(size_t n) {
    pos_ += n;
    offset_ += n;
    if (mapped_ && pos_ - released_ >= kReleaseEveryBytes) {
      // Records returned before this one may still be in use by the caller;
      // keep the last few MiB mapped in.
      stream_->ReleaseMappedPrefix(pos_ - kKeepMappedBytes);
      released_ = pos_;
    }
  }

  // Mapped files: the hardware prefetcher stops at each 4 KiB page, so the
  // first touch of every page would stall on memory. Keep cache lines flowing
  // kPrefetchBytes ahead of the frame being checked.
  void PrefetchAhead() {
    const size_t target = std::min(end_, pos_ + kPrefetchBytes);
    if (prefetched_ < pos_) prefetched_ = pos_;
    for (; prefetched_ < target; prefetched_ += 64) __builtin_prefetch(base_ + prefetched_);
  }

  // Makes at least `n` bytes available in the window unless the stream ends
  // first (then available() < n).
  absl::Status Fill(size_t n) {
    while (available() < n && !eof_) {
      if (pos_ + n > capacity_ && pos_ > 0) {  // the frame would run past the end: slide left
        std::memmove(buffer_.get(), buffer_.get() + pos_, available());
        end_ -= pos_;
        pos_ = 0;
      }
      if (end_ == capacity_) {
        // Full and still short: grow, at most doubling, so the window tracks
        // the bytes that really arrive rather than what a length claims.
        RETURN_IF_ERROR(Reserve(std::min(n, std::max(capacity_ * 2, capacity_ + 1))));
      }
      ASSIGN_OR_RETURN(size_t got, stream_->Read(buffer_.get() + end_, capacity_ - end_));
      if (got == 0) eof_ = true;
      end_ += got;
    }
    return absl::OkStatus();
  }

  absl::Status Reserve(size_t capacity) {
    if (capacity <= capacity_) return absl::OkStatus();
    std::unique_ptr<char[]> grown(new (std::nothrow) char[capacity]);
    if (grown == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat(name_, ": cannot allocate a ", capacity, "-byte read buffer"));
    }
    if (available() > 0) std::memcpy(grown.get(), buffer_.get() + pos_, available());
    end_ -= pos_;
    pos_ = 0;
    buffer_ = std::move(grown);
    base_ = buffer_.get();
    capacity_ = capacity;
    return absl::OkStatus();
  }

  const std::unique_ptr<InputStream> stream_;
  const TFRecordReaderOptions options_;
  const std::string name_;

  // The window: base_[pos_, end_) holds the stream's bytes from offset_ on.
  // base_ is buffer_ when reading, or the mapped file when mapped_.
  std::unique_ptr<char[]> buffer_;
  const char* base_ = nullptr;
  bool mapped_ = false;
  size_t released_ = 0;    // mapped: pos_ at the last ReleaseMappedPrefix
  size_t prefetched_ = 0;  // mapped: cache lines below this were prefetched
  size_t capacity_ = 0;
  size_t pos_ = 0;
  size_t end_ = 0;
  bool eof_ = false;

  uint64_t offset_ = 0;  // stream offset of buffer_[pos_]: the next frame
  uint64_t record_index_ = 0;
  TFRecordReaderStats stats_;
  absl::Status error_;  // sticky
};

}  // namespace

absl::StatusOr<std::unique_ptr<TFRecordReader>> TFRecordReader::Open(
    const std::string& path, const TFRecordReaderOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<InputStream> stream, OpenLocalInput(path));
  return Open(std::move(stream), options);
}

absl::StatusOr<std::unique_ptr<TFRecordReader>> TFRecordReader::Open(
    std::unique_ptr<InputStream> stream, const TFRecordReaderOptions& options) {
  if (stream == nullptr) return absl::InvalidArgumentError("TFRecord reader needs a stream");
  if (options.buffer_bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("TFRecord reader for ", stream->name(), ": buffer_bytes must be > 0"));
  }
  switch (options.compression) {
    case Compression::kNone:
      break;
    case Compression::kGzip:
    case Compression::kZlib: {
      auto format = options.compression == Compression::kGzip ? internal::ZlibFormat::kGzip
                                                              : internal::ZlibFormat::kZlib;
      // The compressed side gets its own buffer of similar size, but never so
      // small that reading turns into a syscall per byte.
      const size_t input_buffer_bytes =
          std::clamp<size_t>(options.buffer_bytes, kMinCompressedBufferBytes, size_t{256} << 10);
      ASSIGN_OR_RETURN(stream,
                       internal::NewZlibInputStream(std::move(stream), format, input_buffer_bytes));
      break;
    }
  }
  auto reader = std::make_unique<TFRecordReaderImpl>(std::move(stream), options);
  RETURN_IF_ERROR(reader->Init());
  return reader;
}

}  // namespace brook::storage
