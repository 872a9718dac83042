// The ceiling for PS RPCs in `brook bench ps`: a generic gRPC service with no
// protobuf that answers every call with a pre-built grpc::ByteBuffer, and a
// client that sends pre-built ByteBuffers through grpc::GenericStub over the
// same number of TCP connections as GrpcPsClient (2 per shard). It moves the
// same payload bytes as a PS Pull/Push and does nothing else: the best the
// transport can do.
//
// Thread-safe: Call() may be used from many threads at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grpc {
class ByteBuffer;
class Channel;
class Server;
template <class RequestType, class ResponseType>
class TemplatedGenericStub;
}  // namespace grpc

namespace brook::bench {

inline constexpr char kBarePullMethod[] = "/brook.bench.Bare/Pull";
inline constexpr char kBarePushMethod[] = "/brook.bench.Bare/Push";

// Builds a ByteBuffer of `bytes` bytes (one slice, pattern-filled).
grpc::ByteBuffer MakePayload(size_t bytes);

class BareGrpcServer {
 public:
  // On 127.0.0.1:0. Pull is answered with `pull_reply_bytes` bytes, Push with
  // an empty message (as a PushResponse with duplicate=false is).
  static absl::StatusOr<std::unique_ptr<BareGrpcServer>> Start(size_t pull_reply_bytes);
  ~BareGrpcServer();
  int port() const { return port_; }

 private:
  class Service;
  BareGrpcServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

class BareGrpcClient {
 public:
  // `channels` TCP connections to 127.0.0.1:port, requests round-robin.
  static absl::StatusOr<std::unique_ptr<BareGrpcClient>> Create(int port, int channels);
  ~BareGrpcClient();
  // Blocks until the call completes; the reply is dropped.
  absl::Status Call(const char* method, const grpc::ByteBuffer& request);

 private:
  using Stub = grpc::TemplatedGenericStub<grpc::ByteBuffer, grpc::ByteBuffer>;
  BareGrpcClient() = default;
  std::vector<std::unique_ptr<Stub>> stubs_;
  std::atomic<size_t> next_{0};
};

}  // namespace brook::bench
