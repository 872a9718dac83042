// Local-file streams: POSIX read/write, retried on EINTR and partial writes.
#include "storage/file.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace brook::storage {
namespace {

// Output is gathered into this much memory before a write(2): a TFRecord frame
// arrives as three small Append calls, and a syscall each would dominate.
constexpr size_t kOutputBufferBytes = 256 << 10;

absl::Status ErrnoError(int error_number, absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(error_number, absl::StrCat(what, " ", path));
}

class LocalInputStream final : public InputStream {
 public:
  LocalInputStream(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~LocalInputStream() override { ::close(fd_); }
  LocalInputStream(const LocalInputStream&) = delete;
  LocalInputStream& operator=(const LocalInputStream&) = delete;

  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    while (true) {
      ssize_t got = ::read(fd_, buf, n);
      if (got >= 0) {
        offset_ += static_cast<uint64_t>(got);
        return static_cast<size_t>(got);
      }
      if (errno == EINTR) continue;
      return ErrnoError(errno, absl::StrCat("read at offset ", offset_, " of"), path_);
    }
  }

  const std::string& name() const override { return path_; }

 private:
  const std::string path_;
  const int fd_;
  uint64_t offset_ = 0;  // bytes read so far, for error messages
};

class LocalOutputStream final : public OutputStream {
 public:
  LocalOutputStream(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
    buffer_.reserve(kOutputBufferBytes);
  }
  ~LocalOutputStream() override {
    if (fd_ >= 0) {
      // The contract asks for Close(); a best-effort flush keeps what was
      // appended, and there is nobody left to report a failure to.
      Flush().IgnoreError();
      ::close(fd_);
    }
  }
  LocalOutputStream(const LocalOutputStream&) = delete;
  LocalOutputStream& operator=(const LocalOutputStream&) = delete;

  absl::Status Append(std::string_view data) override {
    if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat("append to closed ", path_));
    if (buffer_.size() + data.size() > kOutputBufferBytes) {
      RETURN_IF_ERROR(Flush());
      // A large piece goes straight to the file instead of through the buffer.
      if (data.size() >= kOutputBufferBytes) return WriteAll(data);
    }
    buffer_.append(data);
    return absl::OkStatus();
  }

  absl::Status Close() override {
    if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat("close of closed ", path_));
    absl::Status status = Flush();
    if (::close(fd_) != 0 && status.ok()) status = ErrnoError(errno, "close", path_);
    fd_ = -1;
    return status;
  }

  const std::string& name() const override { return path_; }

 private:
  absl::Status Flush() {
    absl::Status status = WriteAll(buffer_);
    buffer_.clear();
    return status;
  }

  absl::Status WriteAll(std::string_view data) {
    while (!data.empty()) {
      ssize_t wrote = ::write(fd_, data.data(), data.size());
      if (wrote < 0) {
        if (errno == EINTR) continue;
        return ErrnoError(errno, absl::StrCat("write at offset ", offset_, " of"), path_);
      }
      offset_ += static_cast<uint64_t>(wrote);
      data.remove_prefix(static_cast<size_t>(wrote));
    }
    return absl::OkStatus();
  }

  const std::string path_;
  int fd_;               // -1 once closed
  uint64_t offset_ = 0;  // bytes written to the file so far
  std::string buffer_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<InputStream>> OpenLocalInput(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoError(errno, "open", path);
  return std::make_unique<LocalInputStream>(path, fd);
}

absl::StatusOr<std::unique_ptr<OutputStream>> OpenLocalOutput(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoError(errno, "create", path);
  return std::make_unique<LocalOutputStream>(path, fd);
}

}  // namespace brook::storage
