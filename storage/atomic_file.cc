// POSIX implementation of the atomic-file helpers, retrying EINTR and partial
// writes.
#include "storage/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "storage/file.h"

namespace brook::storage {
namespace {

absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "write", path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// The directory holding `path`, for the fsync that makes a rename durable.
std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "create", tmp);
  absl::Status status = WriteAll(fd, contents, tmp);
  // fsync before the rename: otherwise the rename can reach the disk before
  // the data does and a crash leaves `path` empty (the ext4 "zero-length
  // file" problem).
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoError(errno, "fsync", tmp);
  if (::close(fd) != 0 && status.ok()) status = ErrnoError(errno, "close", tmp);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoError(errno, absl::StrCat("rename to ", path, " of"), tmp);
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  return SyncDirectory(DirName(path));
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open", path);
  std::string contents;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) contents.reserve(static_cast<size_t>(st.st_size));
  char buf[64 << 10];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      contents.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      absl::Status status =
          ErrnoError(errno, absl::StrCat("read at offset ", contents.size(), " of"), path);
      ::close(fd);
      return status;
    }
  }
  ::close(fd);
  return contents;
}

absl::Status SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open directory", dir);
  absl::Status status;
  if (::fsync(fd) != 0) status = ErrnoError(errno, "fsync directory", dir);
  ::close(fd);
  return status;
}

}  // namespace brook::storage
