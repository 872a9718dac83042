// Byte streams that the TFRecord reader and writer sit on. Local files
// implement them today; an object-store reader implements InputStream later
// without touching the record layer.
//
// A stream requires external synchronization (one thread at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace brook::storage {

// errno as a Status naming what failed and the path ("open /x/y: ...").
absl::Status ErrnoError(int error_number, absl::string_view what, const std::string& path);

class InputStream {
 public:
  virtual ~InputStream() = default;
  // Reads up to `n` bytes into `buf`. Returns the number read; 0 means end of
  // stream. Errors name the stream (e.g. the path) and the byte offset.
  virtual absl::StatusOr<size_t> Read(char* buf, size_t n) = 0;
  // What to call this stream in error messages (a path or a URL).
  virtual const std::string& name() const = 0;

  // Zero-copy access for streams whose bytes already sit in memory (a
  // memory-mapped local file). Returns the whole remaining content, or an
  // empty optional when the stream cannot map (pipes, sockets, empty files,
  // already-read streams); then the caller uses Read(). After a successful
  // call the caller must not call Read().
  virtual std::optional<std::string_view> MapRemaining() { return std::nullopt; }
  // Tells a mapped stream that bytes before `offset` (into the view returned
  // by MapRemaining) will not be touched again, so their pages can leave this
  // process's resident set: memory stays constant whatever the file size.
  virtual void ReleaseMappedPrefix(size_t offset) {}
};

class OutputStream {
 public:
  virtual ~OutputStream() = default;
  virtual absl::Status Append(std::string_view data) = 0;
  // Flushes and closes; data is durable in the page cache (not fsynced unless
  // the implementation says so). Calling Close twice is an error.
  virtual absl::Status Close() = 0;
  virtual const std::string& name() const = 0;
};

// Opens a local file for streaming reads. NOT_FOUND if it does not exist.
absl::StatusOr<std::unique_ptr<InputStream>> OpenLocalInput(const std::string& path);
// Creates (truncates) a local file. Parent directories must exist.
absl::StatusOr<std::unique_ptr<OutputStream>> OpenLocalOutput(const std::string& path);

}  // namespace brook::storage
