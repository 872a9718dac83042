// Flags and arguments that take a local path or glob refuse object store
// URLs at parse time, naming the flag (common/local_path.h):
//   brook trainer: --data: "s3://b/train-*": s3:// URLs are not supported
//   yet: mount the data and give a path
// One table here instead of a check in every command's file.
#pragma once

#include <CLI/CLI.hpp>

namespace brook::cli {

// Adds the check to every path option of `app`'s command tree (exit 2).
void AddLocalPathChecks(CLI::App& app);

}  // namespace brook::cli
