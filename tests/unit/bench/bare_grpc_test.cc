#include "bench/bare_grpc.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace brook::bench {
namespace {

using ::testing::HasSubstr;

// One raw Pull on a GenericStub, bypassing BareGrpcClient's own size check,
// so the reply's size is the server's alone.
grpc::Status RawPull(const std::string& address, const grpc::ByteBuffer& request,
                     grpc::ByteBuffer* reply) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(kBareMaxMessageBytes));
  grpc::GenericStub stub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ctx.set_wait_for_ready(true);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&ctx, kBarePullMethod, grpc::StubOptions(), &request, reply, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return status;
}

TEST(BareGrpcTest, PullRequestCarriesTheReplySize) {
  const grpc::ByteBuffer request = MakePullRequest(100, 0x0102030405060708ull);
  EXPECT_EQ(request.Length(), 100u);
  EXPECT_EQ(PullReplyBytes(request), 0x0102030405060708ull);
  // The size survives a request split over slices.
  grpc::Slice a("\x10\x27\x00", 3), b("\x00\x00\x00\x00\x00tail", 9);
  grpc::Slice slices[] = {a, b};
  EXPECT_EQ(PullReplyBytes(grpc::ByteBuffer(slices, 2)), 10000u);
  EXPECT_EQ(PullReplyBytes(MakePayload(7)), std::nullopt);
  // Shorter than the header: padded to hold it.
  EXPECT_EQ(MakePullRequest(2, 5).Length(), 8u);
}

TEST(BareGrpcTest, ServerAnswersAPullWithTheBytesItAsksFor) {
  auto server = BareGrpcServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->address(), absl::StrCat("127.0.0.1:", (*server)->port()));
  for (uint64_t asked : {uint64_t{0}, uint64_t{1}, uint64_t{4096 * 256}, uint64_t{12345}}) {
    grpc::ByteBuffer reply;
    grpc::Status st = RawPull((*server)->address(), MakePullRequest(64, asked), &reply);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(reply.Length(), asked);
  }
  // Past the message limit, or no size at all: refused, saying why.
  grpc::ByteBuffer reply;
  grpc::Status big =
      RawPull((*server)->address(), MakePullRequest(8, kBareMaxMessageBytes + 1), &reply);
  EXPECT_EQ(big.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(big.error_message(), HasSubstr("at most"));
  grpc::Status none = RawPull((*server)->address(), MakePayload(3), &reply);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(BareGrpcTest, ClientFansOutAndChecksTheReplySize) {
  auto server = BareGrpcServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = BareGrpcClient::Create((*server)->address(), 4);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->WaitForReady(absl::Seconds(10)).ok());
  EXPECT_TRUE((*client)->Call(kBarePullMethod, MakePullRequest(32, 1000)).ok());
  EXPECT_TRUE((*client)->CallFanOut(kBarePullMethod, MakePullRequest(32, 2000), 3).ok());
  EXPECT_TRUE((*client)->CallFanOut(kBarePushMethod, MakePayload(5000), 2).ok());
  absl::Status unknown = (*client)->Call("/brook.bench.Bare/Nope", MakePayload(1));
  EXPECT_FALSE(unknown.ok());
}

TEST(BareGrpcTest, AFanOutOverSeveralAddressesSendsEachOneCall) {
  auto a = BareGrpcServer::Start();
  auto b = BareGrpcServer::Start();
  ASSERT_TRUE(a.ok() && b.ok());
  auto client = BareGrpcClient::Create({(*a)->address(), (*b)->address()}, 2);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->WaitForReady(absl::Seconds(10)).ok());
  const uint64_t a0 = (*a)->calls(), b0 = (*b)->calls();
  EXPECT_EQ(a0, b0);  // WaitForReady: one call on every connection
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*client)->CallFanOut(kBarePullMethod, MakePullRequest(16, 100), 2).ok());
  }
  EXPECT_EQ((*a)->calls() - a0, 5u);
  EXPECT_EQ((*b)->calls() - b0, 5u);
}

TEST(BareGrpcTest, WaitForReadyNamesAnAddressWhereNothingAnswers) {
  // A port that was free a moment ago: bind a server, note it, stop it.
  std::string address;
  {
    auto server = BareGrpcServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    address = (*server)->address();
  }
  auto client = BareGrpcClient::Create(address, 2);
  ASSERT_TRUE(client.ok());
  const absl::Time t0 = absl::Now();
  absl::Status st = (*client)->WaitForReady(absl::Milliseconds(500));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(st.message()), HasSubstr(address));
  EXPECT_THAT(std::string(st.message()), HasSubstr("grpc-ceiling"));
  // Said as what it is, not gRPC's "Deadline Exceeded".
  EXPECT_THAT(std::string(st.message()), HasSubstr("connection refused"));
}

}  // namespace
}  // namespace brook::bench
