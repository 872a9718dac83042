// Fresh weights for a served model (`brook serve --follow-ps ADDRS --job ID`):
// every `interval`, the rows and dense variables that changed on the PS
// nodes training the job since the last sync are pulled and written into
// the serving version's in-process PS, so a model being trained continuously
// is served minutes old instead of as old as its export.
//
// A sync asks each PS shard for the keys its pushes changed since the
// follower's cursor (PsClient::ChangesSince, the PS's bounded change log),
// pulls those rows and the changed dense variables, and writes them. When a
// shard cannot answer from its log (the first sync of a version, a PS that
// restarted, or a follower that fell further behind than the log holds),
// it copies every row of the job's tables instead (PsClient::ScanRows): a
// full sync. The cursor is taken before the copy, so nothing pushed during
// it is missed. A new version swapped in starts over with a full sync.
//
// A failed sync (PS unreachable, job's tables gone) is counted and logged;
// the model keeps serving what it has and the next interval tries again.
// Staleness (brook_serve_staleness_seconds) is the time since the last sync
// that completed.
//
// Thread-safe; one sync at a time on its own thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ps/client/ps_client.h"
#include "serving/model_repository.h"
#include "serving/stop_signal.h"

namespace brook::serving {

struct FollowerStats {
  uint64_t delta_syncs = 0;
  uint64_t full_syncs = 0;
  uint64_t failures = 0;
  uint64_t rows = 0;               // rows written, every sync
  uint64_t rows_dropped = 0;       // rows a full sync removed (no longer on the PS)
  double synced_unix_seconds = 0;  // when the last sync completed (0: none yet)
  double last_sync_seconds = 0;    // how long it took
  std::string last_error;
};

struct PsFollowerOptions {
  // The job whose tables to follow ("" = the serving export's own tables,
  // under its manifest's table prefix).
  std::string job;
  absl::Duration interval = absl::Seconds(10);
  // Keys asked per shard and call of the change log.
  uint64_t max_keys_per_call = 1 << 18;
  std::function<void(const std::string& line)> log;
};

class PsFollower {
 public:
  // `ps` is the training cluster's client (not owned; outlives this).
  // Starts the sync thread; the first sync runs at once.
  static absl::StatusOr<std::unique_ptr<PsFollower>> Start(const PsFollowerOptions& options,
                                                           ModelRepository* repo, ps::PsClient* ps);
  ~PsFollower();

  // One sync now, on the calling thread (tests; the thread does the same).
  absl::Status SyncOnce();
  // The same into `servable` (a version about to be swapped in: the
  // repository's before-swap hook); a full copy, since it is new.
  absl::Status SyncInto(const std::shared_ptr<const Servable>& servable);
  FollowerStats Stats() const;

 private:
  PsFollower(PsFollowerOptions options, ModelRepository* repo, ps::PsClient* ps)
      : options_(std::move(options)), repo_(repo), ps_(ps) {}
  absl::Status Sync(const std::shared_ptr<const Servable>& servable, bool* full);
  // NOT_FOUND naming the first of the model's tables no PS holds.
  absl::Status CheckTablesExist(const Servable& servable, const std::string& prefix);
  absl::Status FullSync(const Servable& servable, ps::PsClient* job_ps, uint64_t* rows,
                        uint64_t* dropped);

  const PsFollowerOptions options_;
  ModelRepository* const repo_;
  ps::PsClient* const ps_;
  std::mutex sync_mu_;  // one sync at a time
  std::weak_ptr<const Servable> synced_servable_;
  ps::ChangeCursor cursor_;
  mutable std::mutex mu_;
  FollowerStats stats_;
  StopSignal stop_;
  std::thread thread_;
};

}  // namespace brook::serving
