// A small tmpfs mounted for one test: a filesystem that really runs out of
// space (ENOSPC), for disk-full tests. Mounting needs root (CAP_SYS_ADMIN);
// where it is refused, Mount says why and the test skips saying so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace brook::testing {

class ScopedTmpfs {
 public:
  // Mounts a tmpfs of `bytes` at `path` (created if missing). nullptr with
  // *why set when the mount is refused.
  static std::unique_ptr<ScopedTmpfs> Mount(const std::string& path, uint64_t bytes,
                                            std::string* why);
  // Unmounts (lazily, so a process still holding files cannot block it).
  ~ScopedTmpfs();
  ScopedTmpfs(const ScopedTmpfs&) = delete;
  ScopedTmpfs& operator=(const ScopedTmpfs&) = delete;

  // Grows or shrinks the filesystem in place (files stay): "space returns".
  bool Resize(uint64_t bytes, std::string* why);
  const std::string& path() const { return path_; }

 private:
  explicit ScopedTmpfs(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace brook::testing
