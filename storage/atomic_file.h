// Small whole-file helpers for metadata that must never be seen half written
// (checkpoint manifests, the WAL's companions): a crash leaves either the old
// contents or the new, never a mix or an empty file.
//
// The functions are thread-compatible: concurrent calls on different paths
// are safe; two writers of the same path at once are not (they share
// `path.tmp`).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace brook::storage {

// Writes `contents` to `path` so that a crash leaves either the old file or
// the new one: write `path.tmp`, fsync it, rename it over `path`, fsync the
// directory (without that last step the rename itself may not survive power
// loss). A stale `path.tmp` from an earlier crash is overwritten. On failure
// `path` is untouched and `path.tmp` is removed (best effort).
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

// The whole file. NOT_FOUND if it does not exist; errors name the path.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// fsyncs a directory so that entries created, renamed or removed in it are
// durable. NOT_FOUND if it does not exist.
absl::Status SyncDirectory(const std::string& dir);

}  // namespace brook::storage
