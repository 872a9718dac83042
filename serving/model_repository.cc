#include "serving/model_repository.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace brook::serving {

namespace fs = std::filesystem;

namespace {

// Size and mtime of `file`: a rewritten manifest.json gets a new stamp.
std::string Stamp(const fs::path& file) {
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (ec) return "";
  const auto mtime = fs::last_write_time(file, ec);
  if (ec) return "";
  return absl::StrCat(size, "@", mtime.time_since_epoch().count());
}

// Files, bytes and newest mtime under `dir`: an export whose load failed
// is tried again once anything in it changes (a copy that was still going,
// a part replaced), not only its manifest.json.
std::string TreeStamp(const fs::path& dir) {
  uint64_t files = 0, bytes = 0;
  int64_t newest = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e;
    if (!it->is_regular_file(e)) continue;
    ++files;
    bytes += it->file_size(e);
    newest = std::max<int64_t>(newest, it->last_write_time(e).time_since_epoch().count());
  }
  return absl::StrCat(files, "/", bytes, "@", newest);
}

// The version of the export at `dir`: its name when a positive integer,
// else its manifest's creation time in seconds (0 when unreadable: the load
// reports why).
int64_t VersionOf(const fs::path& dir) {
  int64_t n = 0;
  if (absl::SimpleAtoi(dir.filename().string(), &n) && n > 0) return n;
  std::ifstream in(dir / chief::kExportManifestName);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<chief::ExportManifest> m =
      chief::ExportManifest::FromJson(text.str(), (dir / chief::kExportManifestName).string());
  if (!m.ok()) return 0;
  return std::max<int64_t>(1, m->created_unix_micros / 1000000);
}

}  // namespace

absl::Status ModelRepository::CheckPath(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return absl::OkStatus();
  return absl::NotFoundError(
      absl::StrCat("--model ", path,
                   fs::exists(path, ec) ? ": not a directory (give the export directory, the one "
                                          "holding manifest.json, or a directory of them)"
                                        : ": no such directory"));
}

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Open(
    ModelRepositoryOptions options) {
  RETURN_IF_ERROR(CheckPath(options.path));
  std::unique_ptr<ModelRepository> repo(new ModelRepository(std::move(options)));
  std::vector<Candidate> found = repo->Scan();
  if (found.empty()) {
    return absl::NotFoundError(
        absl::StrCat("--model ", repo->options_.path,
                     ": neither a Brook export (no manifest.json) nor a directory of exports "
                     "(no subdirectory holds a manifest.json)"));
  }
  // Newest first; an older one serves if the newest does not load.
  absl::Status first_error;
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    absl::Status s = repo->LoadAndSwap(*it);
    if (s.ok()) return repo;
    if (first_error.ok()) first_error = s;
  }
  return first_error;
}

ModelRepository::~ModelRepository() { StopPolling(); }

std::vector<ModelRepository::Candidate> ModelRepository::Scan() const {
  std::vector<Candidate> out;
  const fs::path root(options_.path);
  auto consider = [&](const fs::path& dir) {
    const std::string stamp = Stamp(dir / chief::kExportManifestName);
    if (stamp.empty()) return;  // incomplete, or not an export
    out.push_back({VersionOf(dir), dir.string(), stamp});
  };
  std::error_code ec;
  if (fs::exists(root / chief::kExportManifestName, ec)) {
    consider(root);
  } else {
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code dir_ec;
      if (it->is_directory(dir_ec)) consider(it->path());
    }
  }
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    return a.version != b.version ? a.version < b.version : a.dir < b.dir;
  });
  return out;
}

absl::Status ModelRepository::LoadAndSwap(const Candidate& c) {
  ServableOptions so = options_.servable;
  if (!so.data_dir.empty())
    so.data_dir = (fs::path(so.data_dir) / absl::StrCat("v", c.version)).string();
  absl::StatusOr<std::unique_ptr<Servable>> loaded = Servable::Load(c.dir, c.version, so);
  std::shared_ptr<const Servable> now;
  if (loaded.ok()) {
    now = std::shared_ptr<const Servable>(std::move(*loaded));
    std::function<absl::Status(const std::shared_ptr<const Servable>&)> before_swap;
    {
      std::lock_guard<std::mutex> lock(mu_);
      before_swap = before_swap_;
    }
    if (before_swap) {
      absl::Status s = before_swap(now);
      if (!s.ok() && options_.log) {
        options_.log(absl::StrCat("version ", c.version, ": ", s.message(),
                                  "; serving it with its exported weights"));
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!loaded.ok()) {
      failed_[c.dir] = TreeStamp(c.dir);
      ++stats_.load_failures;
      versions_[c.version] = {c.version, c.dir, "END", std::string(loaded.status().message()),
                              absl::StatusCodeToString(loaded.status().code())};
    } else {
      if (current_ != nullptr) {
        VersionStatus& old = versions_[current_->version()];
        old.state = "END";
      }
      failed_.erase(c.dir);
      current_ = now;
      versions_[c.version] = {c.version, c.dir, "AVAILABLE", "", "OK"};
      ++stats_.loads;
      stats_.version = c.version;
      stats_.loaded_unix_seconds = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
      stats_.export_created_unix_micros = now->loaded().manifest.created_unix_micros;
    }
  }
  if (!loaded.ok()) {
    if (options_.log) {
      options_.log(absl::StrCat("version ", c.version, " (", c.dir,
                                ") failed to load: ", loaded.status().ToString()));
    }
    return loaded.status();
  }
  if (options_.log) {
    options_.log(absl::StrCat("serving version ", c.version, " (", c.dir, ", job ",
                              now->loaded().manifest.job_id, ", step ", now->loaded().manifest.step,
                              ")"));
  }
  return absl::OkStatus();
}

absl::Status ModelRepository::Poll() {
  std::lock_guard<std::mutex> poll(poll_mu_);
  const std::vector<Candidate> found = Scan();
  // Newest first: the newest that loads and is newer than the serving one.
  // One that failed and has not changed since is passed over, so a mended
  // older version is not stuck behind a broken newer one.
  absl::Status first_error;
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (current_ != nullptr && it->version <= current_->version()) break;
      auto f = failed_.find(it->dir);
      if (f != failed_.end() && f->second == TreeStamp(it->dir)) continue;
    }
    absl::Status s = LoadAndSwap(*it);
    if (s.ok()) return s;
    if (first_error.ok()) first_error = s;
  }
  return first_error;  // OK when nothing newer, or nothing changed
}

void ModelRepository::StartPolling(absl::Duration interval) {
  if (poller_.joinable()) return;
  poller_ = std::thread([this, interval] {
    while (!stop_.WaitFor(interval)) {
      Poll().IgnoreError();  // reported through log and stats
    }
  });
}

void ModelRepository::SetBeforeSwap(
    std::function<absl::Status(const std::shared_ptr<const Servable>&)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  before_swap_ = std::move(fn);
}

void ModelRepository::StopPolling() {
  stop_.Notify();
  if (poller_.joinable()) poller_.join();
}

std::shared_ptr<const Servable> ModelRepository::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

std::vector<VersionStatus> ModelRepository::Versions() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<VersionStatus> out;
  for (const auto& [v, s] : versions_) out.push_back(s);
  return out;
}

RepositoryStats ModelRepository::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace brook::serving
