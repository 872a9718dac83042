// GZIP and ZLIB streams over InputStream/OutputStream, in the formats
// TensorFlow's ZlibInputStream/ZlibOutputStream use for TFRecord files:
// GZIP is deflate with a gzip header and trailer (windowBits 16+15), ZLIB is
// deflate with a zlib header (windowBits 15). Each requires external
// synchronization.
//
// Decompression errors are DATA_LOSS naming the stream and the compressed byte
// offset. A stream that ends before the compressed data does is an error, never
// a short read.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "storage/file.h"

namespace brook::storage::internal {

enum class ZlibFormat { kGzip, kZlib };

// "GZIP" or "ZLIB", for messages.
const char* ZlibFormatName(ZlibFormat format);

// Inflates `source`. For GZIP, concatenated members (`cat a.gz b.gz`) read as
// one stream, as gzip(1) and TensorFlow do. A source with no bytes at all
// reads as an empty stream. Memory: `input_buffer_bytes` plus zlib's 32 KiB
// window. INVALID_ARGUMENT if input_buffer_bytes is 0.
absl::StatusOr<std::unique_ptr<InputStream>> NewZlibInputStream(std::unique_ptr<InputStream> source,
                                                                ZlibFormat format,
                                                                size_t input_buffer_bytes = 256
                                                                                            << 10);

// Deflates into `sink` at `level` (-1 = zlib's default, 0..9).
// INVALID_ARGUMENT for another level. Close() finishes the compressed stream
// and closes the sink.
absl::StatusOr<std::unique_ptr<OutputStream>> NewZlibOutputStream(
    std::unique_ptr<OutputStream> sink, ZlibFormat format, int level);

}  // namespace brook::storage::internal
