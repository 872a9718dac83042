// PsClient over gRPC: addresses[i] is PS shard i. Per call it dedups the
// keys, routes them (sharding::PartitionKeys), sends one request per shard
// (split further when a shard's part exceeds max_request_bytes) on gRPC's
// callback API all at once, and reassembles the replies in the caller's
// order. Pushes sum duplicate keys' gradients first and carry (client_id,
// sequence, step); the sequence is fixed per RPC before the first attempt,
// so a retry is recognised by the PS as a duplicate and applied once.
//
// PullBatch / PushBatch do the same for every table of a step at once: one
// request per shard carries each table's and dense variable's part for it
// (a push part keeps its own sequence), so a step costs one round trip.
//
// Retries: UNAVAILABLE, DEADLINE_EXCEEDED (per attempt) and a
// RESOURCE_EXHAUSTED the PS marks transient (its WAL's disk is full:
// common/rpc/status_mapping.h kTransientTrailer) are retried with capped
// exponential backoff and jitter until `deadline` (per call, retries
// included: the retry window); other codes, a key limit's or a memory
// budget's RESOURCE_EXHAUSTED among them, are returned at once (UNAUTHENTICATED,
// a missing or wrong PS token, too: no retry fixes it). Only the
// failed RPCs of a fan-out are re-sent, with the same requests (a push keeps
// its sequence, so the PS applies it once). Cancel() ends every call at once.
//
// Connections: `channels_per_shard` TCP connections per shard, requests
// spread round-robin (NOTES.md: one loopback connection is erratic, two or
// more hold steady).
//
// Thread-safe; calls from many threads proceed concurrently. The calling
// thread blocks until its call completes or fails; gRPC's threads only
// complete RPCs.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ps/client/dense_directory.h"
#include "ps/client/ps_client.h"
#include "security/bearer_token.h"
#include "security/tls.h"

namespace brook::v1 {
class DropTableRequest;
class DropTableResponse;
class RestoreRequest;
class RestoreResponse;
}  // namespace brook::v1

namespace grpc {
class Channel;
class ChannelCredentials;
}  // namespace grpc

namespace brook::ps {

// A transient fault that calls are retrying (GrpcPsClient::retrying()).
struct PsRetryEpisode {
  int32_t shard = 0;
  std::string address;
  bool out_of_space = false;  // the PS's disk is full; else unreachable / timing out
  // No reply for silent_notice (a partition drops packets; nothing refuses):
  // calls wait on their attempt rather than retry.
  bool silent = false;
  // Why the first failed attempt failed, e.g. "PS shard 0 (HOST:PORT):
  // connection refused (nothing listens there)".
  std::string error;
  absl::Time since;
};

struct GrpcPsClientOptions {
  std::vector<std::string> addresses;  // host:port of shard 0..N-1
  // Whole-call budget, retries and backoff included: how long a call rides
  // out a PS that is unreachable or out of space (SetRetryWindow changes it).
  absl::Duration deadline = absl::Seconds(30);
  // Per Checkpoint / Restore call (they move whole tables).
  absl::Duration admin_deadline = absl::Minutes(30);
  // How long a Checkpoint / Restore retries a PS that refuses it
  // transiently (unreachable): a dead PS must not hold the chief's worker
  // for the whole admin_deadline.
  absl::Duration admin_retry_window = absl::Minutes(5);
  // Budget of one attempt of one RPC: a PS that stalls longer is retried.
  absl::Duration attempt_timeout = absl::Seconds(10);
  // A data-path call with no reply this long is a fault retrying() reports
  // (silent): a partitioned PS refuses nothing, so without this the first
  // word of it would be the call's failure at the end of the window.
  // Checkpoints and restores, whose attempts take long, are exempt.
  absl::Duration silent_notice = absl::Seconds(5);
  // Backoff before retry k is min(initial * 2^k, max) x uniform[0.5, 1).
  absl::Duration initial_backoff = absl::Milliseconds(20);
  absl::Duration max_backoff = absl::Seconds(1);
  int channels_per_shard = 2;
  // Same reasoning and value as the server's limit (ps/rpc/ps_server.h).
  int max_message_bytes = 64 << 20;
  // A shard's part of a pull or push is split into RPCs of at most this many
  // payload bytes, well under max_message_bytes.
  uint64_t max_request_bytes = 16ull << 20;
  // Send each request's shard route so a PS refuses a request meant for
  // another shard (FAILED_PRECONDITION). Off only for tools that address a
  // PS outside a cluster.
  bool check_route = true;
  uint64_t client_id = 0;  // 0: random
  // Off: plaintext (the 127.0.0.1 default, docs/architecture.md "Security").
  security::TlsOptions tls;
  // Sent as "authorization: Bearer TOKEN" on every call when the PS nodes
  // require one (brook ps --auth-token-file). Create refuses to send it in
  // plaintext to a non-loopback address, or (token.fallback) leaves it out.
  security::ClientToken token;
  // Called when calls start retrying a fault (RetryEpisode below: the shard
  // and why, e.g. "connection refused"), on the calling thread, so a process
  // can log it once per episode. Must not block or call this client.
  std::function<void(const PsRetryEpisode&)> on_retry;
};

class GrpcPsClient final : public PsClient {
 public:
  // Creates channels to every address (connections are made lazily).
  // INVALID_ARGUMENT for an empty address list or bad options.
  static absl::StatusOr<std::unique_ptr<GrpcPsClient>> Create(const GrpcPsClientOptions& options);
  // Over existing channels (e.g. PsServer::InProcessChannel()), channel i
  // for shard i; options.addresses and channels_per_shard are ignored.
  static absl::StatusOr<std::unique_ptr<GrpcPsClient>> FromChannels(
      std::vector<std::shared_ptr<grpc::Channel>> channels, const GrpcPsClientOptions& options);
  ~GrpcPsClient() override;

  // Blocks until every shard answers Health with serving=true (waiting for
  // connections), or `timeout` passes: UNAVAILABLE / DEADLINE_EXCEEDED then.
  // An address that is no PS (a chief, an HTTP/1 port, TLS on one side
  // only) fails at once, as in every call (common/rpc/grpc_error.h).
  absl::Status WaitForReady(absl::Duration timeout);

  // Asks every shard what it is (brook.v1.Node/Describe): the first address
  // that is not a PS, or (with `shard_order`) a PS started as another shard
  // index or count, is an error naming it (common/endpoint_error.h's mark);
  // a shard that does not answer is not judged (it may be starting). OK
  // otherwise.
  absl::Status CheckShards(absl::Duration timeout, bool shard_order = true);

  absl::Status CreateTable(const TableOptions& options) override;
  absl::Status DropTable(std::string_view table) override;
  absl::StatusOr<DroppedTables> DropTablesWithPrefix(std::string_view prefix) override;
  absl::Status Pull(std::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<float> out) override;
  absl::Status Push(std::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads, int64_t step) override;
  absl::Status CreateDense(absl::Span<const DenseOptions> variables) override;
  absl::Status LocateDense(absl::Span<const DenseOptions> variables) override;
  absl::Status PullDense(std::string_view name, absl::Span<float> out) override;
  absl::Status PushDense(std::string_view name, absl::Span<const float> grads,
                         int64_t step) override;
  // One PullBatch / PushBatch RPC per shard with work (several when a
  // shard's part exceeds max_request_bytes; a table's part is then split
  // like a single call's), all shards at once, retried like Pull / Push.
  absl::Status PullBatch(absl::Span<const TablePull> tables,
                         absl::Span<const DensePull> dense) override;
  using PsClient::PushBatch;
  absl::Status PushBatch(absl::Span<const TablePush> tables, absl::Span<const DensePush> dense,
                         int64_t step, float learning_rate_scale,
                         const PushStream& stream) override;
  absl::StatusOr<std::vector<ServerStats>> Stats() override;
  absl::StatusOr<std::vector<CheckpointInfo>> Checkpoint(const CheckpointOptions& options) override;
  absl::StatusOr<std::vector<RestoreInfo>> Restore(const std::string& dir) override;
  absl::StatusOr<std::vector<ImportInfo>> ImportTables(const ImportOptions& options) override;
  absl::StatusOr<std::vector<StartupInfo>> FenceClients(
      absl::Span<const uint64_t> client_ids) override;
  // Each round asks every shard that has more at once (Changes RPC),
  // retried like a pull.
  absl::StatusOr<ChangeSet> ChangesSince(std::string_view prefix, const ChangeCursor& cursor,
                                         uint64_t max_keys_per_shard) override;
  // One ScanRows stream per shard, shard after shard, within
  // options.admin_deadline; a shard that is unavailable before its first
  // chunk is retried (within admin_retry_window), one that fails after it
  // is an error (its rows were partly handed out). Cancel() takes effect at
  // the next chunk.
  absl::Status ScanRows(std::string_view table, const ChunkFn& chunk) override;

  // RPCs re-sent after a transient fault, since creation.
  uint64_t retries() const { return retries_.load(std::memory_order_relaxed); }

  // The whole-call budget (options.deadline) of calls that start from now
  // on, e.g. a job's training.retry_seconds. Any thread.
  void SetRetryWindow(absl::Duration window);
  absl::Duration retry_window() const;
  // How long Checkpoint / Restore calls that start from now on retry a PS
  // that refuses them transiently (options.admin_retry_window at first),
  // e.g. the job's training.retry_seconds for the chief's calls for a job.
  void SetAdminRetryWindow(absl::Duration window);

  // Ends every call in progress with CANCELLED within ~50 ms (attempts in
  // flight are cancelled, backoffs cut short), and every later call at
  // once: a process that is stopping must not wait out a retry window.
  // Irreversible. Any thread.
  void Cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // A transient fault that calls are retrying now.
  using RetryEpisode = PsRetryEpisode;
  // The oldest fault that calls still in progress are retrying; nullopt when
  // no call is retrying. Any thread.
  std::optional<RetryEpisode> retrying() const;

 private:
  struct Shard;
  struct Call;
  GrpcPsClient(const GrpcPsClientOptions& options, std::vector<std::unique_ptr<Shard>> shards);

  // Issues every call concurrently and waits; re-sends the retryable
  // failures with backoff until options_.deadline. Codes in `ok_codes`
  // (bitmask of 1 << code) count as done. Returns the first final error,
  // annotated with its shard.
  // `attempt` bounds each attempt (zero: options_.attempt_timeout).
  // No retry starts after `retry_until` (admin calls: their attempts are
  // long, their retries not).
  absl::Status Run(std::vector<Call>& calls, absl::Time deadline, uint32_t ok_codes = 0,
                   absl::Duration attempt = absl::ZeroDuration(),
                   absl::Time retry_until = absl::InfiniteFuture());
  // Sends a DropTable request to every shard (Run with `ok_codes`): one
  // answer per shard in `resps`, each shard's status in `calls`.
  absl::Status DropOnEveryShard(const v1::DropTableRequest& req,
                                std::vector<v1::DropTableResponse>* resps, std::vector<Call>* calls,
                                uint32_t ok_codes);
  // Sends a Restore request (a restore or an import) to every shard, one
  // attempt allowed the admin deadline: one answer per shard in `resps`.
  absl::Status RestoreOnEveryShard(const v1::RestoreRequest& req,
                                   std::vector<v1::RestoreResponse>* resps);
  // Waits for `pending`'s callbacks; cancels them when Cancel() is called.
  // Past `silent_notice` (zero: never) without every reply, retrying()
  // reports the first silent shard until the round ends.
  void AwaitRound(const std::vector<Call*>& pending, absl::Duration silent_notice);
  // Sleeps `d` unless cancelled first (false then).
  bool SleepUnlessCancelled(absl::Duration d);
  absl::Time CallDeadline() const { return absl::Now() + retry_window(); }
  // A failed attempt's status as the user should read it, naming the shard
  // (common/rpc/grpc_error.h asks the address what it is).
  absl::Status Explain(const Call& c);
  size_t KeysPerRequest(size_t dim) const;

  const GrpcPsClientOptions options_;
  const std::vector<std::unique_ptr<Shard>> shards_;
  DenseDirectory dense_;
  std::atomic<uint64_t> retries_{0};
  std::atomic<int64_t> retry_window_ns_;
  std::atomic<int64_t> admin_retry_window_ns_;
  std::atomic<bool> cancelled_{false};

  mutable absl::Mutex episode_mu_;
  int retrying_calls_ ABSL_GUARDED_BY(episode_mu_) = 0;
  std::optional<RetryEpisode> episode_ ABSL_GUARDED_BY(episode_mu_);
};

}  // namespace brook::ps
