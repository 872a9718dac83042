#include "ps/rpc/ps_service.h"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "common/rpc/status_mapping.h"
#include "common/transient_error.h"
#include "metrics/rpc_metrics.h"
#include "security/bearer_token.h"

namespace brook::ps::rpc {

std::vector<std::string> PsMethodNames() {
  // Order matches PsMethod.
  return {"Health",      "CreateTable", "DropTable", "Pull",        "Push",
          "CreateDense", "PullDense",   "PushDense", "Stats",       "Checkpoint",
          "Restore",     "PullBatch",   "PushBatch", "FenceClients"};
}

PsService::PsService(ParameterServer* ps, const PsServiceOptions& options)
    : handlers_(ps, options.max_reply_bytes, options.helpers), options_(options) {}

// Health (and brook.v1.Node/Describe, served by rpc::NodeService) needs no
// token: they change nothing and say only "a PS, shard i of n, serving",
// which readiness probes and the clients' wrong-target checks
// (common/rpc/grpc_error.h) must learn before they can send anything.
absl::Status PsService::Authorize(const grpc::CallbackServerContext& ctx) const {
  if (options_.auth_token.empty()) return absl::OkStatus();
  const auto& metadata = ctx.client_metadata();
  const auto it = metadata.find(security::kAuthorizationHeader);
  const std::string_view value = it == metadata.end()
                                     ? std::string_view()
                                     : std::string_view(it->second.data(), it->second.size());
  return security::CheckAuthorization(options_.auth_token, value, "PS",
                                      "clients pass --ps-token-file or set BROOK_PS_TOKEN");
}

template <typename Req, typename Resp>
grpc::ServerUnaryReactor* PsService::Serve(grpc::CallbackServerContext* ctx, PsMethod method,
                                           const Req* req, Resp* resp,
                                           absl::Status (PsHandlers::*handler)(const Req&, Resp*)) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const auto start = std::chrono::steady_clock::now();
  // Refused inline, before the executor: an unauthenticated caller costs no
  // handler thread and waits behind no queue.
  if (absl::Status denied = Authorize(*ctx); !denied.ok()) {
    if (options_.on_unauthenticated) options_.on_unauthenticated(method);
    grpc::Status reply = brook::rpc::ToGrpcStatus(denied);
    if (options_.metrics != nullptr) {
      options_.metrics->Record(
          static_cast<int>(method), reply.error_code(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    reactor->Finish(reply);
    return reactor;
  }
  auto run = [this, ctx, reactor, method, req, resp, handler, start] {
    absl::Status status = serving() ? (handlers_.*handler)(*req, resp)
                                    : absl::UnavailableError("parameter server is shutting down");
    grpc::Status reply = brook::rpc::ToGrpcStatus(status);  // the one absl -> gRPC seam
    if (std::string reason = TransientReason(status); !reason.empty()) {
      ctx->AddTrailingMetadata(brook::rpc::kTransientTrailer, reason);  // the client may retry it
    }
    if (options_.metrics != nullptr) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      options_.metrics->Record(static_cast<int>(method), reply.error_code(), seconds);
    }
    reactor->Finish(reply);
  };
  if (options_.executor != nullptr) {
    boost::asio::post(*options_.executor, std::move(run));
  } else {
    run();
  }
  return reactor;
}

grpc::ServerUnaryReactor* PsService::Health(grpc::CallbackServerContext* ctx,
                                            const v1::HealthRequest* req,
                                            v1::HealthResponse* resp) {
  // Inline and always answered: a draining server still says it is draining.
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const auto start = std::chrono::steady_clock::now();
  grpc::Status reply = brook::rpc::ToGrpcStatus(handlers_.Health(*req, resp));
  resp->set_serving(serving());
  if (options_.metrics != nullptr) {
    options_.metrics->Record(
        static_cast<int>(PsMethod::kHealth), reply.error_code(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  reactor->Finish(reply);
  return reactor;
}

grpc::ServerUnaryReactor* PsService::CreateTable(grpc::CallbackServerContext* ctx,
                                                 const v1::CreateTableRequest* req,
                                                 v1::CreateTableResponse* resp) {
  return Serve(ctx, PsMethod::kCreateTable, req, resp, &PsHandlers::CreateTable);
}

grpc::ServerUnaryReactor* PsService::DropTable(grpc::CallbackServerContext* ctx,
                                               const v1::DropTableRequest* req,
                                               v1::DropTableResponse* resp) {
  return Serve(ctx, PsMethod::kDropTable, req, resp, &PsHandlers::DropTable);
}

grpc::ServerUnaryReactor* PsService::Pull(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req, grpc::ByteBuffer* resp) {
  return Serve(ctx, PsMethod::kPull, req, resp, &PsHandlers::PullRaw);
}

grpc::ServerUnaryReactor* PsService::Push(grpc::CallbackServerContext* ctx,
                                          const v1::PushRequest* req, v1::PushResponse* resp) {
  return Serve(ctx, PsMethod::kPush, req, resp, &PsHandlers::Push);
}

grpc::ServerUnaryReactor* PsService::CreateDense(grpc::CallbackServerContext* ctx,
                                                 const v1::CreateDenseRequest* req,
                                                 v1::CreateDenseResponse* resp) {
  return Serve(ctx, PsMethod::kCreateDense, req, resp, &PsHandlers::CreateDense);
}

grpc::ServerUnaryReactor* PsService::PullDense(grpc::CallbackServerContext* ctx,
                                               const v1::PullDenseRequest* req,
                                               v1::PullDenseResponse* resp) {
  return Serve(ctx, PsMethod::kPullDense, req, resp, &PsHandlers::PullDense);
}

grpc::ServerUnaryReactor* PsService::PushDense(grpc::CallbackServerContext* ctx,
                                               const v1::PushDenseRequest* req,
                                               v1::PushDenseResponse* resp) {
  return Serve(ctx, PsMethod::kPushDense, req, resp, &PsHandlers::PushDense);
}

grpc::ServerUnaryReactor* PsService::PullBatch(grpc::CallbackServerContext* ctx,
                                               const v1::PullBatchRequest* req,
                                               v1::PullBatchResponse* resp) {
  return Serve(ctx, PsMethod::kPullBatch, req, resp, &PsHandlers::PullBatch);
}

grpc::ServerUnaryReactor* PsService::PushBatch(grpc::CallbackServerContext* ctx,
                                               const v1::PushBatchRequest* req,
                                               v1::PushBatchResponse* resp) {
  return Serve(ctx, PsMethod::kPushBatch, req, resp, &PsHandlers::PushBatch);
}

grpc::ServerUnaryReactor* PsService::Stats(grpc::CallbackServerContext* ctx,
                                           const v1::StatsRequest* req, v1::StatsResponse* resp) {
  return Serve(ctx, PsMethod::kStats, req, resp, &PsHandlers::Stats);
}

grpc::ServerUnaryReactor* PsService::Checkpoint(grpc::CallbackServerContext* ctx,
                                                const v1::CheckpointRequest* req,
                                                v1::CheckpointResponse* resp) {
  return Serve(ctx, PsMethod::kCheckpoint, req, resp, &PsHandlers::Checkpoint);
}

grpc::ServerUnaryReactor* PsService::Restore(grpc::CallbackServerContext* ctx,
                                             const v1::RestoreRequest* req,
                                             v1::RestoreResponse* resp) {
  return Serve(ctx, PsMethod::kRestore, req, resp, &PsHandlers::Restore);
}

grpc::ServerUnaryReactor* PsService::FenceClients(grpc::CallbackServerContext* ctx,
                                                  const v1::FenceClientsRequest* req,
                                                  v1::FenceClientsResponse* resp) {
  return Serve(ctx, PsMethod::kFenceClients, req, resp, &PsHandlers::FenceClients);
}

}  // namespace brook::ps::rpc
