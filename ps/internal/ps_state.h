// ParameterServer's private state, shared by parameter_server.cc (requests)
// and parameter_server_durability.cc (open, WAL replay, checkpoint,
// restore). Not part of the API.
#pragma once

#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ps/internal/change_log.h"
#include "ps/internal/checkpoint_files.h"
#include "ps/internal/dense_variable.h"
#include "ps/internal/mutex.h"
#include "ps/internal/push_dedup.h"
#include "ps/memory_accountant.h"
#include "ps/parameter_server.h"
#include "ps/table.h"
#include "storage/rocks_db.h"
#include "storage/wal.h"

namespace brook::v1 {
class WalEntry;
}  // namespace brook::v1

namespace brook::ps::internal {

// The checkpoint gate: every request that changes state holds it shared
// while it changes state and logs; a checkpoint or restore holds it
// exclusively, so it sees no half-applied push. A turnstile in front makes
// a waiting checkpoint stop new pushes instead of starving behind them
// (glibc's rwlock prefers readers).
class ABSL_LOCKABLE CheckpointGate {
 public:
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() {
    turnstile_.lock();
    turnstile_.unlock();
    mu_.lock_shared();
  }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    turnstile_.lock();
    mu_.lock();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    mu_.unlock();
    turnstile_.unlock();
  }

 private:
  std::mutex turnstile_;
  std::shared_mutex mu_;
};

class ABSL_SCOPED_LOCKABLE GateReader {
 public:
  explicit GateReader(CheckpointGate* g) ABSL_SHARED_LOCK_FUNCTION(g) : g_(g) { g_->ReaderLock(); }
  ~GateReader() ABSL_UNLOCK_FUNCTION() { g_->ReaderUnlock(); }
  GateReader(const GateReader&) = delete;
  GateReader& operator=(const GateReader&) = delete;

 private:
  CheckpointGate* const g_;
};

class ABSL_SCOPED_LOCKABLE GateWriter {
 public:
  explicit GateWriter(CheckpointGate* g) ABSL_EXCLUSIVE_LOCK_FUNCTION(g) : g_(g) { g_->Lock(); }
  ~GateWriter() ABSL_UNLOCK_FUNCTION() { g_->Unlock(); }
  GateWriter(const GateWriter&) = delete;
  GateWriter& operator=(const GateWriter&) = delete;

 private:
  CheckpointGate* const g_;
};

// RocksDB column family of a table.
inline std::string TableFamily(const std::string& table) { return "table:" + table; }

inline absl::Status TooManyKeys(std::string_view what, std::string_view name, size_t n,
                                uint64_t limit) {
  return absl::ResourceExhaustedError(
      absl::StrCat(absl::string_view(what.data(), what.size()), " '",
                   absl::string_view(name.data(), name.size()), "': request of ", n,
                   " exceeds max_keys_per_request ", limit));
}

// A push from a fenced client (ParameterServer::FenceClients). ABORTED, not
// FAILED_PRECONDITION: the trainer must not retry or report it as a bad job;
// it has lost its lease and registers again.
inline absl::Status FencedError(uint64_t client) {
  return absl::AbortedError(absl::StrCat(
      "push refused: client ", client,
      " is fenced (its trainer's lease expired and its data was re-leased); register with the "
      "chief again"));
}

// Claims part `sequence` of a push under ctx's dedup identity: its stream
// when it has one (the client id then only checked against the fence), else
// its client. REQUIRES ctx.client_id != 0 or ctx.stream_id != 0.
inline PushDedup::Claim BeginPush(PushDedup& dedup, const PushContext& ctx, uint64_t sequence) {
  return ctx.stream_id != 0 ? dedup.BeginStream(ctx.client_id, ctx.stream_id, sequence)
                            : dedup.Begin(ctx.client_id, sequence);
}
inline void EndPush(PushDedup& dedup, const PushContext& ctx, uint64_t sequence, bool applied) {
  if (ctx.stream_id != 0) {
    dedup.EndStream(ctx.stream_id, sequence, applied);
  } else {
    dedup.End(ctx.client_id, sequence, applied);
  }
}

// PushLog over the WAL: one WalEntry per push part.
class WalPushLog final : public PushLog {
 public:
  void set_wal(storage::WalWriter* wal) { wal_ = wal; }
  uint64_t LogPart(const PushPart& part) override;

 private:
  storage::WalWriter* wal_ = nullptr;
};

}  // namespace brook::ps::internal

namespace brook::ps {

// Tables and dense variables are held by shared_ptr because ownership really
// is shared: the registry, and every request in flight (DropTable while a
// pull runs frees the table when that pull ends).
struct ParameterServer::State {
  explicit State(const ParameterServerOptions& o)
      : accountant(o.memory_limit_bytes),
        dedup(std::max<uint32_t>(o.dedup_window, 1)),
        changes(o.change_log_bytes) {}

  // The node-wide memory limit; before `tables`, which borrow it.
  MemoryAccountant accountant;
  internal::PushDedup dedup;
  internal::CheckpointGate gate;
  StartupInfo startup;  // set by the constructor and Open, constant after
  // Which rows and dense variables changed (ParameterServer::ChangesSince).
  internal::ChangeLog changes;

  mutable internal::RwMutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<Table>> tables ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, std::shared_ptr<internal::DenseVariable>> dense
      ABSL_GUARDED_BY(mu);

  // Durability; set by Open() before any request, constant after.
  std::unique_ptr<storage::RocksDb> db;     // null without a data dir
  std::unique_ptr<storage::WalWriter> wal;  // null without a data dir or with wal off
  internal::WalPushLog push_log;
  std::atomic<uint64_t> next_push_id{1};

  // Checkpoints, one at a time.
  mutable std::mutex checkpoint_mu;
  std::vector<CheckpointInfo> checkpoints;  // guarded by checkpoint_mu
  // Bases of the next incrementals (guarded by checkpoint_mu): this PS's
  // restart point (with a data dir), and the copy last written to a given
  // dir with its table prefix. A copy is incremental only over a copy of
  // the same prefix taken with the checkpoint right before it, as both
  // read the same changed-row bookkeeping.
  std::string last_shard_dir;
  std::string last_copy_shard_dir;
  std::string last_copy_prefix;
  bool force_full = true;              // no usable base (start, restore, failure)
  internal::FileHashCache hash_cache;  // guarded by checkpoint_mu

  absl::StatusOr<std::shared_ptr<Table>> FindTable(std::string_view name) const;
  absl::StatusOr<std::shared_ptr<internal::DenseVariable>> FindDense(std::string_view name) const;

  // Appends a WAL entry filled by `fill`; returns its LSN (0 without a WAL).
  // Never blocks on I/O.
  uint64_t Log(absl::FunctionRef<void(v1::WalEntry*)> fill);
  // Log + wait until it is written.
  absl::Status LogAndSync(absl::FunctionRef<void(v1::WalEntry*)> fill);
  // OK unless the WAL's last write failed for want of space and a retry of
  // it fails too: pushes check this before changing anything, so a full disk
  // refuses them instead of piling unlogged updates up in memory.
  absl::Status WalWritable();
  // Before a duplicate push is acknowledged: the first copy's update is in
  // memory, but its record may still wait for space to be written.
  absl::Status WalDurable();

  // Apply a checked push and log it (without waiting for the WAL write);
  // the returned / *lsn position is what to Sync before acknowledging (0
  // without a WAL). REQUIRES: the gate held shared; the (client, sequence)
  // claimed; ctx.learning_rate_scale checked.
  absl::Status ApplyTablePush(Table& t, const PreparedPush& push, const PushContext& ctx,
                              uint64_t* lsn);
  uint64_t ApplyDensePush(internal::DenseVariable& v, std::string_view name,
                          absl::Span<const float> grads, uint64_t nonfinite,
                          const PushContext& ctx);
  // Records a table push's keys in the change log once it was applied, or
  // failed part way (the tier: some rows may have changed); a push refused
  // for room (RESOURCE_EXHAUSTED) changed nothing.
  void RecordPush(const absl::Status& applied, const internal::ChangePart& part) {
    if (applied.ok() || !absl::IsResourceExhausted(applied)) changes.Append(part);
  }
};

}  // namespace brook::ps
