// brook.v1.ParameterServer over gRPC's callback API: a thin adapter that runs
// the PsHandlers, maps their status at the one seam (status_mapping.h),
// counts the request (metrics::RpcMetrics) and answers. It owns no PS state.
//
// Where handlers run: with an executor (PsServiceOptions::executor), every
// request except Health is posted to it, so the handler thread count is the
// executor's; without one, handlers run inline on gRPC's callback threads.
//
// Authentication: with PsServiceOptions::auth_token every method but Health
// needs "authorization: Bearer TOKEN"; a call without it, or with another,
// is UNAUTHENTICATED before it is queued or decoded.
//
// Serving flag: SetServing(false) (the daemon does it when a drain starts)
// makes every request except Health UNAVAILABLE, and Health report
// serving=false, so clients retry elsewhere / readiness probes fail while
// in-flight requests finish.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "brook/v1/ps.grpc.pb.h"
#include "ps/rpc/ps_handlers.h"

namespace boost::asio {
class thread_pool;
}
namespace brook {
class PartRunner;
}
namespace brook::metrics {
class RpcMetrics;
}

namespace brook::ps::rpc {

// Method indexes for metrics::RpcMetrics; PsMethodNames() lists the labels.
enum class PsMethod {
  kHealth,
  kCreateTable,
  kDropTable,
  kPull,
  kPush,
  kCreateDense,
  kPullDense,
  kPushDense,
  kStats,
  kCheckpoint,
  kRestore,
  kPullBatch,
  kPushBatch,
  kFenceClients,
  kChanges,
  kScanRows,
};
std::vector<std::string> PsMethodNames();

struct PsServiceOptions {
  // Handler threads (borrowed, must outlive the service and be joined only
  // after the grpc::Server shut down). nullptr: run inline on gRPC threads.
  boost::asio::thread_pool* executor = nullptr;
  // Request metrics (borrowed). nullptr: not counted.
  metrics::RpcMetrics* metrics = nullptr;
  // See PsHandlers.
  uint64_t max_reply_bytes = 64ull << 20;
  PartRunner* helpers = nullptr;
  // Required bearer token (security/bearer_token.h); empty: none.
  std::string auth_token;
  // Called (on the gRPC thread) for each call refused for its token, e.g. to
  // count it. May be empty.
  std::function<void(PsMethod)> on_unauthenticated;
};

// Pull is served on raw bytes (PsHandlers::PullRaw: rows gathered straight
// into the reply buffer); every other method on generated messages.
class PsService final
    : public v1::ParameterServer::WithRawCallbackMethod_Pull<v1::ParameterServer::CallbackService> {
 public:
  // `ps` must outlive the service.
  PsService(ParameterServer* ps, const PsServiceOptions& options);

  void SetServing(bool serving) { serving_.store(serving, std::memory_order_release); }
  bool serving() const { return serving_.load(std::memory_order_acquire); }
  const PsHandlers& handlers() const { return handlers_; }

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx, const v1::HealthRequest* req,
                                   v1::HealthResponse* resp) override;
  grpc::ServerUnaryReactor* CreateTable(grpc::CallbackServerContext* ctx,
                                        const v1::CreateTableRequest* req,
                                        v1::CreateTableResponse* resp) override;
  grpc::ServerUnaryReactor* DropTable(grpc::CallbackServerContext* ctx,
                                      const v1::DropTableRequest* req,
                                      v1::DropTableResponse* resp) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                 grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx, const v1::PushRequest* req,
                                 v1::PushResponse* resp) override;
  grpc::ServerUnaryReactor* CreateDense(grpc::CallbackServerContext* ctx,
                                        const v1::CreateDenseRequest* req,
                                        v1::CreateDenseResponse* resp) override;
  grpc::ServerUnaryReactor* PullDense(grpc::CallbackServerContext* ctx,
                                      const v1::PullDenseRequest* req,
                                      v1::PullDenseResponse* resp) override;
  grpc::ServerUnaryReactor* PushDense(grpc::CallbackServerContext* ctx,
                                      const v1::PushDenseRequest* req,
                                      v1::PushDenseResponse* resp) override;
  grpc::ServerUnaryReactor* PullBatch(grpc::CallbackServerContext* ctx,
                                      const v1::PullBatchRequest* req,
                                      v1::PullBatchResponse* resp) override;
  grpc::ServerUnaryReactor* PushBatch(grpc::CallbackServerContext* ctx,
                                      const v1::PushBatchRequest* req,
                                      v1::PushBatchResponse* resp) override;
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* ctx, const v1::StatsRequest* req,
                                  v1::StatsResponse* resp) override;
  grpc::ServerUnaryReactor* Checkpoint(grpc::CallbackServerContext* ctx,
                                       const v1::CheckpointRequest* req,
                                       v1::CheckpointResponse* resp) override;
  grpc::ServerUnaryReactor* Restore(grpc::CallbackServerContext* ctx, const v1::RestoreRequest* req,
                                    v1::RestoreResponse* resp) override;
  grpc::ServerUnaryReactor* FenceClients(grpc::CallbackServerContext* ctx,
                                         const v1::FenceClientsRequest* req,
                                         v1::FenceClientsResponse* resp) override;
  grpc::ServerUnaryReactor* Changes(grpc::CallbackServerContext* ctx, const v1::ChangesRequest* req,
                                    v1::ChangesResponse* resp) override;
  // Server streaming: the scan runs on a thread of its own (never the
  // executor's: a slow reader must not hold a handler thread), a few chunks
  // ahead of the writes; at most kMaxScans at once (more are UNAVAILABLE,
  // retryable). A client that goes away stops the scan.
  grpc::ServerWriteReactor<v1::ScanRowsChunk>* ScanRows(grpc::CallbackServerContext* ctx,
                                                        const v1::ScanRowsRequest* req) override;
  static constexpr int kMaxScans = 4;

 private:
  // Runs `handler(*req, resp)` (inline or on the executor), maps its status,
  // records metrics and finishes the call.
  template <typename Req, typename Resp>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* ctx, PsMethod method, const Req* req,
                                  Resp* resp,
                                  absl::Status (PsHandlers::*handler)(const Req&, Resp*));

  // OK when the call may proceed: no token required, or the right one sent.
  absl::Status Authorize(const grpc::CallbackServerContext& ctx) const;

  class ScanRowsReactor;
  // Records a finished call in options_.metrics (if any).
  void RecordCall(PsMethod method, grpc::StatusCode code,
                  std::chrono::steady_clock::time_point start) const;

  PsHandlers handlers_;
  const PsServiceOptions options_;
  std::atomic<bool> serving_{true};
  std::atomic<int> scans_{0};  // ScanRows in progress
};

}  // namespace brook::ps::rpc
