// GrpcPsClient's private parts, shared by grpc_ps_client.cc (single calls)
// and grpc_ps_client_batch.cc (PullBatch / PushBatch). Not an API.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "brook/v1/ps.grpc.pb.h"
#include "ps/client/grpc_ps_client.h"

namespace brook::ps {
namespace grpc_client_internal {

using Done = std::function<void(grpc::Status)>;

// One connection to a shard: the generated stub, plus Pull on raw reply
// bytes (the rows are copied once, from gRPC's slices into the caller's
// buffer, instead of into a protobuf string first).
class Stub {
 public:
  explicit Stub(std::shared_ptr<grpc::Channel> channel)
      : channel_(std::move(channel)),
        generated_(v1::ParameterServer::NewStub(channel_)),
        pull_("/brook.v1.ParameterServer/Pull", grpc::internal::RpcMethod::NORMAL_RPC, channel_) {}
  auto* async() { return generated_->async(); }
  // The one streaming call, blocking (ScanRows reads it on the caller's
  // thread).
  std::unique_ptr<grpc::ClientReader<v1::ScanRowsChunk>> ScanRows(grpc::ClientContext* ctx,
                                                                  const v1::ScanRowsRequest& req) {
    return generated_->ScanRows(ctx, req);
  }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  void PullRaw(grpc::ClientContext* ctx, const v1::PullRequest* req, grpc::ByteBuffer* reply,
               Done done) {
    grpc::internal::CallbackUnaryCall<v1::PullRequest, grpc::ByteBuffer,
                                      grpc::protobuf::MessageLite, grpc::ByteBuffer>(
        channel_.get(), pull_, ctx, req, reply, std::move(done));
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ParameterServer::Stub> generated_;
  grpc::internal::RpcMethod pull_;
};

}  // namespace grpc_client_internal

struct GrpcPsClient::Shard {
  using Stub = grpc_client_internal::Stub;
  std::string address;
  std::vector<std::unique_ptr<Stub>> stubs;
  std::atomic<uint32_t> next{0};

  Stub* Pick() { return stubs[next.fetch_add(1, std::memory_order_relaxed) % stubs.size()].get(); }
};

// One RPC of a fan-out. `issue` starts it on a stub with a fresh context;
// the request and response it points to live in the caller's frame.
struct GrpcPsClient::Call {
  using Stub = grpc_client_internal::Stub;
  using Done = grpc_client_internal::Done;
  int32_t shard = 0;
  std::function<void(Stub*, grpc::ClientContext*, Done)> issue;
  bool wait_for_ready = false;
  std::unique_ptr<grpc::ClientContext> context;
  grpc::Status status;
  bool replied = false;  // this attempt's callback ran (AwaitRound's lock)
  int attempts = 0;
};

}  // namespace brook::ps
