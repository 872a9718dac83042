// The versions of one served model: `--model PATH` is an export (a
// directory with manifest.json) or a parent of exports (TF Serving's
// MODEL/<version>/ layout, or a chief's export.dir/<job id>/). The newest
// complete export is served; a poll finds newer ones, loads each beside the
// one serving and swaps it in, so a request never waits for a load or
// fails for a swap; the old version is released when its last request is
// done.
//
// A version's number is its directory name when that is a positive integer
// (TF Serving's layout), else the export's creation time in unix seconds:
// newer exports get larger numbers either way. "Newest" is the largest
// number. A directory without manifest.json is an export still being
// written and is skipped until it is complete; one that fails to load is
// reported (status, metrics, log) and not retried until a file in it
// changes (a copy still going, a part replaced).
//
//   ASSIGN_OR_RETURN(auto repo, ModelRepository::Open({.path = dir}));
//   std::shared_ptr<const Servable> s = repo->Current();   // never null
//   repo->Poll();  // or StartPolling(2s)
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "serving/servable.h"
#include "serving/stop_signal.h"

namespace brook::serving {

struct ModelRepositoryOptions {
  std::string path;          // an export, or a directory of exports
  ServableOptions servable;  // data_dir: a version's tier goes in data_dir/v<N>
  // Called after a version is swapped in (or fails to load) from the
  // polling thread; for logs. May be empty.
  std::function<void(const std::string& line)> log;
};

// One version as TF Serving's GET /v1/models/NAME reports it.
struct VersionStatus {
  int64_t version = 0;
  std::string dir;
  std::string state;       // "AVAILABLE", "END" (unloaded, a newer one serves)
  std::string error;       // a failed load's message ("" if it loaded)
  std::string error_code;  // its code, e.g. "DATA_LOSS" ("OK" if it loaded)
};

struct RepositoryStats {
  int64_t version = 0;  // serving now
  uint64_t loads = 0;   // versions loaded, the first included
  uint64_t load_failures = 0;
  double loaded_unix_seconds = 0;  // when the serving version was swapped in
  int64_t export_created_unix_micros = 0;
};

class ModelRepository {
 public:
  // NOT_FOUND naming --model when `path` is no directory: what Open checks
  // first, cheaply, before anything else is set up.
  static absl::Status CheckPath(const std::string& path);
  // Loads the newest version. NOT_FOUND when `path` does not exist or holds
  // no complete export; a load's error (naming the file) when the newest
  // fails and no other loads either.
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Open(ModelRepositoryOptions options);
  ~ModelRepository();  // stops polling

  std::shared_ptr<const Servable> Current() const;
  // Looks for a newer version once; loads and swaps it in. OK when nothing
  // changed; the load's error when the newest failed (the old one serves).
  absl::Status Poll();
  // Poll() every `interval` on a thread of its own until destroyed.
  void StartPolling(absl::Duration interval);
  // Called with every newly loaded servable before it is swapped in (on the
  // loading thread): a follower brings its weights up to the PS's first, so
  // a new version never serves older weights than the one it replaces. An
  // error is logged and the version swapped in with its exported weights.
  void SetBeforeSwap(std::function<absl::Status(const std::shared_ptr<const Servable>&)> fn);
  // Ends StartPolling's thread (a poll in progress finishes).
  void StopPolling();

  std::vector<VersionStatus> Versions() const;
  RepositoryStats Stats() const;

 private:
  explicit ModelRepository(ModelRepositoryOptions options) : options_(std::move(options)) {}
  struct Candidate {
    int64_t version = 0;
    std::string dir;
    std::string manifest_stamp;  // size and mtime of manifest.json
  };
  // The complete exports under path_, by version.
  std::vector<Candidate> Scan() const;
  absl::Status LoadAndSwap(const Candidate& c);

  const ModelRepositoryOptions options_;
  mutable std::mutex mu_;
  std::shared_ptr<const Servable> current_;
  std::map<int64_t, VersionStatus> versions_;
  std::map<std::string, std::string> failed_;  // dir -> TreeStamp
  RepositoryStats stats_;
  std::function<absl::Status(const std::shared_ptr<const Servable>&)> before_swap_;
  std::mutex poll_mu_;  // one Poll at a time
  StopSignal stop_;
  std::thread poller_;
};

}  // namespace brook::serving
