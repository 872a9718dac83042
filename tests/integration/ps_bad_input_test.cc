// Bad input to a real `brook ps` over 127.0.0.1 (ports picked at run time):
// malformed and hostile RPCs are refused with the status code
// docs/architecture.md "Errors" names (common/rpc/status_mapping.h) and change nothing; garbage
// bytes on the gRPC and metrics ports and slow clients holding connections leave the server serving
// everyone else. The in-process twins of the RPC cases are in tests/unit/ps/rpc/ps_service_test.cc;
// these prove the same holds through the real binary, its flags, gRPC's transport and the metrics
// HTTP server.
//
// Every RPC has a deadline, every socket a timeout; children are killed by
// RAII if a test fails.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "brook/v1/ps.grpc.pb.h"
#include "metrics/exposer.h"
#include "ps/client/grpc_ps_client.h"
#include "ps/config_codec.h"
#include "tests/testing/http_get.h"
#include "tests/testing/process.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/raw_tcp.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using testing::RawConnection;

constexpr int kDim = 4;
constexpr int kMaxMessageMib = 1;  // the smallest the server takes
constexpr int kMaxKeys = 4096;     // --max-keys-per-request

// The value of one series ("name{labels}" exactly as exposed) on a /metrics
// page; nullopt if the page does not have it.
std::optional<double> SeriesValue(const std::string& page, const std::string& series) {
  const std::string needle = "\n" + series + " ";
  const size_t at = ("\n" + page).find(needle);
  if (at == std::string::npos) return std::nullopt;
  const size_t start = at + needle.size() - 1;  // -1: the "\n" we prepended
  const size_t end = page.find('\n', start);
  double v = 0;
  if (!absl::SimpleAtod(page.substr(start, end - start), &v)) return std::nullopt;
  return v;
}

std::string Requests(const std::string& method, const std::string& code) {
  return absl::StrCat("brook_ps_requests_total{code=\"", code, "\",method=\"", method, "\"}");
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::unique_ptr<grpc::ClientContext> Ctx(milliseconds timeout = milliseconds(5000)) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  return ctx;
}

// ---------------------------------------------------------------------------

class PsBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    auto ps = testing::StartBrookPs(0, 1,
                                    {"--max-message-mib", std::to_string(kMaxMessageMib),
                                     "--max-keys-per-request", std::to_string(kMaxKeys)},
                                    milliseconds(20000), &error);
    ASSERT_TRUE(ps.has_value()) << error;
    ps_ = std::move(*ps);
    ASSERT_FALSE(ps_.metrics_address.empty());
    channel_ = grpc::CreateChannel(ps_.address, grpc::InsecureChannelCredentials());
    stub_ = v1::ParameterServer::NewStub(channel_);
    client_ = NewClient();
    ASSERT_NE(client_, nullptr);
    BROOK_ASSERT_OK(client_->WaitForReady(absl::Seconds(10)));
  }

  // Every test ends with the server alive, then stopping cleanly on SIGTERM:
  // nothing it was sent wedged it.
  void TearDown() override {
    if (ps_.process == nullptr) return;
    EXPECT_FALSE(ps_.process->Wait(milliseconds(0)).has_value()) << "brook ps exited early";
    client_.reset();
    stub_.reset();
    channel_.reset();
    ASSERT_TRUE(ps_.process->Signal(SIGTERM));
    const std::optional<int> code = ps_.process->Wait(milliseconds(10000));
    ASSERT_TRUE(code.has_value()) << "brook ps did not exit within 10 s of SIGTERM";
    EXPECT_EQ(*code, 0);
  }

  // A client of its own (its own channel, so its own connection).
  std::unique_ptr<ps::GrpcPsClient> NewClient(absl::Duration deadline = absl::Seconds(5)) {
    ps::GrpcPsClientOptions options;
    options.addresses = {ps_.address};
    options.deadline = deadline;
    options.attempt_timeout = deadline;
    auto client = ps::GrpcPsClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  // Table "emb" (dim kDim, SGD lr 1, NaN/Inf rejected) with rows 1, 2, 3 at
  // 1.0 everywhere, and dense "w" (4 floats) at 1.0.
  void MakeState() {
    BROOK_ASSERT_OK(client_->CreateTable(testing::CounterTable("emb", kDim)));
    BROOK_ASSERT_OK(client_->CreateDense({testing::CounterDense("w", {4})}));
    BROOK_ASSERT_OK(client_->Push("emb", kKeys, std::vector<float>(3 * kDim, -1.0f), 1));
    BROOK_ASSERT_OK(client_->PushDense("w", std::vector<float>(4, -1.0f), 1));
  }

  // The state MakeState() made, read by a fresh client: nothing else applied.
  void ExpectStateUnchanged() {
    auto client = NewClient();
    ASSERT_NE(client, nullptr);
    std::vector<float> rows(3 * kDim);
    BROOK_ASSERT_OK(client->Pull("emb", kKeys, absl::MakeSpan(rows)));
    EXPECT_EQ(rows, std::vector<float>(3 * kDim, 1.0f));
    // Re-declaring (idempotent) tells this client the variable's layout, as
    // a restarted trainer does.
    BROOK_ASSERT_OK(client->CreateDense({testing::CounterDense("w", {4})}));
    std::vector<float> w(4);
    BROOK_ASSERT_OK(client->PullDense("w", absl::MakeSpan(w)));
    EXPECT_EQ(w, std::vector<float>(4, 1.0f));
    auto stats = client->Stats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    ASSERT_EQ(stats->size(), 1u);
    ASSERT_EQ((*stats)[0].tables.size(), 1u) << "a refused request created a table";
    EXPECT_EQ((*stats)[0].tables[0].name, "emb");
    EXPECT_EQ((*stats)[0].tables[0].rows, 3u) << "a refused push created rows";
    EXPECT_EQ((*stats)[0].tables[0].rows_pushed, 3u);
    ASSERT_EQ((*stats)[0].dense.size(), 1u);
    EXPECT_EQ((*stats)[0].dense[0].pushes, 1u);
  }

  // A normal pull from a fresh client and a /metrics scrape both succeed
  // within `within`, and the process is alive.
  void ExpectServing(milliseconds within = milliseconds(3000)) {
    const auto start = Clock::now();
    auto client = NewClient(absl::FromChrono(within));
    ASSERT_NE(client, nullptr);
    std::vector<float> rows(3 * kDim);
    BROOK_ASSERT_OK(client->Pull("emb", kKeys, absl::MakeSpan(rows)));
    EXPECT_EQ(rows, std::vector<float>(3 * kDim, 1.0f));
    std::string error;
    auto page = testing::BoundedHttpGet(ps_.metrics_address, "/metrics", within, &error);
    ASSERT_TRUE(page.has_value()) << error;
    EXPECT_EQ(page->status, 200);
    EXPECT_NE(page->body.find("brook_ps_table_rows{table=\"emb\"} 3"), std::string::npos);
    EXPECT_LT(Clock::now() - start, 2 * within);
    EXPECT_FALSE(ps_.process->Wait(milliseconds(0)).has_value()) << "brook ps exited";
  }

  // `bytes` as the request of `method`, through gRPC's generic stub.
  grpc::Status GenericCall(const std::string& method, const std::string& bytes) {
    grpc::GenericStub generic(channel_);
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), reply;
    auto ctx = Ctx();
    absl::Notification done;
    grpc::Status status;
    generic.UnaryCall(ctx.get(), method, grpc::StubOptions(), &request, &reply,
                      [&](grpc::Status s) {
                        status = std::move(s);
                        done.Notify();
                      });
    // The deadline ends the call; the wait is only a backstop.
    if (!done.WaitForNotificationWithTimeout(absl::Seconds(30))) {
      ADD_FAILURE() << method << " did not finish";
      ctx->TryCancel();
      done.WaitForNotification();
    }
    return status;
  }

  std::string ScrapeOrDie() {
    std::string error;
    auto page =
        testing::BoundedHttpGet(ps_.metrics_address, "/metrics", milliseconds(5000), &error);
    EXPECT_TRUE(page.has_value()) << error;
    if (!page) return "";
    EXPECT_EQ(page->status, 200);
    return page->body;
  }

  const std::vector<uint64_t> kKeys = {1, 2, 3};
  testing::PsProcess ps_;  // killed on destruction if still running
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
  std::unique_ptr<ps::GrpcPsClient> client_;
};

v1::PushRequest PushOf(std::string table, const std::vector<uint64_t>& keys,
                       const std::vector<float>& grads) {
  v1::PushRequest req;
  req.set_table(std::move(table));
  req.set_keys(testing::PackKeys(keys));
  req.set_grads(testing::PackFloats(grads));
  return req;
}

v1::PullRequest PullOf(std::string table, const std::vector<uint64_t>& keys, uint32_t dim) {
  v1::PullRequest req;
  req.set_table(std::move(table));
  req.set_keys(testing::PackKeys(keys));
  req.set_dim(dim);
  return req;
}

TEST_F(PsBadInputTest, BadRpcsGetTheRightCodeChangeNothingAndAreCounted) {
  MakeState();
  const std::string before = ScrapeOrDie();
  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  const float kInf = std::numeric_limits<float>::infinity();
  const std::vector<float> minus_ones(3 * kDim, -1.0f);
  v1::PushResponse push_resp;
  v1::PullResponse pull_resp;
  v1::PushDenseResponse push_dense_resp;
  v1::PullDenseResponse pull_dense_resp;

  // Push: wrong dims, NaN/Inf, malformed payloads, duplicate keys -> INVALID_ARGUMENT.
  std::vector<float> nan_grads = minus_ones;
  nan_grads[5] = kNaN;
  std::vector<float> inf_grads = minus_ones;
  inf_grads[0] = kInf;
  inf_grads[11] = -kInf;
  v1::PushRequest short_keys = PushOf("emb", kKeys, minus_ones);
  short_keys.mutable_keys()->resize(7);
  const std::vector<std::pair<std::string, v1::PushRequest>> invalid_pushes = {
      {"grads not a multiple of keys", PushOf("emb", kKeys, std::vector<float>(10, -1.0f))},
      {"dim 8 grads for a dim 4 table", PushOf("emb", kKeys, std::vector<float>(24, -1.0f))},
      {"keys not a multiple of 8 bytes", short_keys},
      {"NaN gradient", PushOf("emb", kKeys, nan_grads)},
      {"+Inf and -Inf gradients", PushOf("emb", kKeys, inf_grads)},
      {"duplicate keys", PushOf("emb", {1, 2, 1}, minus_ones)},
  };
  for (const auto& [what, req] : invalid_pushes) {
    const grpc::Status s = stub_->Push(Ctx().get(), req, &push_resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << what << ": " << s.error_message();
  }
  // Unknown table -> NOT_FOUND; over --max-keys-per-request -> RESOURCE_EXHAUSTED;
  // routed for another shard -> FAILED_PRECONDITION.
  EXPECT_EQ(stub_->Push(Ctx().get(), PushOf("nope", kKeys, minus_ones), &push_resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
  {
    std::vector<uint64_t> many(kMaxKeys + 1);
    for (size_t i = 0; i < many.size(); ++i) many[i] = 1000 + i;
    const grpc::Status s =
        stub_->Push(Ctx().get(), PushOf("emb", many, std::vector<float>(many.size() * kDim, -1.0f)),
                    &push_resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  }
  {
    v1::PushRequest req = PushOf("emb", kKeys, minus_ones);
    req.mutable_route()->set_shard_index(1);
    req.mutable_route()->set_num_shards(2);
    const grpc::Status s = stub_->Push(Ctx().get(), req, &push_resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  }
  // A message over the server's receive limit is refused by gRPC before any
  // handler runs: RESOURCE_EXHAUSTED, and not counted as a Push.
  {
    const size_t floats = (size_t{kMaxMessageMib} << 20) / sizeof(float) + 1024;
    std::vector<uint64_t> keys(floats / kDim);
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = 1 + i;  // includes 1, 2, 3
    const grpc::Status s =
        stub_->Push(Ctx().get(), PushOf("emb", keys, std::vector<float>(keys.size() * kDim, -1.0f)),
                    &push_resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  }

  // Pull: wrong dim, malformed keys -> INVALID_ARGUMENT; unknown table
  // (with and without a dim) -> NOT_FOUND; too many keys -> RESOURCE_EXHAUSTED.
  {
    v1::PullRequest bad_keys = PullOf("emb", kKeys, kDim);
    bad_keys.mutable_keys()->resize(5);
    EXPECT_EQ(stub_->Pull(Ctx().get(), PullOf("emb", kKeys, 8), &pull_resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(stub_->Pull(Ctx().get(), bad_keys, &pull_resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(stub_->Pull(Ctx().get(), PullOf("nope", kKeys, kDim), &pull_resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(stub_->Pull(Ctx().get(), PullOf("nope", kKeys, 0), &pull_resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
    std::vector<uint64_t> many(kMaxKeys + 1);
    for (size_t i = 0; i < many.size(); ++i) many[i] = i;
    EXPECT_EQ(stub_->Pull(Ctx().get(), PullOf("emb", many, kDim), &pull_resp).error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  // Bytes that are no request message at all (wire type 7 does not exist).
  // Pull parses its own request: INVALID_ARGUMENT.
  const std::string garbage("\x0f\x0f\x0f\xff\xff", 5);
  {
    const grpc::Status s = GenericCall("/brook.v1.ParameterServer/Pull", garbage);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }

  // Dense: NaN, wrong size -> INVALID_ARGUMENT; unknown -> NOT_FOUND.
  {
    v1::PushDenseRequest nan;
    nan.set_name("w");
    nan.set_grads(testing::PackFloats({-1.0f, kNaN, -1.0f, -1.0f}));
    EXPECT_EQ(stub_->PushDense(Ctx().get(), nan, &push_dense_resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    v1::PushDenseRequest short_push;
    short_push.set_name("w");
    short_push.set_grads(testing::PackFloats({-1.0f, -1.0f, -1.0f}));
    EXPECT_EQ(stub_->PushDense(Ctx().get(), short_push, &push_dense_resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    v1::PushDenseRequest unknown = short_push;
    unknown.set_name("nope");
    EXPECT_EQ(stub_->PushDense(Ctx().get(), unknown, &push_dense_resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
    v1::PullDenseRequest pull_unknown;
    pull_unknown.set_name("nope");
    EXPECT_EQ(stub_->PullDense(Ctx().get(), pull_unknown, &pull_dense_resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
    v1::PullDenseRequest pull_wrong_size;
    pull_wrong_size.set_name("w");
    pull_wrong_size.set_num_floats(5);
    EXPECT_EQ(stub_->PullDense(Ctx().get(), pull_wrong_size, &pull_dense_resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }

  // A batch with one bad part applies none of its good parts.
  {
    v1::PushBatchRequest batch;
    *batch.add_tables() = PushOf("emb", kKeys, minus_ones);
    *batch.add_tables() = PushOf("emb", {7, 8}, std::vector<float>(2 * 8, -1.0f));  // dim 8
    v1::PushDenseRequest* dense = batch.add_dense();
    dense->set_name("w");
    dense->set_grads(testing::PackFloats({-1.0f, -1.0f, -1.0f, -1.0f}));
    v1::PushBatchResponse resp;
    const grpc::Status s = stub_->PushBatch(Ctx().get(), batch, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }

  // Tables: a bad config -> INVALID_ARGUMENT; a conflicting re-create ->
  // ALREADY_EXISTS.
  {
    v1::CreateTableRequest zero_dim;
    zero_dim.mutable_table()->set_name("zero");
    v1::CreateTableResponse resp;
    EXPECT_EQ(stub_->CreateTable(Ctx().get(), zero_dim, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    v1::CreateTableRequest conflicting;
    ps::ToProto(testing::CounterTable("emb", kDim * 2), conflicting.mutable_table());
    EXPECT_EQ(stub_->CreateTable(Ctx().get(), conflicting, &resp).error_code(),
              grpc::StatusCode::ALREADY_EXISTS);
  }

  ExpectStateUnchanged();

  // The refusals are on /metrics: per method and code, and the NaN/Inf minus_ones
  // in the rejected-gradient counters (the wrong-dim, NOT_FOUND, ... minus_ones
  // are not gradient rejections).
  const std::string after = ScrapeOrDie();
  auto delta = [&](const std::string& series) {
    const std::optional<double> a = SeriesValue(after, series);
    EXPECT_TRUE(a.has_value()) << series << " is not on /metrics:\n" << after;
    return a.value_or(0) - SeriesValue(before, series).value_or(0);
  };
  EXPECT_EQ(delta(Requests("Push", "INVALID_ARGUMENT")), 6);
  EXPECT_EQ(delta(Requests("Push", "NOT_FOUND")), 1);
  EXPECT_EQ(delta(Requests("Push", "RESOURCE_EXHAUSTED")), 1) << "the oversized message was "
                                                                 "not refused by the transport";
  EXPECT_EQ(delta(Requests("Push", "FAILED_PRECONDITION")), 1);
  EXPECT_EQ(delta(Requests("Pull", "INVALID_ARGUMENT")), 3);
  EXPECT_EQ(delta(Requests("Pull", "NOT_FOUND")), 2);
  EXPECT_EQ(delta(Requests("Pull", "RESOURCE_EXHAUSTED")), 1);
  EXPECT_EQ(delta(Requests("PushDense", "INVALID_ARGUMENT")), 2);
  EXPECT_EQ(delta(Requests("PushDense", "NOT_FOUND")), 1);
  EXPECT_EQ(delta(Requests("PullDense", "NOT_FOUND")), 1);
  EXPECT_EQ(delta(Requests("PullDense", "INVALID_ARGUMENT")), 1);
  EXPECT_EQ(delta(Requests("PushBatch", "INVALID_ARGUMENT")), 1);
  EXPECT_EQ(delta(Requests("CreateTable", "INVALID_ARGUMENT")), 1);
  EXPECT_EQ(delta(Requests("CreateTable", "ALREADY_EXISTS")), 1);
  EXPECT_EQ(delta("brook_ps_rejected_gradients_total{table=\"emb\"}"), 2);
  EXPECT_EQ(delta("brook_ps_dense_rejected_gradients_total{variable=\"w\"}"), 1);
  EXPECT_EQ(delta("brook_ps_rows_pushed_total{table=\"emb\"}"), 0);
  EXPECT_EQ(delta("brook_ps_dense_pushes_total{variable=\"w\"}"), 0);

  // Garbage as a Push, whose request gRPC parses: gRPC 1.51's callback server
  // answers a request it cannot deserialize with UNIMPLEMENTED and no message
  // (its UnimplementedUnaryReactor) before any Brook code runs.
  // INVALID_ARGUMENT, as Pull gives, would be the right code; either way the
  // call is refused and nothing is applied. (After the counter checks: which
  // code it gets decides which series counts it.)
  {
    const grpc::Status s = GenericCall("/brook.v1.ParameterServer/Push", garbage);
    EXPECT_TRUE(s.error_code() == grpc::StatusCode::UNIMPLEMENTED ||
                s.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
        << s.error_code() << " " << s.error_message();
  }
  ExpectStateUnchanged();
  ExpectServing();
}

TEST_F(PsBadInputTest, GarbageOnTheGrpcPortIsDroppedAndTheServerKeepsServing) {
  MakeState();
  std::string error;
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  struct Case {
    std::string what;
    std::string bytes;
  };
  // A SETTINGS frame header (type 4, stream 0) claiming a 16 MiB - 1 payload,
  // far past the 16 KiB frame size a peer may send before settings say more.
  const std::string huge_frame =
      preface + std::string("\xff\xff\xff\x04\x00\x00\x00\x00\x00", 9) + RandomBytes(1024, 3);
  const std::vector<Case> cases = {
      {"random bytes", RandomBytes(64 << 10, 1)},
      {"an HTTP/1.1 request",
       "POST /brook.v1.ParameterServer/Pull HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd"},
      {"a valid preface then random bytes", preface + RandomBytes(4096, 2)},
      {"a frame header with a huge length", huge_frame},
  };
  for (const Case& c : cases) {
    auto conn = RawConnection::Connect(ps_.address, milliseconds(3000), &error);
    ASSERT_NE(conn, nullptr) << error;
    conn->Send(c.bytes);  // the server may hang up before taking it all
    EXPECT_TRUE(conn->ReadUntilClosed(milliseconds(5000)))
        << c.what << ": the server kept the connection open";
    ExpectServing();
  }
  // A truncated preface, then the client half-closes: the server gives up.
  {
    auto conn = RawConnection::Connect(ps_.address, milliseconds(3000), &error);
    ASSERT_NE(conn, nullptr) << error;
    ASSERT_TRUE(conn->Send(preface.substr(0, 10)));
    conn->ShutdownWrite();
    EXPECT_TRUE(conn->ReadUntilClosed(milliseconds(5000)))
        << "a truncated preface kept the connection open";
  }
  // A truncated preface left hanging, and a connection that sent nothing:
  // while both are held, others are served.
  {
    auto truncated = RawConnection::Connect(ps_.address, milliseconds(3000), &error);
    ASSERT_NE(truncated, nullptr) << error;
    ASSERT_TRUE(truncated->Send(preface.substr(0, 10)));
    auto silent = RawConnection::Connect(ps_.address, milliseconds(3000), &error);
    ASSERT_NE(silent, nullptr) << error;
    ExpectServing();
  }
  ExpectStateUnchanged();
}

TEST_F(PsBadInputTest, GarbageOnTheMetricsPortIsRefusedAndScrapesStillWork) {
  MakeState();
  std::string error;
  // Not HTTP at all.
  {
    auto conn = RawConnection::Connect(ps_.metrics_address, milliseconds(3000), &error);
    ASSERT_NE(conn, nullptr) << error;
    conn->Send(RandomBytes(4096, 4) + "\r\n\r\n");
    std::string reply;
    EXPECT_TRUE(conn->ReadUntilClosed(milliseconds(5000), &reply));
    EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), std::string::npos) << reply;
  }
  ExpectServing();
  // A header far past any sane size (civetweb's limit is 16 KiB).
  {
    auto conn = RawConnection::Connect(ps_.metrics_address, milliseconds(3000), &error);
    ASSERT_NE(conn, nullptr) << error;
    conn->Send("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(256 << 10, 'a') +
               "\r\n\r\n");
    std::string reply;
    EXPECT_TRUE(conn->ReadUntilClosed(milliseconds(5000), &reply));
    EXPECT_EQ(reply.find("brook_ps_table_rows"), std::string::npos)
        << "an oversized request was answered with the metrics";
  }
  ExpectServing();
  // A request line that never ends: the server drops it after its request
  // timeout; while it is held, scrapes from others are answered.
  {
    auto conn = RawConnection::Connect(ps_.metrics_address, milliseconds(3000), &error);
    ASSERT_NE(conn, nullptr) << error;
    ASSERT_TRUE(conn->Send("GET /metrics HTTP/1.1"));
    ExpectServing();
    std::string reply;
    EXPECT_TRUE(
        conn->ReadUntilClosed(milliseconds(metrics::kExposerRequestTimeoutMs + 3000), &reply))
        << "a request line with no end held its connection past the request timeout";
    EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), std::string::npos) << reply;
  }
  ExpectServing();
}

TEST_F(PsBadInputTest, SlowClientsHoldingConnectionsDoNotStarveOthers) {
  MakeState();
  constexpr int kGrpcConnections = 120;
  constexpr int kMetricsConnections = 60;
  std::string error;
  // Half of each send nothing; the other half dribble one byte a second
  // (an HTTP/2 preface and a request line that never finish).
  std::vector<std::unique_ptr<RawConnection>> idle, dribbling_grpc, dribbling_http;
  for (int i = 0; i < kGrpcConnections; ++i) {
    auto conn = RawConnection::Connect(ps_.address, milliseconds(3000), &error);
    ASSERT_NE(conn, nullptr) << "connection " << i << ": " << error;
    (i % 2 == 0 ? idle : dribbling_grpc).push_back(std::move(conn));
  }
  for (int i = 0; i < kMetricsConnections; ++i) {
    auto conn = RawConnection::Connect(ps_.metrics_address, milliseconds(3000), &error);
    ASSERT_NE(conn, nullptr) << "connection " << i << ": " << error;
    (i % 2 == 0 ? idle : dribbling_http).push_back(std::move(conn));
  }
  absl::Notification stop;
  std::thread dribbler([&] {
    const std::string grpc_bytes = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    const std::string http_bytes = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaa";
    for (size_t k = 0; !stop.HasBeenNotified(); ++k) {
      for (auto& c : dribbling_grpc) c->SendByteNow(grpc_bytes[std::min(k, grpc_bytes.size() - 2)]);
      for (auto& c : dribbling_http) c->SendByteNow(http_bytes[std::min(k, http_bytes.size() - 1)]);
      stop.WaitForNotificationWithTimeout(absl::Seconds(1));
    }
  });
  // While they are held: fresh clients pull and scrape within a few seconds.
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const auto start = Clock::now();
    ExpectServing(milliseconds(5000));
    EXPECT_LT(Clock::now() - start, milliseconds(6000));
  }
  stop.Notify();
  dribbler.join();
  idle.clear();
  dribbling_grpc.clear();
  dribbling_http.clear();
  ExpectServing();
  ExpectStateUnchanged();
}

}  // namespace
}  // namespace brook
