// An exclusive lock on a directory for this process's lifetime (flock on
// <dir>/LOCK), so two processes never work in one data dir: a second
// `brook ps --data-dir D` would otherwise open the same RocksDB files and
// WAL and replace what the first one is writing.
//
// The lock goes with the process: a kill -9 releases it, so a restart
// never finds a stale lock. The holder's pid is written into LOCK for the
// error message.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace brook::storage {

class DirLock {
 public:
  // FAILED_PRECONDITION naming the dir (and the holder's pid, when known)
  // if another open lock holds it; the errno's status if LOCK cannot be
  // created.
  static absl::StatusOr<std::unique_ptr<DirLock>> Acquire(const std::string& dir);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace brook::storage
