// The ceiling for PS RPCs in `brook bench ps`: a generic gRPC service with no
// protobuf that answers every call with a pre-built grpc::ByteBuffer, and a
// client that sends pre-built ByteBuffers through grpc::GenericStub over the
// same number of TCP connections as GrpcPsClient (2 per shard). It moves the
// same payload bytes as a PS Pull/Push and does nothing else: the best the
// transport can do.
//
// The server runs in the benchmark's process (`brook bench ps`) or as a
// process of its own (`brook bench grpc-ceiling`, beside a `brook ps` under
// `brook bench ps --target`), so a Pull request says how many reply bytes it
// wants: its first 8 bytes, little-endian (MakePullRequest). Replies are
// built once per size and shared.
//
// Thread-safe: Call() may be used from many threads at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

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
// The largest request or reply, as the PS server and client.
inline constexpr size_t kBareMaxMessageBytes = 64 << 20;

// Builds a ByteBuffer of `bytes` bytes (one slice, pattern-filled).
grpc::ByteBuffer MakePayload(size_t bytes);

// A Pull request of `request_bytes` bytes (at least 8) whose first 8 bytes
// ask for `reply_bytes` bytes of reply.
grpc::ByteBuffer MakePullRequest(size_t request_bytes, uint64_t reply_bytes);

// The reply bytes a Pull request asks for; nullopt when it is shorter than
// 8 bytes.
std::optional<uint64_t> PullReplyBytes(const grpc::ByteBuffer& request);

class BareGrpcServer {
 public:
  // On `listen` (host:port; port 0 picks one). Pull is answered with the
  // bytes its request asks for (INVALID_ARGUMENT past kBareMaxMessageBytes or
  // for a request under 8 bytes), Push with an empty message (as a
  // PushResponse with duplicate=false is).
  static absl::StatusOr<std::unique_ptr<BareGrpcServer>> Start(
      const std::string& listen = "127.0.0.1:0");
  ~BareGrpcServer();
  int port() const { return port_; }
  // The listen host with the bound port, e.g. "127.0.0.1:40123".
  const std::string& address() const { return address_; }
  // Pull and Push calls answered so far.
  uint64_t calls() const;

 private:
  class Service;
  BareGrpcServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
};

class BareGrpcClient {
 public:
  // `channels` TCP connections to `address` (host:port), requests
  // round-robin. Connections are made lazily; WaitForReady makes them.
  static absl::StatusOr<std::unique_ptr<BareGrpcClient>> Create(const std::string& address,
                                                                int channels) {
    return Create(std::vector<std::string>{address}, channels);
  }
  // `channels` connections to each of `addresses`, interleaved: a fan-out of
  // addresses.size() copies sends one to each (as a call to every shard).
  static absl::StatusOr<std::unique_ptr<BareGrpcClient>> Create(
      const std::vector<std::string>& addresses, int channels);
  ~BareGrpcClient();
  // One Push call that waits for the connection up to `timeout`: UNAVAILABLE
  // naming the address when nothing answers by then, or when what answers
  // is not a bare gRPC server.
  absl::Status WaitForReady(absl::Duration timeout);
  // Blocks until the call completes; the reply is dropped. A Pull reply of
  // another size than the request asked for is an error.
  absl::Status Call(const char* method, const grpc::ByteBuffer& request) {
    return CallFanOut(method, request, 1);
  }
  // `copies` calls of the same request at once, on consecutive connections
  // (with several addresses, a multiple of their count sends each the same
  // share), as GrpcPsClient fans a call out to its shards; blocks until all
  // complete.
  absl::Status CallFanOut(const char* method, const grpc::ByteBuffer& request, int copies);
  const std::string& address() const { return address_; }

 private:
  using Stub = grpc::TemplatedGenericStub<grpc::ByteBuffer, grpc::ByteBuffer>;
  BareGrpcClient() = default;
  absl::Status CallWithDeadline(const char* method, const grpc::ByteBuffer& request, int copies,
                                absl::Duration deadline);
  std::string address_;
  std::vector<std::unique_ptr<Stub>> stubs_;
  std::atomic<size_t> next_{0};
};

}  // namespace brook::bench
