// Compression names and the TFRecord writer. The reader is tfrecord_reader.cc.
#include "storage/tfrecord.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/crc32c.h"
#include "storage/internal/record_framing.h"
#include "storage/internal/zlib_stream.h"

namespace brook::storage {

namespace {
// Debian's abseil is built with its own string_view type, not std's.
absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }
}  // namespace

absl::StatusOr<Compression> ParseCompression(std::string_view name) {
  std::string upper = absl::AsciiStrToUpper(AbslView(name));
  if (upper.empty() || upper == "NONE") return Compression::kNone;
  if (upper == "GZIP") return Compression::kGzip;
  if (upper == "ZLIB") return Compression::kZlib;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown compression \"", AbslView(name), "\": expected NONE, GZIP or ZLIB"));
}

std::string_view CompressionName(Compression c) {
  switch (c) {
    case Compression::kNone:
      return "NONE";
    case Compression::kGzip:
      return "GZIP";
    case Compression::kZlib:
      return "ZLIB";
  }
  return "UNKNOWN";
}

Compression CompressionFromPath(std::string_view std_path) {
  absl::string_view path = AbslView(std_path);
  if (absl::EndsWithIgnoreCase(path, ".gz") || absl::EndsWithIgnoreCase(path, ".gzip")) {
    return Compression::kGzip;
  }
  if (absl::EndsWithIgnoreCase(path, ".zlib") || absl::EndsWithIgnoreCase(path, ".zz")) {
    return Compression::kZlib;
  }
  return Compression::kNone;
}

namespace {

absl::Status ValidateWriterOptions(const TFRecordWriterOptions& options) {
  if (options.compression_level < -1 || options.compression_level > 9) {
    return absl::InvalidArgumentError(
        absl::StrCat("TFRecord compression_level ", options.compression_level, " is not in -1..9"));
  }
  return absl::OkStatus();
}

class TFRecordWriterImpl final : public TFRecordWriter {
 public:
  explicit TFRecordWriterImpl(std::unique_ptr<OutputStream> out) : out_(std::move(out)) {}

  absl::Status Write(std::string_view record) override {
    if (closed_) {
      return absl::FailedPreconditionError(absl::StrCat("write to closed ", out_->name()));
    }
    if (!error_.ok()) return error_;
    char header[internal::kHeaderBytes];
    internal::EncodeHeader(header, record.size());
    char footer[internal::kFooterBytes];
    internal::EncodeFixed32(footer, crc32c::Mask(crc32c::Value(record)));
    error_ = out_->Append(std::string_view(header, sizeof(header)));
    if (error_.ok()) error_ = out_->Append(record);
    if (error_.ok()) error_ = out_->Append(std::string_view(footer, sizeof(footer)));
    // After a failed append the file holds part of a frame: refuse further
    // writes rather than append frames behind a torn one.
    if (!error_.ok()) return error_;
    ++records_written_;
    return absl::OkStatus();
  }

  absl::Status Close() override {
    if (closed_) {
      return absl::FailedPreconditionError(absl::StrCat("close of closed ", out_->name()));
    }
    closed_ = true;
    absl::Status close_status = out_->Close();
    return error_.ok() ? close_status : error_;
  }

  uint64_t records_written() const override { return records_written_; }

 private:
  const std::unique_ptr<OutputStream> out_;
  uint64_t records_written_ = 0;
  bool closed_ = false;
  absl::Status error_;  // sticky
};

}  // namespace

absl::StatusOr<std::unique_ptr<TFRecordWriter>> TFRecordWriter::Open(
    const std::string& path, const TFRecordWriterOptions& options) {
  // Check options before the file is created (or truncated).
  RETURN_IF_ERROR(ValidateWriterOptions(options));
  ASSIGN_OR_RETURN(std::unique_ptr<OutputStream> stream, OpenLocalOutput(path));
  return Open(std::move(stream), options);
}

absl::StatusOr<std::unique_ptr<TFRecordWriter>> TFRecordWriter::Open(
    std::unique_ptr<OutputStream> stream, const TFRecordWriterOptions& options) {
  if (stream == nullptr) return absl::InvalidArgumentError("TFRecord writer needs a stream");
  RETURN_IF_ERROR(ValidateWriterOptions(options));
  switch (options.compression) {
    case Compression::kNone:
      break;
    case Compression::kGzip:
    case Compression::kZlib: {
      auto format = options.compression == Compression::kGzip ? internal::ZlibFormat::kGzip
                                                              : internal::ZlibFormat::kZlib;
      ASSIGN_OR_RETURN(stream, internal::NewZlibOutputStream(std::move(stream), format,
                                                             options.compression_level));
      break;
    }
  }
  return std::make_unique<TFRecordWriterImpl>(std::move(stream));
}

absl::StatusOr<uint64_t> CountTFRecords(const std::string& path, Compression compression) {
  TFRecordReaderOptions o;
  o.compression = compression;
  o.verify_data_crc = false;
  absl::StatusOr<std::unique_ptr<TFRecordReader>> reader = TFRecordReader::Open(path, o);
  if (!reader.ok()) return reader.status();
  std::string_view record;
  for (;;) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) return more.status();
    if (!*more) return (*reader)->record_index();
  }
}

}  // namespace brook::storage
