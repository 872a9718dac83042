#include "bench/bare_grpc.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/rpc/grpc_error.h"

namespace brook::bench {
namespace {

constexpr int kMaxMessageBytes = static_cast<int>(kBareMaxMessageBytes);
// Distinct reply sizes kept built; a client asking for more gets replies
// built per call (correct, only slower).
constexpr size_t kMaxCachedReplies = 64;

// One unary call on the generic (bidi) API: read the request, answer with
// the reply `reply_for` gives for it (a shared pre-built payload: ByteBuffer
// copies share the slice), finish.
template <typename ReplyFor>
class Reactor final : public grpc::ServerGenericBidiReactor {
 public:
  explicit Reactor(ReplyFor reply_for) : reply_for_(std::move(reply_for)) { StartRead(&request_); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
      return;
    }
    grpc::Status status = reply_for_(request_, &reply_);
    if (!status.ok()) {
      Finish(status);
      return;
    }
    StartWriteAndFinish(&reply_, grpc::WriteOptions(), grpc::Status::OK);
  }
  void OnDone() override { delete this; }

 private:
  ReplyFor reply_for_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer reply_;
};

template <typename ReplyFor>
Reactor<ReplyFor>* NewReactor(ReplyFor reply_for) {
  return new Reactor<ReplyFor>(std::move(reply_for));
}

class Unimplemented final : public grpc::ServerGenericBidiReactor {
 public:
  Unimplemented() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "")); }
  void OnDone() override { delete this; }
};

std::string HostOf(const std::string& address) {
  size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

}  // namespace

grpc::ByteBuffer MakePayload(size_t bytes) {
  grpc::Slice slice(bytes);
  auto* p = const_cast<uint8_t*>(slice.begin());
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(i * 131 + 7);
  return grpc::ByteBuffer(&slice, 1);
}

grpc::ByteBuffer MakePullRequest(size_t request_bytes, uint64_t reply_bytes) {
  grpc::Slice slice(std::max<size_t>(request_bytes, 8));
  auto* p = const_cast<uint8_t*>(slice.begin());
  for (size_t i = 8; i < slice.size(); ++i) p[i] = static_cast<uint8_t>(i * 131 + 7);
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(reply_bytes >> (8 * i));
  return grpc::ByteBuffer(&slice, 1);
}

std::optional<uint64_t> PullReplyBytes(const grpc::ByteBuffer& request) {
  uint8_t head[8];
  size_t have = 0;
  grpc::Slice single;
  std::vector<grpc::Slice> slices;
  if (request.TrySingleSlice(&single).ok()) {
    slices.push_back(std::move(single));
  } else if (!request.Dump(&slices).ok()) {
    return std::nullopt;
  }
  for (const grpc::Slice& s : slices) {
    const size_t n = std::min(s.size(), sizeof(head) - have);
    std::memcpy(head + have, s.begin(), n);
    have += n;
    if (have == sizeof(head)) break;
  }
  if (have < sizeof(head)) return std::nullopt;
  uint64_t bytes = 0;
  for (int i = 0; i < 8; ++i) bytes |= static_cast<uint64_t>(head[i]) << (8 * i);
  return bytes;
}

class BareGrpcServer::Service final : public grpc::CallbackGenericService {
 public:
  Service() : push_reply_(MakePayload(0)) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    if (ctx->method() == kBarePullMethod || ctx->method() == kBarePushMethod) {
      calls_.fetch_add(1, std::memory_order_relaxed);
    }
    if (ctx->method() == kBarePullMethod) {
      return NewReactor([this](const grpc::ByteBuffer& request, grpc::ByteBuffer* reply) {
        return PullReply(request, reply);
      });
    }
    if (ctx->method() == kBarePushMethod) {
      return NewReactor([this](const grpc::ByteBuffer&, grpc::ByteBuffer* reply) {
        *reply = push_reply_;
        return grpc::Status::OK;
      });
    }
    return new Unimplemented();
  }

 public:
  uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }

 private:
  grpc::Status PullReply(const grpc::ByteBuffer& request, grpc::ByteBuffer* reply) {
    const std::optional<uint64_t> bytes = PullReplyBytes(request);
    if (!bytes.has_value()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "a Pull request starts with 8 bytes: the reply bytes it asks for");
    }
    if (*bytes > kBareMaxMessageBytes) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("a Pull asked for ", *bytes, " reply bytes; at most ",
                                       kBareMaxMessageBytes));
    }
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = pull_replies_.find(*bytes);
      if (it != pull_replies_.end()) {
        *reply = it->second;
        return grpc::Status::OK;
      }
    }
    grpc::ByteBuffer built = MakePayload(*bytes);
    absl::MutexLock lock(&mu_);
    if (pull_replies_.size() < kMaxCachedReplies) pull_replies_.try_emplace(*bytes, built);
    *reply = std::move(built);
    return grpc::Status::OK;
  }

  const grpc::ByteBuffer push_reply_;
  std::atomic<uint64_t> calls_{0};
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, grpc::ByteBuffer> pull_replies_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<BareGrpcServer>> BareGrpcServer::Start(const std::string& listen) {
  std::unique_ptr<BareGrpcServer> s(new BareGrpcServer());
  s->service_ = std::make_unique<Service>();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &s->port_);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.RegisterCallbackGenericService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0)
    return absl::UnavailableError(absl::StrCat("bare gRPC server could not bind ", listen));
  s->address_ = absl::StrCat(HostOf(listen), ":", s->port_);
  return s;
}

uint64_t BareGrpcServer::calls() const { return service_->calls(); }

BareGrpcServer::~BareGrpcServer() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
}

absl::StatusOr<std::unique_ptr<BareGrpcClient>> BareGrpcClient::Create(
    const std::vector<std::string>& addresses, int channels) {
  if (channels < 1) return absl::InvalidArgumentError("channels must be >= 1");
  if (addresses.empty()) return absl::InvalidArgumentError("no address");
  std::unique_ptr<BareGrpcClient> c(new BareGrpcClient());
  c->address_ = absl::StrJoin(addresses, ",");
  // Stub k talks to addresses[k % n]: consecutive stubs cycle the addresses.
  for (int k = 0; k < channels * static_cast<int>(addresses.size()); ++k) {
    const std::string& address = addresses[k % addresses.size()];
    const int i = k / static_cast<int>(addresses.size());
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

absl::Status BareGrpcClient::WaitForReady(absl::Duration timeout) {
  // Every connection, so the first timed slice does not pay for connecting.
  const grpc::ByteBuffer empty = MakePayload(0);
  absl::Status st =
      CallWithDeadline(kBarePushMethod, empty, static_cast<int>(stubs_.size()), timeout);
  if (st.ok()) return st;
  // gRPC says "Deadline Exceeded" for a refused port and nothing at all for
  // a server without the Bare service: ask the address what it is.
  rpc::Peer peer;
  peer.address = address_;
  const absl::Status what = rpc::DiagnoseEndpoint(peer);
  std::string why(what.message());
  if (what.ok()) {  // gRPC's own message here can be empty: say what it answered
    why = absl::StrCat("it answers gRPC (", absl::StatusCodeToString(st.code()), " for ",
                       kBarePushMethod,
                       ") but not as a ceiling (a brook node? `brook bench grpc-ceiling --listen "
                       "HOST:PORT` prints the address it serves on)");
  }
  return absl::UnavailableError(absl::StrCat("no bare gRPC ceiling (brook bench grpc-ceiling) at ",
                                             address_, " within ", absl::FormatDuration(timeout),
                                             ": ", why));
}

absl::Status BareGrpcClient::CallFanOut(const char* method, const grpc::ByteBuffer& request,
                                        int copies) {
  return CallWithDeadline(method, request, copies, absl::Seconds(30));
}

absl::Status BareGrpcClient::CallWithDeadline(const char* method, const grpc::ByteBuffer& request,
                                              int copies, absl::Duration deadline) {
  struct One {
    grpc::ClientContext ctx;
    grpc::ByteBuffer reply;
    grpc::Status status;
  };
  std::vector<One> calls(static_cast<size_t>(copies));
  std::mutex mu;
  std::condition_variable cv;
  int pending = copies;
  const auto until = std::chrono::system_clock::now() + absl::ToChronoMilliseconds(deadline);
  const size_t first = next_.fetch_add(static_cast<size_t>(copies), std::memory_order_relaxed);
  for (int i = 0; i < copies; ++i) {
    One& one = calls[static_cast<size_t>(i)];
    one.ctx.set_wait_for_ready(true);
    one.ctx.set_deadline(until);
    Stub& stub = *stubs_[(first + static_cast<size_t>(i)) % stubs_.size()];
    stub.UnaryCall(&one.ctx, method, grpc::StubOptions(), &request, &one.reply,
                   [&, i](grpc::Status s) {
                     std::lock_guard<std::mutex> lock(mu);
                     calls[static_cast<size_t>(i)].status = std::move(s);
                     if (--pending == 0) cv.notify_one();
                   });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return pending == 0; });
  }
  const bool pull = std::strcmp(method, kBarePullMethod) == 0;
  const std::optional<uint64_t> asked = pull ? PullReplyBytes(request) : std::nullopt;
  for (const One& one : calls) {
    if (!one.status.ok()) {
      return absl::UnavailableError(
          absl::StrCat("bare gRPC ", method, " to ", address_, ": ", one.status.error_message()));
    }
    if (asked.has_value() && one.reply.Length() != *asked) {
      return absl::InternalError(absl::StrCat("bare gRPC ", method, " to ", address_,
                                              ": asked for ", *asked, " reply bytes, got ",
                                              one.reply.Length()));
    }
  }
  return absl::OkStatus();
}

}  // namespace brook::bench
