#include "chief/export/output_dirs.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "chief/export/model_export.h"
#include "common/status_macros.h"

namespace brook::chief {
namespace {

namespace fs = std::filesystem;

// What `dir` is: "an export" (manifest.json beside tables/), "a
// checkpoint" (a shard-I-of-N/ part with its MANIFEST; for `dir` itself
// also a LATEST or MANIFEST file), or "" (neither). Strict for ancestors:
// a stray manifest.json in /tmp must not make everything under it refused.
std::string RunKind(const fs::path& dir, bool self) {
  std::error_code ec;
  if (fs::exists(dir / kExportManifestName, ec) &&
      (self || fs::is_directory(dir / kExportTablesDir, ec))) {
    return "an export";
  }
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (absl::StartsWith(name, "shard-") && absl::StrContains(name, "-of-") &&
        fs::exists(e.path() / "MANIFEST", ec)) {
      return "a checkpoint";
    }
    if (self && (absl::StartsWith(name, "shard-") || name == "LATEST" || name == "MANIFEST")) {
      return "a checkpoint";
    }
  }
  return "";
}

absl::Status CheckOne(const char* field, const std::string& dir) {
  const fs::path path = fs::absolute(fs::path(dir)).lexically_normal();
  for (fs::path p = path; !p.empty(); p = p.parent_path()) {
    const bool self = p == path;
    const std::string kind = RunKind(p, self);
    if (!kind.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(field, ": ", dir,
                       self ? absl::StrCat(" is itself ", kind)
                            : absl::StrCat(" is inside ", kind, ", ", p.string()),
                       "; a job writes DIR/<job id>/ there: give a directory of your own to put ",
                       absl::StrContains(field, "export") ? "exports" : "checkpoints", " in"));
    }
    if (p == p.root_path()) break;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckOutputDirs(const JobSpec& spec, bool create) {
  const std::pair<const char*, std::string> dirs[] = {{"export.dir", spec.export_dir},
                                                      {"checkpoint.dir", spec.checkpoint.dir}};
  if (!spec.export_dir.empty() && !spec.checkpoint.dir.empty()) {
    const fs::path e = fs::absolute(spec.export_dir).lexically_normal();
    const fs::path c = fs::absolute(spec.checkpoint.dir).lexically_normal();
    if (e == c) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint.dir: ", spec.checkpoint.dir,
                       " is export.dir too: the job's final checkpoint and export would share "
                       "DIR/<job id>/; give them different directories"));
    }
  }
  for (const auto& [field, dir] : dirs) {
    if (dir.empty()) continue;
    RETURN_IF_ERROR(CheckOne(field, dir));
    if (!create) continue;
    std::error_code made;
    fs::create_directories(dir, made);
    if (made || !fs::is_directory(dir, made) || ::access(dir.c_str(), W_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(field, ": ", dir, " is not a directory the chief can write",
                       made ? absl::StrCat(" (", made.message(), ")") : std::string()));
    }
  }
  return absl::OkStatus();
}

}  // namespace brook::chief
