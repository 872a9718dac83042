#include "ps/rpc/ps_service.h"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/rpc/status_mapping.h"
#include "common/transient_error.h"
#include "metrics/rpc_metrics.h"
#include "security/bearer_token.h"

namespace brook::ps::rpc {

std::vector<std::string> PsMethodNames() {
  // Order matches PsMethod.
  return {"Health",    "CreateTable",  "DropTable", "Pull",       "Push",    "CreateDense",
          "PullDense", "PushDense",    "Stats",     "Checkpoint", "Restore", "PullBatch",
          "PushBatch", "FenceClients", "Changes",   "ScanRows"};
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

grpc::ServerUnaryReactor* PsService::Changes(grpc::CallbackServerContext* ctx,
                                             const v1::ChangesRequest* req,
                                             v1::ChangesResponse* resp) {
  return Serve(ctx, PsMethod::kChanges, req, resp, &PsHandlers::Changes);
}

void PsService::RecordCall(PsMethod method, grpc::StatusCode code,
                           std::chrono::steady_clock::time_point start) const {
  if (options_.metrics == nullptr) return;
  options_.metrics->Record(
      static_cast<int>(method), code,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// One ScanRows call. The scan thread produces chunks into a short queue; the
// gRPC side writes them one at a time (OnWriteDone starts the next). Finish
// is called once, by whichever side sees the last state: the scan done and
// nothing left to write. OnDone joins the scan thread and deletes this.
//
// Thread safety: mu_ guards the queue and flags; StartWrite and Finish are
// called outside it.
class PsService::ScanRowsReactor final : public grpc::ServerWriteReactor<v1::ScanRowsChunk> {
 public:
  ScanRowsReactor(PsService* service, const v1::ScanRowsRequest* req)
      : service_(service), start_(std::chrono::steady_clock::now()) {
    scan_ = std::thread([this, req] { Scan(*req); });
  }

  void OnWriteDone(bool ok) override {
    const v1::ScanRowsChunk* next = nullptr;
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.pop_front();
      if (!ok) cancelled_ = true;  // the client is gone
      if (ok && !queue_.empty()) {
        next = &queue_.front();
      } else {
        writing_ = false;
        finish = TakeFinishLocked();
      }
    }
    room_.notify_all();
    if (next != nullptr) StartWrite(next);
    if (finish) FinishWith();
  }

  void OnCancel() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
    }
    room_.notify_all();
  }

  void OnDone() override {
    scan_.join();
    service_->RecordCall(PsMethod::kScanRows, status_.error_code(), start_);
    service_->scans_.fetch_sub(1, std::memory_order_relaxed);
    delete this;
  }

 private:
  static constexpr size_t kQueued = 4;  // chunks produced ahead of the writes

  void Scan(const v1::ScanRowsRequest& req) {
    absl::Status s = service_->handlers_.ScanRows(req, [this](v1::ScanRowsChunk&& chunk) {
      const v1::ScanRowsChunk* first = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        room_.wait(lock, [this] { return queue_.size() < kQueued || cancelled_; });
        if (cancelled_) return absl::CancelledError("the ScanRows client went away");
        queue_.push_back(std::move(chunk));
        if (!writing_) {
          writing_ = true;
          first = &queue_.front();
        }
      }
      if (first != nullptr) StartWrite(first);
      return absl::OkStatus();
    });
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      scanned_ = true;
      status_ = brook::rpc::ToGrpcStatus(s);  // the one absl -> gRPC seam
      finish = TakeFinishLocked();
    }
    // Nothing of this object is touched after Finish but in OnDone.
    if (finish) FinishWith();
  }

  // True once for the caller that must call Finish: the scan is over and no
  // write is in flight.
  bool TakeFinishLocked() {
    if (!scanned_ || writing_ || finished_) return false;
    finished_ = true;
    return true;
  }
  void FinishWith() { Finish(status_); }

  PsService* const service_;
  const std::chrono::steady_clock::time_point start_;
  std::thread scan_;

  std::mutex mu_;
  std::condition_variable room_;
  std::deque<v1::ScanRowsChunk> queue_;  // front: being written while writing_
  bool writing_ = false;
  bool cancelled_ = false;
  bool scanned_ = false;
  bool finished_ = false;
  grpc::Status status_;  // set with scanned_
};

grpc::ServerWriteReactor<v1::ScanRowsChunk>* PsService::ScanRows(grpc::CallbackServerContext* ctx,
                                                                 const v1::ScanRowsRequest* req) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status refused = Authorize(*ctx);
  if (!refused.ok() && options_.on_unauthenticated)
    options_.on_unauthenticated(PsMethod::kScanRows);
  if (refused.ok() && !serving())
    refused = absl::UnavailableError("parameter server is shutting down");
  if (refused.ok() && scans_.fetch_add(1, std::memory_order_relaxed) >= kMaxScans) {
    scans_.fetch_sub(1, std::memory_order_relaxed);
    refused = absl::UnavailableError(absl::StrCat(
        "ScanRows: ", kMaxScans, " scans are in progress on this PS already; retry later"));
  }
  if (!refused.ok()) {
    // A reactor that only finishes.
    class Refused final : public grpc::ServerWriteReactor<v1::ScanRowsChunk> {
     public:
      explicit Refused(const grpc::Status& s) { Finish(s); }
      void OnDone() override { delete this; }
    };
    const grpc::Status reply = brook::rpc::ToGrpcStatus(refused);
    RecordCall(PsMethod::kScanRows, reply.error_code(), start);
    return new Refused(reply);
  }
  return new ScanRowsReactor(this, req);
}

}  // namespace brook::ps::rpc
