// Brook's version and the commit it was built from. They appear in
// `brook --version`, in every manifest Brook writes and in the `_info` metrics.
#pragma once

#include <string>

namespace brook {

const char* Version();
const char* GitCommit();
// "brook 0.1.0 (commit abcdef123456)"
std::string VersionLine();

}  // namespace brook
