// The PS request handlers without the transport: decode a brook.v1 request
// (ps/wire/wire.h), check it, call one ParameterServer method, encode the
// reply. Returns absl::Status; PsService maps it to grpc::Status at the one
// seam (status_mapping.h). Kept apart from the gRPC service so tests and
// fault-injecting wrappers can call the exact production handlers.
//
// Validation happens before the core is called, so a malformed request
// (payload not a multiple of 8 / 4 bytes, gradients != keys x dim, wrong
// shard route) is INVALID_ARGUMENT / FAILED_PRECONDITION and changes nothing.
//
// Thread-safe: every handler may run concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "brook/v1/common.pb.h"
#include "brook/v1/ps.pb.h"

namespace grpc {
class ByteBuffer;
}

namespace brook {
class PartRunner;
}
namespace brook::ps {
class ParameterServer;
}

namespace brook::ps::rpc {

class PsHandlers {
 public:
  // `ps` must outlive this object. A pull whose reply would exceed
  // `max_reply_bytes` is RESOURCE_EXHAUSTED before anything is allocated
  // (a client cannot make the server allocate keys x a made-up dim).
  // `helpers` (borrowed; nullptr: none): a pull of at least 2 x
  // Table::kMinPullPart keys is looked up in parts on its idle helper
  // threads, and a push to a table of at least Table::kMinSplitPushKeys keys
  // is applied in parts (PushContext::helpers).
  explicit PsHandlers(ParameterServer* ps, uint64_t max_reply_bytes = 64ull << 20,
                      PartRunner* helpers = nullptr)
      : ps_(ps), max_reply_bytes_(max_reply_bytes), helpers_(helpers) {}

  PsHandlers(const PsHandlers&) = delete;
  PsHandlers& operator=(const PsHandlers&) = delete;

  absl::Status CreateTable(const v1::CreateTableRequest& req, v1::CreateTableResponse* resp);
  absl::Status DropTable(const v1::DropTableRequest& req, v1::DropTableResponse* resp);
  absl::Status Pull(const v1::PullRequest& req, v1::PullResponse* resp);
  // Pull on serialized bytes: parses the request and writes the rows straight
  // into the one buffer the reply is sent from (a brook.v1.PullResponse on
  // the wire, its rows 8-byte aligned in memory). No zero-fill, no
  // serialisation copy: what the gRPC service runs.
  absl::Status PullRaw(const grpc::ByteBuffer& request, grpc::ByteBuffer* reply);
  absl::Status Push(const v1::PushRequest& req, v1::PushResponse* resp);
  absl::Status CreateDense(const v1::CreateDenseRequest& req, v1::CreateDenseResponse* resp);
  absl::Status PullDense(const v1::PullDenseRequest& req, v1::PullDenseResponse* resp);
  absl::Status PushDense(const v1::PushDenseRequest& req, v1::PushDenseResponse* resp);
  // A step's pulls / pushes in one request (ParameterServer::PullBatch /
  // PushBatch). A pull batch whose whole reply would exceed max_reply_bytes
  // is RESOURCE_EXHAUSTED before anything is allocated.
  absl::Status PullBatch(const v1::PullBatchRequest& req, v1::PullBatchResponse* resp);
  absl::Status PushBatch(const v1::PushBatchRequest& req, v1::PushBatchResponse* resp);
  absl::Status Stats(const v1::StatsRequest& req, v1::StatsResponse* resp);
  absl::Status Checkpoint(const v1::CheckpointRequest& req, v1::CheckpointResponse* resp);
  absl::Status Restore(const v1::RestoreRequest& req, v1::RestoreResponse* resp);
  absl::Status FenceClients(const v1::FenceClientsRequest& req, v1::FenceClientsResponse* resp);
  // The change log (ParameterServer::ChangesSince; head_only: the
  // incarnation and ChangeLogHead() alone). FAILED_PRECONDITION when the PS
  // keeps no change log. max_keys 0 reads as kDefaultChangeKeys; past what
  // fits in max_reply_bytes it is lowered.
  absl::Status Changes(const v1::ChangesRequest& req, v1::ChangesResponse* resp);
  static constexpr uint64_t kDefaultChangeKeys = 1u << 20;
  // Every row of a table (ParameterServer::ScanRows), as chunks handed to
  // `emit` in order on the calling thread (chunk_rows 0 reads as
  // kDefaultScanChunkRows, and no chunk holds more than max_reply_bytes).
  // Stops at emit's first error and returns it.
  using ChunkSink = std::function<absl::Status(v1::ScanRowsChunk&& chunk)>;
  absl::Status ScanRows(const v1::ScanRowsRequest& req, const ChunkSink& emit);
  static constexpr uint32_t kDefaultScanChunkRows = 4096;

  // Fills version and commit; `serving` is the caller's to set.
  absl::Status Health(const v1::HealthRequest& req, v1::HealthResponse* resp);

  // The highest step any push has carried: the "current step" the daemon's
  // eviction timer passes to ParameterServer::Evict (step-based TTL).
  int64_t max_step() const { return max_step_.load(std::memory_order_relaxed); }

 private:
  absl::Status CheckRoute(const v1::ShardRoute& route) const;
  // Validates a pull and returns its dim; the checks Pull and PullRaw share.
  absl::StatusOr<uint32_t> CheckPull(const v1::PullRequest& req, size_t keys) const;
  // A dense pull's float count (looked up when the request leaves it 0).
  absl::StatusOr<uint64_t> DenseFloats(const v1::PullDenseRequest& req) const;
  void NoteStep(int64_t step);

  ParameterServer* const ps_;  // not owned
  const uint64_t max_reply_bytes_;
  PartRunner* const helpers_;  // not owned; may be null
  std::atomic<int64_t> max_step_{0};
};

}  // namespace brook::ps::rpc
