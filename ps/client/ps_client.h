// What a trainer (or the chief, or `brook bench ps`) sees of the parameter
// servers: one logical PS over N shards. Implementations route keys to shards
// (sharding::PartitionKeys), send each unique key once, sum the gradients of
// duplicate keys before a push, and give results back in the caller's order.
//
//   std::unique_ptr<PsClient> ps = ...;  // GrpcPsClient::Create or LocalPsClient
//   RETURN_IF_ERROR(ps->CreateTable(table_options));          // on every shard
//   std::vector<float> rows(keys.size() * dim);
//   RETURN_IF_ERROR(ps->Pull("emb", keys, absl::MakeSpan(rows)));
//   ... compute grads (keys.size() x dim, duplicates allowed) ...
//   RETURN_IF_ERROR(ps->Push("emb", keys, grads, step));
//
// Errors are the PS's (INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED,
// ALREADY_EXISTS, FAILED_PRECONDITION) plus, for remote clients, UNAVAILABLE
// or DEADLINE_EXCEEDED once retries ran out of time. A push is atomic per
// shard, not across shards: after an error some shards may have applied
// their part; retrying the whole push is then NOT exactly-once (the retried
// sequence numbers are new) — retry inside the client is.
//
// Thread-safe: every method may be called concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "ps/options.h"
#include "ps/types.h"

namespace brook::ps {

// One table's part of a PullBatch: rows for keys (duplicates allowed) into
// out (keys.size() x dim). TablePull and DensePull are defined in
// ps/types.h (the PS core takes the same parts):
//   struct TablePull { std::string_view table; absl::Span<const uint64_t> keys;
//                      absl::Span<float> out; };
//   struct DensePull { std::string_view name; absl::Span<float> out; };

// One table's part of a PushBatch: grads (keys.size() x dim), duplicate keys
// summed.
struct TablePush {
  std::string_view table;
  absl::Span<const uint64_t> keys;
  absl::Span<const float> grads;
};
struct DensePush {
  std::string_view name;
  absl::Span<const float> grads;
};

// The dedup identity of a training step's PushBatch that any trainer
// pushing the same step shares (PushContext::stream_id): `id` names the
// stream (a job's work unit in one data epoch), `step` the step within it,
// counted from 0. The step's parts then carry step << kStreamPartBits | their
// index on their shard, so every holder of the unit numbers them alike and
// the PS applies each once. id 0: no stream (this client's own sequences).
struct PushStream {
  uint64_t id = 0;
  uint64_t step = 0;
};

// Payload bytes a client moved for embedding tables since it was made: keys
// and rows of pulls, keys and gradients of pushes, in their wire precision
// (protobuf, HTTP/2 and TCP framing excluded; dense variables excluded). The
// in-process client counts what the same calls would send.
struct PsTraffic {
  uint64_t pull_bytes = 0;
  uint64_t push_bytes = 0;
};

// A follower's position in the change logs of every shard
// (PsClient::ChangesSince). Default-constructed: none yet (the first call
// says full_sync_needed).
struct ChangeCursor {
  // A hash of every shard's incarnation (never 0 once set): any one shard
  // restarting changes it.
  uint64_t incarnation = 0;
  std::vector<uint64_t> next;  // per shard: the sequence to read from
};

// What changed on the PS since a cursor, or that everything must be copied.
struct ChangeSet {
  // Copy everything (ScanRows, PullDense), then ask again with `cursor`,
  // which every shard gave before the copy began (nothing pushed during the
  // copy is missed). No keys then.
  bool full_sync_needed = false;
  ChangeCursor cursor;  // where to ask from next time
  // Changed keys per table, names WITHOUT the prefix the caller gave,
  // sorted by name; keys sorted and distinct (merged over shards). A row
  // listed here may have changed again since: read its current value.
  std::vector<std::pair<std::string, std::vector<uint64_t>>> tables;
  std::vector<std::string> dense;  // changed dense variables, without the prefix, sorted
};

class PsClient {
 public:
  virtual ~PsClient() = default;

  int32_t num_shards() const { return num_shards_; }
  // Random per client object, never 0; with a per-request sequence number it
  // makes every push exactly-once on the PS.
  uint64_t client_id() const { return client_id_; }

  // Creates the table on every shard (idempotent for identical options).
  virtual absl::Status CreateTable(const TableOptions& options) = 0;
  // Drops the table on every shard. NOT_FOUND if no shard had it.
  virtual absl::Status DropTable(std::string_view table) = 0;
  // Drops every table and dense variable named `prefix`... on every shard;
  // the counts are summed over shards.
  virtual absl::StatusOr<DroppedTables> DropTablesWithPrefix(std::string_view prefix) = 0;

  // Rows for `keys` (duplicates allowed, any order) into `out`: row i of
  // keys.size() x dim for keys[i]. INVALID_ARGUMENT if out.size() is not
  // keys.size() x dim; the dim is inferred as out.size() / keys.size() and
  // checked by the PS against the table. On an error, `out` may be partly
  // written.
  virtual absl::Status Pull(std::string_view table, absl::Span<const uint64_t> keys,
                            absl::Span<float> out) = 0;
  // Pushes grads (keys.size() x dim) for `keys`; gradients of duplicate keys
  // are summed, then each shard applies its rows once.
  virtual absl::Status Push(std::string_view table, absl::Span<const uint64_t> keys,
                            absl::Span<const float> grads, int64_t step) = 0;

  // Declares a model's dense variables: places them whole across the shards
  // with sharding::PlaceDenseVariables over this set (so every trainer that
  // declares the same set agrees), remembers name -> (shard, size), and
  // creates each on its shard. Call once with the full set. A name declared
  // earlier that now lands on another shard or has another size is
  // FAILED_PRECONDITION.
  virtual absl::Status CreateDense(absl::Span<const DenseOptions> variables) = 0;
  // CreateDense's placement alone, no RPC: for variables that already exist
  // on the PS (a follower pulling what trainers declared), so that
  // PullDense finds them. The set must be the trainers' full set. Default:
  // UNIMPLEMENTED.
  virtual absl::Status LocateDense(absl::Span<const DenseOptions> variables);
  // NOT_FOUND for a name not declared through this client; INVALID_ARGUMENT
  // if out.size() / grads.size() is not the variable's size.
  virtual absl::Status PullDense(std::string_view name, absl::Span<float> out) = 0;
  virtual absl::Status PushDense(std::string_view name, absl::Span<const float> grads,
                                 int64_t step) = 0;

  // Everything one training step pulls, in one round trip per shard (all
  // shards concurrently; shards with nothing to pull get no request): the
  // same rows as a Pull per table and a PullDense per variable. The whole
  // batch is checked before anything is sent (INVALID_ARGUMENT for sizes,
  // NOT_FOUND for an undeclared dense variable); a PS error names the table
  // or variable. A table may appear more than once.
  //
  //   std::vector<TablePull> pulls = {{"user", user_keys, user_rows},
  //                                   {"item", item_keys, item_rows}};
  //   std::vector<DensePull> dense = {{"mlp/w0", w0}};
  //   RETURN_IF_ERROR(ps->PullBatch(pulls, dense));
  virtual absl::Status PullBatch(absl::Span<const TablePull> tables,
                                 absl::Span<const DensePull> dense) = 0;
  // Everything one training step pushes, one round trip per shard.
  // learning_rate_scale multiplies every optimizer's learning rate for these
  // updates (schedules: warmup, decay); must be finite and > 0
  // (INVALID_ARGUMENT otherwise, nothing sent). Each table/dense part keeps
  // its own exactly-once (client_id, sequence) so a retried batch applies
  // each part at most once. A shard applies its part of the batch only if
  // all of it is valid; across shards a push batch is, like Push, not atomic.
  //
  // With a `stream` (id != 0) the parts are deduplicated by the stream's
  // step instead of this client's sequences: INVALID_ARGUMENT if a shard
  // would get kMaxStreamParts parts or more, or the step does not fit.
  absl::Status PushBatch(absl::Span<const TablePush> tables, absl::Span<const DensePush> dense,
                         int64_t step, float learning_rate_scale) {
    return PushBatch(tables, dense, step, learning_rate_scale, PushStream{});
  }
  virtual absl::Status PushBatch(absl::Span<const TablePush> tables,
                                 absl::Span<const DensePush> dense, int64_t step,
                                 float learning_rate_scale, const PushStream& stream) = 0;

  // One ServerStats per shard, in shard order.
  virtual absl::StatusOr<std::vector<ServerStats>> Stats() = 0;

  virtual PsTraffic Traffic() const {
    return {pull_bytes_.load(std::memory_order_relaxed),
            push_bytes_.load(std::memory_order_relaxed)};
  }
  // The wire precision of `table`'s pulls and pushes through this client:
  // TableOptions::wire of its last CreateTable here, fp32 if none.
  WirePrecision WireOf(std::string_view table) const;

  // Every shard writes its part of a checkpoint into options.dir (one
  // directory for the whole cluster), holding only the tables and dense
  // variables named with options.table_prefix (a job's, on shared PS
  // nodes); returns each shard's part, by shard. A PS with a data dir also
  // writes its own restart point: options.dir is a copy it never needs.
  // The checkpoint is complete once every part is: a failure leaves it
  // half-written, which restores refuse.
  virtual absl::StatusOr<std::vector<CheckpointInfo>> Checkpoint(
      const CheckpointOptions& options) = 0;
  // Every shard replaces its contents with the keys and dense variables it
  // owns in the checkpoint at `dir`, whatever shard count wrote it.
  virtual absl::StatusOr<std::vector<RestoreInfo>> Restore(const std::string& dir) = 0;
  // Every shard's ParameterServer::ImportTables, in shard order (a job's
  // init_from). A prefixed client imports under its prefix + to_prefix.
  virtual absl::StatusOr<std::vector<ImportInfo>> ImportTables(const ImportOptions& options) = 0;

  // The follower's read of every shard's change log
  // (ParameterServer::ChangesSince) for tables and dense variables whose
  // names start with `prefix`. full_sync_needed (and the cursor every shard
  // gives now) when the cursor is empty, when any shard's process is not the
  // one the cursor saw (a restart), or when a shard no longer holds the
  // cursor's position (its log's byte budget dropped it, or a restore). Else
  // the changes up to about where each shard is now: each shard is read in
  // rounds of at most max_keys_per_shard keys while it has more, up to
  // kMaxChangeRounds rounds (the cursor then says where to go on from).
  // FAILED_PRECONDITION when a PS keeps no change log. Default: UNIMPLEMENTED.
  //
  //   ChangeCursor cursor;
  //   while (true) {  // every few seconds
  //     ASSIGN_OR_RETURN(ChangeSet c, ps->ChangesSince("", cursor, 1 << 20));
  //     if (c.full_sync_needed) { ...ScanRows every table, PullDense... }
  //     else { ...Pull c.tables' keys, PullDense c.dense... }
  //     cursor = c.cursor;
  //   }
  virtual absl::StatusOr<ChangeSet> ChangesSince(std::string_view prefix,
                                                 const ChangeCursor& cursor,
                                                 uint64_t max_keys_per_shard);
  static constexpr int kMaxChangeRounds = 16;

  // Calls chunk(keys, weights) for every row of `table` on every shard
  // (weights keys.size() x dim, no optimizer slots), shard after shard, in
  // chunks of a few thousand rows, on the calling thread. Not a snapshot:
  // take a cursor (ChangesSince) first and read the changes after. Stops at
  // chunk's first error and returns it. NOT_FOUND when a shard lacks the
  // table. Default: UNIMPLEMENTED.
  using ChunkFn = std::function<absl::Status(absl::Span<const uint64_t>, absl::Span<const float>)>;
  virtual absl::Status ScanRows(std::string_view table, const ChunkFn& chunk);
  static constexpr uint32_t kScanChunkRows = 4096;

  // Every shard refuses later pushes from these client ids with ABORTED
  // (ParameterServer::FenceClients): the chief fences a trainer whose lease
  // expired. Idempotent (an empty list is fine); an error means some shard
  // may not have it yet (send again). Returns each shard's StartupInfo, by
  // shard: the chief notices a restarted PS by a new incarnation.
  virtual absl::StatusOr<std::vector<StartupInfo>> FenceClients(
      absl::Span<const uint64_t> client_ids) = 0;

 protected:
  // client_id 0 draws a random one.
  PsClient(int32_t num_shards, uint64_t client_id);
  uint64_t NextSequence() { return next_sequence_.fetch_add(1, std::memory_order_relaxed); }
  // CreateTable's bookkeeping: the table's wire precision from now on.
  void RememberWire(const TableOptions& options);
  // Traffic() accounting: `keys` keys and `values` values of `precision`.
  void CountPull(size_t keys, size_t values, WirePrecision precision);
  void CountPush(size_t keys, size_t values, WirePrecision precision);

  // The part sequences of one PushBatch, in the order its parts are made:
  // this client's counter, or under a stream step << kStreamPartBits | the
  // part's index on its shard (the same for every client that makes the
  // same parts).
  class PartSequences {
   public:
    PartSequences(PsClient* client, const PushStream& stream)
        : client_(client), stream_(stream), next_part_(client->num_shards(), 0) {}
    absl::StatusOr<uint64_t> Next(int32_t shard);

   private:
    PsClient* const client_;
    const PushStream stream_;
    std::vector<uint64_t> next_part_;  // per shard
  };

 private:
  const int32_t num_shards_;
  const uint64_t client_id_;
  std::atomic<uint64_t> next_sequence_{1};
  std::atomic<uint64_t> pull_bytes_{0};
  std::atomic<uint64_t> push_bytes_{0};
  // Set once any table is not fp32: until then WireOf takes no lock.
  std::atomic<bool> any_wire_{false};
  mutable absl::Mutex wire_mu_;
  absl::flat_hash_map<std::string, WirePrecision> wire_ ABSL_GUARDED_BY(wire_mu_);
};

// Checks the sizes every PsClient checks before routing: for a pull `floats`
// is out.size(), for a push grads.size(). Returns the dim (0 for no keys).
absl::StatusOr<size_t> InferDim(std::string_view table, size_t num_keys, size_t floats,
                                std::string_view what);
// A PushBatch's learning_rate_scale (CheckLearningRateScale), its error
// prefixed "push batch: ".
absl::Status CheckPushScale(float learning_rate_scale);

}  // namespace brook::ps
