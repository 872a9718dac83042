// ChiefStateStore: the chief's job queue persisted in RocksDB under
// `--state-dir`, so that a restarted chief resumes every job where it was
// (spec, state, leases, checkpoints, metrics, event log).
//
// Layout: column family "chief" of storage::RocksDb (uint64 keys). Key 0 is
// a ChiefQueueMeta (next seq, seq -> job id of every job); key N is the
// ChiefJobRecord of the job with seq N. Values are framed as a 4-byte
// little-endian payload length, the serialized proto, then zero padding:
// the wrapper writes one atomic WriteBatch of equal-sized values, and every
// Save is one such batch (the changed jobs and the meta), so a crash leaves
// the state before or after a Save, never a mix (a trainer reassigned from
// a cancelled job to the next one is never seen in both). RocksDB's WAL is
// on: a Save survives a process crash once it returns.
//
// Thread-compatible: requires external synchronization (the chief holds its
// mutex around the queue and the store together).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/core/job_queue.h"

namespace brook::storage {
class RocksDb;
}  // namespace brook::storage

namespace brook::chief {

class ChiefStateStore {
 public:
  // Opens (creating if missing) the store in `dir`. Errors name the path.
  static absl::StatusOr<std::unique_ptr<ChiefStateStore>> Open(const std::string& dir);
  ~ChiefStateStore();
  ChiefStateStore(const ChiefStateStore&) = delete;
  ChiefStateStore& operator=(const ChiefStateStore&) = delete;

  // The stored queue (empty for a new store), rebuilt with JobQueue::Restore
  // at `now`. DATA_LOSS naming the job for a record that does not parse or is
  // not self-consistent, or a job the meta lists but the store lacks.
  absl::StatusOr<std::unique_ptr<JobQueue>> Load(const JobQueueOptions& options, absl::Time now);

  // Writes every job of `queue` changed since the last Save or Load (by
  // JobQueue::Version), and the meta, in one atomic batch. A no-op when
  // nothing changed. On error nothing is marked saved (the next Save retries).
  absl::Status Save(const JobQueue& queue);

  const std::string& dir() const { return dir_; }

 private:
  ChiefStateStore(std::string dir, std::unique_ptr<storage::RocksDb> db);

  const std::string dir_;
  std::unique_ptr<storage::RocksDb> db_;
  std::map<uint64_t, uint64_t> saved_versions_;  // seq -> version last written
  uint64_t saved_next_seq_ = 0;
};

}  // namespace brook::chief
