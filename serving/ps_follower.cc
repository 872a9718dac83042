#include "serving/ps_follower.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "ps/client/prefixed_ps_client.h"

namespace brook::serving {

namespace {

// Rows pulled per PullBatch of a delta sync.
constexpr size_t kPullChunk = 8192;

}  // namespace

absl::StatusOr<std::unique_ptr<PsFollower>> PsFollower::Start(const PsFollowerOptions& options,
                                                              ModelRepository* repo,
                                                              ps::PsClient* ps) {
  if (options.interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--sync-seconds must be positive");
  }
  std::unique_ptr<PsFollower> f(new PsFollower(options, repo, ps));
  f->thread_ = std::thread([p = f.get()] {
    do {
      p->SyncOnce().IgnoreError();  // counted and logged in SyncOnce
    } while (!p->stop_.WaitFor(p->options_.interval));
  });
  return f;
}

PsFollower::~PsFollower() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

absl::Status PsFollower::SyncOnce() { return SyncInto(repo_->Current()); }

absl::Status PsFollower::SyncInto(const std::shared_ptr<const Servable>& servable) {
  const absl::Time start = absl::Now();
  bool full = false;
  uint64_t rows_before = 0, dropped_before = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rows_before = stats_.rows;
    dropped_before = stats_.rows_dropped;
  }
  absl::Status s = Sync(servable, &full);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::string line;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (s.ok()) {
      ++(full ? stats_.full_syncs : stats_.delta_syncs);
      stats_.synced_unix_seconds = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
      stats_.last_sync_seconds = seconds;
      stats_.last_error.clear();
      if (full) {
        line = absl::StrCat("full sync from the PS: ", stats_.rows - rows_before, " rows in ",
                            absl::StrFormat("%.2f", seconds), " s (version ", servable->version(),
                            ")");
        if (stats_.rows_dropped > dropped_before) {
          absl::StrAppend(&line, "; ", stats_.rows_dropped - dropped_before,
                          " rows the PS no longer holds dropped");
        }
      }
    } else {
      ++stats_.failures;
      // Logged when it changes, not every interval of an outage.
      if (stats_.last_error != s.message()) {
        line = absl::StrCat("sync from the PS failed (serving the weights it has): ", s.ToString());
      }
      stats_.last_error = std::string(s.message());
    }
  }
  if (!line.empty() && options_.log) options_.log(line);
  return s;
}

absl::Status PsFollower::Sync(const std::shared_ptr<const Servable>& servable, bool* full) {
  std::lock_guard<std::mutex> lock(sync_mu_);
  // The export's own tables (its manifest's prefix: "" for a standalone
  // trainer's), or another job's.
  const std::string prefix =
      options_.job.empty() ? servable->loaded().manifest.table_prefix : options_.job + "/";
  ps::PrefixedPsClient job_ps(ps_, prefix);
  // A new version: start over (a weak_ptr: a freed version's address may be
  // reused by the next one).
  if (synced_servable_.lock() != servable) cursor_ = {};
  ASSIGN_OR_RETURN(ps::ChangeSet changes,
                   job_ps.ChangesSince("", cursor_, options_.max_keys_per_call));
  uint64_t rows = 0, dropped = 0;
  if (changes.full_sync_needed) {
    *full = true;
    RETURN_IF_ERROR(FullSync(*servable, &job_ps, &rows, &dropped));
  } else {
    // A dropped table logs no change: without this a deleted job would
    // look like one that stopped training.
    RETURN_IF_ERROR(CheckTablesExist(*servable, prefix));
    // Only the model's own tables: a job may hold others on the PS.
    for (const auto& [table, keys] : changes.tables) {
      const trainer::TableSpec* spec = servable->FindTable(table);
      if (spec == nullptr) continue;
      const size_t dim = static_cast<size_t>(spec->dim);
      std::vector<float> weights;
      for (size_t at = 0; at < keys.size(); at += kPullChunk) {
        const size_t n = std::min(kPullChunk, keys.size() - at);
        const absl::Span<const uint64_t> part(keys.data() + at, n);
        weights.resize(n * dim);
        RETURN_IF_ERROR(job_ps.Pull(table, part, absl::MakeSpan(weights)));
        RETURN_IF_ERROR(servable->AssignRows(table, part, weights));
        rows += n;
      }
    }
    bool dense_changed = false;
    for (const std::string& name : changes.dense) {
      if (servable->DenseSize(name) < 0) continue;
      std::vector<float> values(static_cast<size_t>(servable->DenseSize(name)));
      RETURN_IF_ERROR(job_ps.PullDense(name, absl::MakeSpan(values)));
      RETURN_IF_ERROR(servable->AssignDense(name, values));
      dense_changed = true;
    }
    if (dense_changed) RETURN_IF_ERROR(servable->RefreshDense());
  }
  cursor_ = std::move(changes.cursor);
  synced_servable_ = servable;
  std::lock_guard<std::mutex> stats_lock(mu_);
  stats_.rows += rows;
  stats_.rows_dropped += dropped;
  return absl::OkStatus();
}

absl::Status PsFollower::CheckTablesExist(const Servable& servable, const std::string& prefix) {
  ASSIGN_OR_RETURN(std::vector<ps::ServerStats> servers, ps_->Stats());
  absl::flat_hash_set<std::string> on_ps;
  for (const ps::ServerStats& server : servers) {
    for (const ps::TableStats& t : server.tables) on_ps.insert(t.name);
  }
  for (const trainer::TableSpec& t : servable.Tables()) {
    const std::string name = prefix + t.name;
    if (!on_ps.contains(name)) {
      return absl::NotFoundError(
          absl::StrCat("table \"", name,
                       "\" is no longer on the PS (its job deleted?); serving the weights "
                       "of the last sync"));
    }
  }
  return absl::OkStatus();
}

absl::Status PsFollower::FullSync(const Servable& servable, ps::PsClient* job_ps, uint64_t* rows,
                                  uint64_t* dropped) {
  for (const trainer::TableSpec& t : servable.Tables()) {
    // The keys the PS holds: the copy's others (from the export, or from an
    // earlier sync of rows the PS has since evicted or lost in a restart)
    // are dropped, so that they read their initial values as on the PS.
    absl::flat_hash_set<uint64_t> on_ps;
    RETURN_IF_ERROR(job_ps->ScanRows(
        t.name,
        [&](absl::Span<const uint64_t> keys, absl::Span<const float> weights) -> absl::Status {
          RETURN_IF_ERROR(servable.AssignRows(t.name, keys, weights));
          on_ps.insert(keys.begin(), keys.end());
          *rows += keys.size();
          return absl::OkStatus();
        }));
    std::vector<uint64_t> gone;
    RETURN_IF_ERROR(servable.weights()->ScanRows(
        t.name, [&](absl::Span<const uint64_t> keys, absl::Span<const float>) -> absl::Status {
          for (uint64_t k : keys) {
            if (!on_ps.contains(k)) gone.push_back(k);
          }
          return absl::OkStatus();
        }));
    for (size_t at = 0; at < gone.size(); at += kPullChunk) {
      const size_t n = std::min(kPullChunk, gone.size() - at);
      RETURN_IF_ERROR(servable.EraseRows(t.name, absl::MakeConstSpan(gone.data() + at, n)));
    }
    *dropped += gone.size();
  }
  // Where the dense variables live (placement only: nothing is created or
  // checked on the training cluster, whose tables may have other options).
  RETURN_IF_ERROR(servable.LocateDenseOn(job_ps));
  for (const auto& [name, size] : servable.DenseSizes()) {
    std::vector<float> values(static_cast<size_t>(size));
    RETURN_IF_ERROR(job_ps->PullDense(name, absl::MakeSpan(values)));
    RETURN_IF_ERROR(servable.AssignDense(name, values));
  }
  return servable.RefreshDense();
}

FollowerStats PsFollower::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace brook::serving
