// TFRecord files as TensorFlow's TFRecordWriter writes them:
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes)
//   | data[length] | uint32 masked_crc32c(data)
// optionally wrapped whole in a GZIP or ZLIB stream (TFRecordOptions).
//
// Reader and writer each require external synchronization.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/file.h"

namespace brook::storage {

enum class Compression { kNone, kGzip, kZlib };

// "", "NONE" -> kNone; "GZIP"; "ZLIB" (case-insensitive), as TF's
// TFRecordOptions compression_type strings. INVALID_ARGUMENT otherwise.
absl::StatusOr<Compression> ParseCompression(std::string_view name);
std::string_view CompressionName(Compression c);
// Guesses from the file name: ".gz"/".gzip" -> GZIP, ".zlib"/".zz" -> ZLIB.
Compression CompressionFromPath(std::string_view path);

// Records in a TFRecord file, counted by their frames (length CRCs checked,
// data CRCs not: counting is for planning, readers verify what they read).
// DATA_LOSS naming the file and offset for broken framing.
absl::StatusOr<uint64_t> CountTFRecords(const std::string& path, Compression compression);

struct TFRecordReaderOptions {
  Compression compression = Compression::kNone;
  // A length field above this is treated as corruption before any allocation,
  // so a flipped high bit cannot ask for exabytes. 256 MiB is far above any
  // sane tf.train.Example and far below this machine's memory.
  uint64_t max_record_bytes = 256ull << 20;
  // false: the first corrupt frame is an error naming file and offset.
  // true: scan forward byte by byte for the next frame whose length CRC and
  // data CRC both verify, count what was skipped (stats()), and go on.
  bool skip_corrupt = false;
  // Size of the read buffer over the (decompressed) stream. Memory use is
  // constant: this buffer + the largest record + zlib's window.
  size_t buffer_bytes = 256 << 10;
  // Verify the data CRC of each record (the length CRC is always checked).
  bool verify_data_crc = true;
  // Uncompressed local files are memory-mapped and records returned as views
  // into the mapping (no copy). Off: read(2) into the buffer. Turn it off for
  // files that another process may truncate while they are read.
  bool use_mmap = true;
};

struct TFRecordReaderStats {
  uint64_t records = 0;          // records returned
  uint64_t bytes = 0;            // framed bytes consumed, incl. skipped
  uint64_t skipped_regions = 0;  // corrupt regions skipped (skip_corrupt)
  uint64_t skipped_bytes = 0;    // bytes inside those regions
};

class TFRecordReader {
 public:
  static absl::StatusOr<std::unique_ptr<TFRecordReader>> Open(const std::string& path,
                                                              const TFRecordReaderOptions& options);
  static absl::StatusOr<std::unique_ptr<TFRecordReader>> Open(std::unique_ptr<InputStream> stream,
                                                              const TFRecordReaderOptions& options);
  virtual ~TFRecordReader() = default;

  // Reads the next record. Returns true and sets *record (valid until the next
  // call) or false at a clean end of file. A corrupt or truncated frame is
  // DATA_LOSS naming the file and the byte offset of the frame (in the
  // decompressed stream, as TensorFlow reports it), unless skip_corrupt.
  virtual absl::StatusOr<bool> Next(std::string_view* record) = 0;

  // Byte offset (decompressed stream) where the next frame starts.
  virtual uint64_t offset() const = 0;
  // Index of the next record to be returned (0-based; skipped regions do not
  // count as records).
  virtual uint64_t record_index() const = 0;
  virtual const TFRecordReaderStats& stats() const = 0;
  virtual const std::string& name() const = 0;
};

struct TFRecordWriterOptions {
  Compression compression = Compression::kNone;
  int compression_level = 6;  // zlib's default: the ratio/speed knee
};

class TFRecordWriter {
 public:
  static absl::StatusOr<std::unique_ptr<TFRecordWriter>> Open(const std::string& path,
                                                              const TFRecordWriterOptions& options);
  static absl::StatusOr<std::unique_ptr<TFRecordWriter>> Open(std::unique_ptr<OutputStream> stream,
                                                              const TFRecordWriterOptions& options);
  virtual ~TFRecordWriter() = default;

  virtual absl::Status Write(std::string_view record) = 0;
  // Finishes the compressed stream and closes the file. Must be called; a
  // writer destroyed without Close() leaves a file that may be truncated.
  virtual absl::Status Close() = 0;
  virtual uint64_t records_written() const = 0;
};

}  // namespace brook::storage
