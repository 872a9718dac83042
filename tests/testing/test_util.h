// Small helpers shared by Brook's tests: temporary directories, running the
// real `brook` binary, and reading files.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/base/config.h"

namespace brook::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;  // -1 if killed by a signal
  std::string output;  // stdout and stderr, interleaved
};

// Runs `argv` (argv[0] a path) with a time limit; stdout+stderr captured.
CommandResult RunCommand(const std::vector<std::string>& argv, int timeout_seconds = 120);

// The `brook` binary under test: $BROOK_BINARY (set by CTest).
std::string BrookBinary();

// True in the ASan / TSan builds, whose binaries (the tests' and the `brook`
// they start) run several times slower: tests that race a clock against
// training size their work by it.
// abseil's config answers for GCC and clang alike.
#if defined(ABSL_HAVE_ADDRESS_SANITIZER) || defined(ABSL_HAVE_THREAD_SANITIZER)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
// Repo root: $BROOK_SOURCE_DIR, or the current directory.
std::string SourceDir();
// ../shared/data relative to the repo root.
std::string SharedDataDir();

// Sets (or, with nullopt, unsets) an environment variable for one scope and
// restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string ReadFileOrDie(const std::string& path);
void WriteFileOrDie(const std::string& path, const std::string& contents);

}  // namespace brook::testing
