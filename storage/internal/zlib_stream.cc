// Inflate/deflate adapters for storage/internal/zlib_stream.h.
#include "storage/internal/zlib_stream.h"

#include <zlib.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace brook::storage::internal {
namespace {

constexpr int kWindowBits = MAX_WBITS;           // 15: a 32 KiB window
constexpr int kGzipWindowBits = MAX_WBITS + 16;  // zlib's "write/expect a gzip wrapper"
constexpr int kMemLevel = 9;                     // TF's ZlibCompressionOptions default
constexpr size_t kOutputBufferBytes = 256 << 10;

int WindowBits(ZlibFormat format) {
  return format == ZlibFormat::kGzip ? kGzipWindowBits : kWindowBits;
}

std::string ZlibMessage(const z_stream& stream, int code) {
  if (stream.msg != nullptr) return stream.msg;
  return absl::StrCat("zlib error ", code);
}

class ZlibInputStream final : public InputStream {
 public:
  ZlibInputStream(std::unique_ptr<InputStream> source, ZlibFormat format, size_t buffer_bytes)
      : source_(std::move(source)),
        format_(format),
        input_(std::make_unique_for_overwrite<char[]>(buffer_bytes)),
        input_capacity_(buffer_bytes) {}

  ~ZlibInputStream() override {
    if (initialized_) inflateEnd(&stream_);
  }
  ZlibInputStream(const ZlibInputStream&) = delete;
  ZlibInputStream& operator=(const ZlibInputStream&) = delete;

  absl::Status Init() {
    stream_ = z_stream{};
    int code = inflateInit2(&stream_, WindowBits(format_));
    if (code != Z_OK) {
      return absl::ResourceExhaustedError(
          absl::StrCat(name(), ": inflateInit2 failed: ", ZlibMessage(stream_, code)));
    }
    initialized_ = true;
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    if (!error_.ok()) return error_;
    size_t produced = 0;
    absl::Status status = Inflate(buf, n, &produced);
    if (!status.ok()) {
      error_ = status;
      // Hand over what was inflated before the problem; the error comes next.
      if (produced == 0) return status;
    }
    return produced;
  }

  const std::string& name() const override { return source_->name(); }

 private:
  // Where the stream stands between calls.
  enum class State {
    kStart,        // nothing fed to inflate yet
    kInMember,     // inside a compressed stream (gzip member)
    kMemberEnded,  // a stream ended; more input may hold another gzip member
    kDone,         // clean end of everything
  };

  uint64_t CompressedOffset() const { return source_bytes_ - stream_.avail_in; }

  absl::Status DataLoss(absl::string_view what) const {
    return absl::DataLossError(absl::StrCat(name(), ": ", what));
  }

  // Makes input available unless the source is exhausted.
  absl::Status RefillInput() {
    if (stream_.avail_in > 0 || source_eof_) return absl::OkStatus();
    ASSIGN_OR_RETURN(size_t got, source_->Read(input_.get(), input_capacity_));
    if (got == 0) source_eof_ = true;
    source_bytes_ += got;
    stream_.next_in = reinterpret_cast<Bytef*>(input_.get());
    stream_.avail_in = static_cast<uInt>(got);
    return absl::OkStatus();
  }

  // Inflates into buf[0, n); *produced says how much, also on error.
  absl::Status Inflate(char* buf, size_t n, size_t* produced) {
    // zlib counts in uInt; a short read is allowed by the InputStream contract.
    n = std::min<size_t>(n, std::numeric_limits<uInt>::max());
    stream_.next_out = reinterpret_cast<Bytef*>(buf);
    stream_.avail_out = static_cast<uInt>(n);
    absl::Status status = InflateLoop();
    *produced = n - stream_.avail_out;
    return status;
  }

  absl::Status InflateLoop() {
    while (stream_.avail_out > 0 && state_ != State::kDone) {
      RETURN_IF_ERROR(RefillInput());
      if (stream_.avail_in == 0) {  // the source is exhausted
        if (state_ == State::kInMember) {
          return DataLoss(absl::StrCat("truncated ", ZlibFormatName(format_),
                                       " stream: the file ends at compressed offset ",
                                       CompressedOffset(), ", before the stream does"));
        }
        state_ = State::kDone;  // no input at all, or after a complete stream
        break;
      }
      if (state_ == State::kMemberEnded) {
        if (format_ == ZlibFormat::kZlib) {
          return DataLoss(absl::StrCat("trailing data after the end of the ",
                                       ZlibFormatName(format_), " stream at compressed offset ",
                                       CompressedOffset()));
        }
        inflateReset(&stream_);  // another gzip member follows
      }
      state_ = State::kInMember;
      int code = inflate(&stream_, Z_NO_FLUSH);
      if (code == Z_STREAM_END) {
        state_ = State::kMemberEnded;
      } else if (code == Z_MEM_ERROR) {
        return absl::ResourceExhaustedError(absl::StrCat(name(), ": inflate out of memory"));
      } else if (code != Z_OK && code != Z_BUF_ERROR) {
        // Z_DATA_ERROR, Z_NEED_DICT, Z_STREAM_ERROR: the bytes are not what
        // the declared compression writes.
        return DataLoss(absl::StrCat("corrupt ", ZlibFormatName(format_),
                                     " stream at compressed offset ", CompressedOffset(), ": ",
                                     ZlibMessage(stream_, code), " (is the file really ",
                                     ZlibFormatName(format_), "-compressed?)"));
      }
    }
    return absl::OkStatus();
  }

  const std::unique_ptr<InputStream> source_;
  const ZlibFormat format_;
  const std::unique_ptr<char[]> input_;
  const size_t input_capacity_;
  z_stream stream_{};
  bool initialized_ = false;
  bool source_eof_ = false;
  uint64_t source_bytes_ = 0;  // compressed bytes read from the source
  State state_ = State::kStart;
  absl::Status error_;  // sticky: no reading on from a broken stream
};

class ZlibOutputStream final : public OutputStream {
 public:
  ZlibOutputStream(std::unique_ptr<OutputStream> sink, ZlibFormat format)
      : sink_(std::move(sink)),
        format_(format),
        output_(std::make_unique_for_overwrite<char[]>(kOutputBufferBytes)) {}

  ~ZlibOutputStream() override {
    if (initialized_) deflateEnd(&stream_);
  }
  ZlibOutputStream(const ZlibOutputStream&) = delete;
  ZlibOutputStream& operator=(const ZlibOutputStream&) = delete;

  absl::Status Init(int level) {
    stream_ = z_stream{};
    int code = deflateInit2(&stream_, level, Z_DEFLATED, WindowBits(format_), kMemLevel,
                            Z_DEFAULT_STRATEGY);
    if (code != Z_OK) {
      return absl::InvalidArgumentError(absl::StrCat(name(), ": deflateInit2(level ", level,
                                                     ") failed: ", ZlibMessage(stream_, code)));
    }
    initialized_ = true;
    ResetOutput();
    return absl::OkStatus();
  }

  absl::Status Append(std::string_view data) override {
    if (closed_) return absl::FailedPreconditionError(absl::StrCat("append to closed ", name()));
    if (!error_.ok()) return error_;
    while (!data.empty()) {
      size_t chunk = std::min<size_t>(data.size(), std::numeric_limits<uInt>::max());
      stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
      stream_.avail_in = static_cast<uInt>(chunk);
      while (stream_.avail_in > 0) {
        if (!Deflate(Z_NO_FLUSH)) return error_;
      }
      data.remove_prefix(chunk);
    }
    return absl::OkStatus();
  }

  absl::Status Close() override {
    if (closed_) return absl::FailedPreconditionError(absl::StrCat("close of closed ", name()));
    closed_ = true;
    if (error_.ok()) {
      stream_.next_in = nullptr;
      stream_.avail_in = 0;
      // Z_FINISH writes the rest of the deflate data and the trailer.
      while (error_.ok() && !finished_) Deflate(Z_FINISH);
      if (error_.ok()) error_ = FlushOutput();
    }
    absl::Status close_status = sink_->Close();
    return error_.ok() ? close_status : error_;
  }

  const std::string& name() const override { return sink_->name(); }

 private:
  void ResetOutput() {
    stream_.next_out = reinterpret_cast<Bytef*>(output_.get());
    stream_.avail_out = static_cast<uInt>(kOutputBufferBytes);
  }

  absl::Status FlushOutput() {
    size_t pending = kOutputBufferBytes - stream_.avail_out;
    if (pending > 0) RETURN_IF_ERROR(sink_->Append(std::string_view(output_.get(), pending)));
    ResetOutput();
    return absl::OkStatus();
  }

  // One deflate step; false (and error_ set) on failure.
  bool Deflate(int flush) {
    if (stream_.avail_out == 0) {
      error_ = FlushOutput();
      if (!error_.ok()) return false;
    }
    int code = deflate(&stream_, flush);
    if (code == Z_STREAM_END) {
      finished_ = true;
    } else if (code != Z_OK && code != Z_BUF_ERROR) {
      error_ = absl::InternalError(
          absl::StrCat(name(), ": deflate failed: ", ZlibMessage(stream_, code)));
      return false;
    }
    return true;
  }

  const std::unique_ptr<OutputStream> sink_;
  const ZlibFormat format_;
  const std::unique_ptr<char[]> output_;
  z_stream stream_{};
  bool initialized_ = false;
  bool finished_ = false;
  bool closed_ = false;
  absl::Status error_;  // sticky
};

}  // namespace

const char* ZlibFormatName(ZlibFormat format) {
  return format == ZlibFormat::kGzip ? "GZIP" : "ZLIB";
}

absl::StatusOr<std::unique_ptr<InputStream>> NewZlibInputStream(std::unique_ptr<InputStream> source,
                                                                ZlibFormat format,
                                                                size_t input_buffer_bytes) {
  if (input_buffer_bytes == 0) {
    return absl::InvalidArgumentError("zlib input buffer must not be empty");
  }
  auto stream = std::make_unique<ZlibInputStream>(std::move(source), format, input_buffer_bytes);
  RETURN_IF_ERROR(stream->Init());
  return stream;
}

absl::StatusOr<std::unique_ptr<OutputStream>> NewZlibOutputStream(
    std::unique_ptr<OutputStream> sink, ZlibFormat format, int level) {
  if (level < Z_DEFAULT_COMPRESSION || level > Z_BEST_COMPRESSION) {
    return absl::InvalidArgumentError(
        absl::StrCat("compression level ", level, " for ", sink->name(), " is not in -1..9"));
  }
  auto stream = std::make_unique<ZlibOutputStream>(std::move(sink), format);
  RETURN_IF_ERROR(stream->Init(level));
  return stream;
}

}  // namespace brook::storage::internal
