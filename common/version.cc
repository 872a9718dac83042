#include "common/version.h"

#include "common/version_gen.h"

namespace brook {

const char* Version() { return BROOK_VERSION_STRING; }
const char* GitCommit() { return BROOK_GIT_COMMIT_STRING; }
std::string VersionLine() {
  return std::string("brook ") + Version() + " (commit " + GitCommit() + ")";
}

}  // namespace brook
