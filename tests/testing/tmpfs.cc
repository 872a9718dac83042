#include "tests/testing/tmpfs.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace brook::testing {

std::unique_ptr<ScopedTmpfs> ScopedTmpfs::Mount(const std::string& path, uint64_t bytes,
                                                std::string* why) {
  ::mkdir(path.c_str(), 0755);
  const std::string options = "size=" + std::to_string(bytes) + ",mode=0755";
  if (::mount("tmpfs", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
    *why =
        "mount -t tmpfs at " + path + ": " + std::strerror(errno) + " (needs root / CAP_SYS_ADMIN)";
    return nullptr;
  }
  return std::unique_ptr<ScopedTmpfs>(new ScopedTmpfs(path));
}

ScopedTmpfs::~ScopedTmpfs() { ::umount2(path_.c_str(), MNT_DETACH); }

bool ScopedTmpfs::Resize(uint64_t bytes, std::string* why) {
  const std::string options = "size=" + std::to_string(bytes) + ",mode=0755";
  if (::mount("tmpfs", path_.c_str(), "tmpfs", MS_REMOUNT | MS_NOSUID | MS_NODEV,
              options.c_str()) != 0) {
    *why = "remount " + path_ + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace brook::testing
