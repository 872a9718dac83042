#include "bench/bare_grpc.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace brook::bench {
namespace {

constexpr int kMaxMessageBytes = 64 << 20;  // as the PS server and client

// One unary call on the generic (bidi) API: read the request, answer with a
// shared pre-built payload (ByteBuffer copies share the slice), finish.
class Reactor final : public grpc::ServerGenericBidiReactor {
 public:
  explicit Reactor(const grpc::ByteBuffer& reply) : reply_(reply) { StartRead(&request_); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
      return;
    }
    StartWriteAndFinish(&reply_, grpc::WriteOptions(), grpc::Status::OK);
  }
  void OnDone() override { delete this; }

 private:
  grpc::ByteBuffer request_;
  grpc::ByteBuffer reply_;
};

class Unimplemented final : public grpc::ServerGenericBidiReactor {
 public:
  Unimplemented() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "")); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ByteBuffer MakePayload(size_t bytes) {
  grpc::Slice slice(bytes);
  auto* p = const_cast<uint8_t*>(slice.begin());
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(i * 131 + 7);
  return grpc::ByteBuffer(&slice, 1);
}

class BareGrpcServer::Service final : public grpc::CallbackGenericService {
 public:
  explicit Service(size_t pull_reply_bytes)
      : pull_reply_(MakePayload(pull_reply_bytes)), push_reply_(MakePayload(0)) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    if (ctx->method() == kBarePullMethod) return new Reactor(pull_reply_);
    if (ctx->method() == kBarePushMethod) return new Reactor(push_reply_);
    return new Unimplemented();
  }

 private:
  const grpc::ByteBuffer pull_reply_;
  const grpc::ByteBuffer push_reply_;
};

absl::StatusOr<std::unique_ptr<BareGrpcServer>> BareGrpcServer::Start(size_t pull_reply_bytes) {
  std::unique_ptr<BareGrpcServer> s(new BareGrpcServer());
  s->service_ = std::make_unique<Service>(pull_reply_bytes);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &s->port_);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.RegisterCallbackGenericService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0)
    return absl::UnavailableError("bare gRPC server could not bind 127.0.0.1:0");
  return s;
}

BareGrpcServer::~BareGrpcServer() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
}

absl::StatusOr<std::unique_ptr<BareGrpcClient>> BareGrpcClient::Create(int port, int channels) {
  if (channels < 1) return absl::InvalidArgumentError("channels must be >= 1");
  std::unique_ptr<BareGrpcClient> c(new BareGrpcClient());
  const std::string address = absl::StrCat("127.0.0.1:", port);
  for (int i = 0; i < channels; ++i) {
    // The same channel arguments as GrpcPsClient: one TCP connection each.
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("brook.channel_index", i);
    c->stubs_.push_back(std::make_unique<Stub>(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
  }
  return c;
}

BareGrpcClient::~BareGrpcClient() = default;

absl::Status BareGrpcClient::Call(const char* method, const grpc::ByteBuffer& request) {
  Stub& stub = *stubs_[next_.fetch_add(1, std::memory_order_relaxed) % stubs_.size()];
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::ByteBuffer reply;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &reply, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  if (!status.ok())
    return absl::UnavailableError(absl::StrCat("bare gRPC ", method, ": ", status.error_message()));
  return absl::OkStatus();
}

}  // namespace brook::bench
