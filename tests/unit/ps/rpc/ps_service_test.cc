// The gRPC adapter end to end in process: a grpc::Server without a port,
// reached through InProcessChannel with the generated stub. Covers decode,
// encode, every status mapping, "a bad request changes nothing", push
// dedup and request metrics. Runs with handlers inline and on a pool.
#include "ps/rpc/ps_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <boost/asio/thread_pool.hpp>
#include <cstring>
#include <memory>
#include <vector>

#include "brook/v1/ps.grpc.pb.h"
#include "common/version.h"
#include "metrics/rpc_metrics.h"
#include "prometheus/registry.h"
#include "ps/config_codec.h"
#include "ps/parameter_server.h"
#include "ps/wire/precision.h"
#include "ps/wire/proto_convert.h"
#include "tests/testing/ps_rpc_testing.h"

namespace brook::ps::rpc {
namespace {

using testing::CounterDense;
using testing::CounterTable;
using testing::PackFloats;
using testing::PackKeys;
using testing::UnpackFloats;

constexpr int kDim = 4;

class PsServiceTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ParameterServerOptions o;
    o.shard_index = 1;
    o.num_shards = 3;
    o.max_keys_per_request = 1000;
    ps_ = std::make_unique<ParameterServer>(o);
    registry_ = std::make_shared<prometheus::Registry>();
    metrics_ = std::make_unique<metrics::RpcMetrics>(*registry_, "brook_ps", PsMethodNames());
    if (GetParam() > 0) pool_ = std::make_unique<boost::asio::thread_pool>(GetParam());
    PsServiceOptions so;
    so.executor = pool_.get();
    so.metrics = metrics_.get();
    so.max_reply_bytes = 1 << 20;
    service_ = std::make_unique<PsService>(ps_.get(), so);
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::ParameterServer::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
    ASSERT_TRUE(ps_->CreateTable(CounterTable("emb", kDim)).ok());
  }

  void TearDown() override {
    server_->Shutdown();
    if (pool_) pool_->join();
  }

  grpc::Status Pull(const std::string& table, const std::string& keys, uint32_t dim,
                    v1::PullResponse* resp) {
    v1::PullRequest req;
    req.set_table(table);
    req.set_keys(keys);
    req.set_dim(dim);
    grpc::ClientContext ctx;
    return stub_->Pull(&ctx, req, resp);
  }

  grpc::Status Push(const std::string& table, const std::string& keys, const std::string& grads,
                    uint64_t client_id = 0, uint64_t sequence = 0, bool* duplicate = nullptr) {
    v1::PushRequest req;
    req.set_table(table);
    req.set_keys(keys);
    req.set_grads(grads);
    req.set_client_id(client_id);
    req.set_sequence(sequence);
    req.set_step(7);
    grpc::ClientContext ctx;
    v1::PushResponse resp;
    grpc::Status st = stub_->Push(&ctx, req, &resp);
    if (duplicate) *duplicate = resp.duplicate();
    return st;
  }

  // The table's rows for keys 1..5, straight from the core.
  std::vector<float> Snapshot() {
    std::vector<uint64_t> keys = {1, 2, 3, 4, 5};
    std::vector<float> out(keys.size() * kDim);
    EXPECT_TRUE(ps_->Pull("emb", keys, absl::MakeSpan(out)).ok());
    return out;
  }

  double RequestCount(const std::string& method, const std::string& code) {
    for (const auto& family : registry_->Collect()) {
      if (family.name != "brook_ps_requests_total") continue;
      for (const auto& m : family.metric) {
        bool method_ok = false, code_ok = false;
        for (const auto& l : m.label) {
          if (l.name == "method" && l.value == method) method_ok = true;
          if (l.name == "code" && l.value == code) code_ok = true;
        }
        if (method_ok && code_ok) return m.counter.value;
      }
    }
    return 0;
  }

  std::unique_ptr<ParameterServer> ps_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<metrics::RpcMetrics> metrics_;
  std::unique_ptr<boost::asio::thread_pool> pool_;
  std::unique_ptr<PsService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

INSTANTIATE_TEST_SUITE_P(Handlers, PsServiceTest, ::testing::Values(0, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("Inline")
                                                  : "Pool" + std::to_string(info.param);
                         });

TEST_P(PsServiceTest, PullReturnsPackedRowsInKeyOrder) {
  ASSERT_TRUE(ps_->Push("emb", std::vector<uint64_t>{2}, std::vector<float>(kDim, -3.0f), {}).ok());
  v1::PullResponse resp;
  ASSERT_TRUE(Pull("emb", PackKeys({1, 2, 1}), kDim, &resp).ok());
  EXPECT_EQ(resp.dim(), static_cast<uint32_t>(kDim));
  std::vector<float> rows = UnpackFloats(resp.rows());
  ASSERT_EQ(rows.size(), 3u * kDim);
  for (int d = 0; d < kDim; ++d) {
    EXPECT_EQ(rows[0 * kDim + d], 0.0f);
    EXPECT_EQ(rows[1 * kDim + d], 3.0f);
    EXPECT_EQ(rows[2 * kDim + d], 0.0f);
  }
}

// Wire precision on the protobuf path: a bf16 pull answers 2-byte rows and
// echoes its precision; an fp16 push's scale is undone; an unknown
// precision, a bad scale or a payload of the wrong size is INVALID_ARGUMENT
// and changes nothing.
TEST_P(PsServiceTest, HalfPrecisionPullsAndPushes) {
  ASSERT_TRUE(ps_->Push("emb", std::vector<uint64_t>{2}, std::vector<float>(kDim, -3.0f), {}).ok());
  v1::PullRequest req;
  req.set_table("emb");
  req.set_keys(PackKeys({1, 2}));
  req.set_dim(kDim);
  req.set_precision(v1::WIRE_PRECISION_BF16);
  v1::PullResponse resp;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Pull(&ctx, req, &resp).ok());
  }
  EXPECT_EQ(resp.precision(), v1::WIRE_PRECISION_BF16);
  ASSERT_EQ(resp.rows().size(), 2u * kDim * 2);
  uint16_t h;
  std::memcpy(&h, resp.rows().data() + kDim * 2, 2);
  EXPECT_EQ(wire::Bf16ToFloat(h), 3.0f);
  req.set_precision(static_cast<v1::WirePrecision>(9));
  {
    grpc::ClientContext ctx;
    const grpc::Status st = stub_->Pull(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("wire precision 9"), std::string::npos) << st.error_message();
  }

  const std::vector<float> before = Snapshot();
  auto push = [&](int precision, float scale, const std::string& grads) {
    v1::PushRequest p;
    p.set_table("emb");
    p.set_keys(PackKeys({1}));
    p.set_grads(grads);
    p.set_precision(static_cast<v1::WirePrecision>(precision));
    p.set_grad_scale(scale);
    grpc::ClientContext ctx;
    v1::PushResponse r;
    return stub_->Push(&ctx, p, &r);
  };
  std::string half(kDim * 2, '\0');
  const float scale = 1024.0f;
  for (int d = 0; d < kDim; ++d) {
    const uint16_t v = wire::FloatToFp16(-0.5f * scale);
    std::memcpy(half.data() + 2 * d, &v, 2);
  }
  EXPECT_EQ(push(9, 0, half).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(push(v1::WIRE_PRECISION_FP16, 3.0f, half).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(push(v1::WIRE_PRECISION_FP16, scale, half.substr(1)).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(push(v1::WIRE_PRECISION_BF16, 0, half + half).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // 2 x dim values for 1 key
  EXPECT_EQ(Snapshot(), before);
  ASSERT_TRUE(push(v1::WIRE_PRECISION_FP16, scale, half).ok());
  EXPECT_EQ(Snapshot()[0], before[0] + 0.5f);  // SGD, lr 1: w - (-0.5)
}

TEST_P(PsServiceTest, PullWithoutDimLooksItUp) {
  v1::PullResponse resp;
  ASSERT_TRUE(Pull("emb", PackKeys({9, 10}), 0, &resp).ok());
  EXPECT_EQ(resp.dim(), static_cast<uint32_t>(kDim));
  EXPECT_EQ(resp.rows().size(), 2u * kDim * 4);
}

TEST_P(PsServiceTest, PushAppliesSgdAndPullSeesIt) {
  ASSERT_TRUE(Push("emb", PackKeys({1, 3}), PackFloats(std::vector<float>(2 * kDim, -1.0f))).ok());
  std::vector<float> rows = Snapshot();
  EXPECT_EQ(rows[0], 1.0f);         // key 1
  EXPECT_EQ(rows[kDim], 0.0f);      // key 2
  EXPECT_EQ(rows[2 * kDim], 1.0f);  // key 3
}

TEST_P(PsServiceTest, RetriedPushWithSameSequenceIsDuplicateAndAppliedOnce) {
  const std::string keys = PackKeys({4});
  const std::string grads = PackFloats(std::vector<float>(kDim, -1.0f));
  bool duplicate = true;
  ASSERT_TRUE(Push("emb", keys, grads, /*client_id=*/77, /*sequence=*/5, &duplicate).ok());
  EXPECT_FALSE(duplicate);
  ASSERT_TRUE(Push("emb", keys, grads, 77, 5, &duplicate).ok());
  EXPECT_TRUE(duplicate);
  ASSERT_TRUE(Push("emb", keys, grads, 77, 6, &duplicate).ok());
  EXPECT_FALSE(duplicate);
  EXPECT_EQ(Snapshot()[3 * kDim], 2.0f);
  EXPECT_EQ(service_->handlers().max_step(), 7);
}

TEST_P(PsServiceTest, UnknownTableIsNotFound) {
  v1::PullResponse resp;
  EXPECT_EQ(Pull("nope", PackKeys({1}), kDim, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Pull("nope", PackKeys({1}), 0, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Push("nope", PackKeys({1}), PackFloats({1, 2, 3, 4})).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::DropTableRequest drop;
  drop.set_table("nope");
  v1::DropTableResponse drop_resp;
  grpc::ClientContext ctx;
  EXPECT_EQ(stub_->DropTable(&ctx, drop, &drop_resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(RequestCount("Pull", "NOT_FOUND"), 2);
  EXPECT_EQ(RequestCount("DropTable", "NOT_FOUND"), 1);
}

TEST_P(PsServiceTest, CreateTableIsIdempotentAndConflictIsAlreadyExists) {
  v1::CreateTableRequest req;
  ToProto(CounterTable("emb", kDim), req.mutable_table());
  v1::CreateTableResponse resp;
  {
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->CreateTable(&ctx, req, &resp).ok());
  }
  req.mutable_table()->set_dim(kDim + 1);
  grpc::ClientContext ctx;
  EXPECT_EQ(stub_->CreateTable(&ctx, req, &resp).error_code(), grpc::StatusCode::ALREADY_EXISTS);
}

TEST_P(PsServiceTest, BadTableOptionsAreInvalidArgument) {
  v1::CreateTableRequest req;
  ToProto(CounterTable("bad", 0), req.mutable_table());
  v1::CreateTableResponse resp;
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(stub_->CreateTable(&ctx, req, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  ToProto(CounterTable("bad", 4), req.mutable_table());
  req.mutable_table()->mutable_optimizer()->set_kind(static_cast<v1::OptimizerKind>(99));
  grpc::ClientContext ctx;
  EXPECT_EQ(stub_->CreateTable(&ctx, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ps_->Stats().tables.size(), 1u);
}

TEST_P(PsServiceTest, MalformedPayloadsAreInvalidArgumentAndChangeNothing) {
  const std::vector<float> before = Snapshot();
  const auto stats_before = ps_->Stats().tables[0];
  v1::PullResponse resp;
  // Keys not a multiple of 8 bytes.
  EXPECT_EQ(Pull("emb", std::string(7, 'x'), kDim, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Push("emb", std::string(12, 'x'), PackFloats(std::vector<float>(kDim, 1))).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Gradients not a multiple of 4 bytes.
  EXPECT_EQ(Push("emb", PackKeys({1}), std::string(15, 'x'), 1, 100).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Gradient count not keys x dim: not a multiple of the key count, and a
  // multiple with the wrong dim (the core's check).
  EXPECT_EQ(
      Push("emb", PackKeys({1, 2}), PackFloats(std::vector<float>(3, -1)), 1, 101).error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(
      Push("emb", PackKeys({1, 2}), PackFloats(std::vector<float>(2 * (kDim + 1), -1)), 1, 102)
          .error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);
  // Gradients without keys.
  EXPECT_EQ(Push("emb", "", PackFloats({1, 2})).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Duplicate keys in one push.
  EXPECT_EQ(Push("emb", PackKeys({1, 1}), PackFloats(std::vector<float>(2 * kDim, -1)), 1, 103)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // NaN under the default reject policy.
  std::vector<float> nan_grads(kDim, -1);
  nan_grads[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(Push("emb", PackKeys({2}), PackFloats(nan_grads), 1, 104).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Pull with a dim that is not the table's.
  EXPECT_EQ(Pull("emb", PackKeys({1}), kDim + 1, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  EXPECT_EQ(Snapshot(), before);
  const auto stats_after = ps_->Stats().tables[0];
  EXPECT_EQ(stats_after.rows, stats_before.rows);
  EXPECT_EQ(stats_after.rows_pushed, stats_before.rows_pushed);
  // The refused pushes did not consume their sequence numbers.
  bool duplicate = true;
  ASSERT_TRUE(
      Push("emb", PackKeys({5}), PackFloats(std::vector<float>(kDim, -1)), 1, 101, &duplicate)
          .ok());
  EXPECT_FALSE(duplicate);
  EXPECT_GE(RequestCount("Push", "INVALID_ARGUMENT"), 6);
}

TEST_P(PsServiceTest, TooManyKeysIsResourceExhaustedAndChangesNothing) {
  const std::vector<float> before = Snapshot();
  std::vector<uint64_t> keys(1001);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  v1::PullResponse resp;
  EXPECT_EQ(Pull("emb", PackKeys(keys), kDim, &resp).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Push("emb", PackKeys(keys), PackFloats(std::vector<float>(keys.size() * kDim, -1)))
                .error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Snapshot(), before);
}

TEST_P(PsServiceTest, ReplyLargerThanTheLimitIsResourceExhaustedBeforeAllocating) {
  std::vector<uint64_t> keys(1000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  v1::PullResponse resp;
  // 1000 keys x a claimed dim of 1M floats would be 4 GB; the limit is 1 MiB.
  EXPECT_EQ(Pull("emb", PackKeys(keys), 1u << 20, &resp).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_P(PsServiceTest, WrongShardRouteIsFailedPrecondition) {
  v1::PullRequest req;
  req.set_table("emb");
  req.set_keys(PackKeys({1}));
  req.set_dim(kDim);
  req.mutable_route()->set_shard_index(0);
  req.mutable_route()->set_num_shards(3);
  v1::PullResponse resp;
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(stub_->Pull(&ctx, req, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  req.mutable_route()->set_shard_index(1);
  req.mutable_route()->set_num_shards(4);
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(stub_->Pull(&ctx, req, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  req.mutable_route()->set_num_shards(3);
  grpc::ClientContext ctx;
  EXPECT_TRUE(stub_->Pull(&ctx, req, &resp).ok());

  v1::PushRequest push;
  push.set_table("emb");
  push.set_keys(PackKeys({1}));
  push.set_grads(PackFloats(std::vector<float>(kDim, -1)));
  push.mutable_route()->set_shard_index(2);
  push.mutable_route()->set_num_shards(3);
  v1::PushResponse push_resp;
  grpc::ClientContext push_ctx;
  EXPECT_EQ(stub_->Push(&push_ctx, push, &push_resp).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Snapshot()[0], 0.0f);
}

TEST_P(PsServiceTest, SequenceOlderThanTheDedupWindowIsFailedPrecondition) {
  ParameterServerOptions o;
  o.dedup_window = 4;
  ParameterServer small(o);
  ASSERT_TRUE(small.CreateTable(CounterTable("emb", kDim)).ok());
  PsService service(&small, PsServiceOptions{});
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  auto stub = v1::ParameterServer::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
  auto push = [&](uint64_t seq) {
    v1::PushRequest req;
    req.set_table("emb");
    req.set_keys(PackKeys({1}));
    req.set_grads(PackFloats(std::vector<float>(kDim, -1)));
    req.set_client_id(9);
    req.set_sequence(seq);
    v1::PushResponse resp;
    grpc::ClientContext ctx;
    return stub->Push(&ctx, req, &resp).error_code();
  };
  for (uint64_t seq = 100; seq < 110; ++seq) ASSERT_EQ(push(seq), grpc::StatusCode::OK);
  EXPECT_EQ(push(1), grpc::StatusCode::FAILED_PRECONDITION);
  server->Shutdown();
}

TEST_P(PsServiceTest, FencedClientsPushesAreAbortedAndChangeNothing) {
  const std::string keys = PackKeys({2});
  const std::string grads = PackFloats(std::vector<float>(kDim, -1.0f));
  ASSERT_TRUE(Push("emb", keys, grads, /*client_id=*/41, /*sequence=*/1).ok());
  v1::FenceClientsRequest fence;
  fence.add_client_ids(41);
  fence.add_client_ids(42);
  fence.add_client_ids(0);  // "no dedup" is never fenced
  v1::FenceClientsResponse fenced;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->FenceClients(&ctx, fence, &fenced).ok());
  }
  EXPECT_EQ(fenced.newly_fenced(), 2u);
  EXPECT_EQ(fenced.fenced_clients(), 2u);
  {
    grpc::ClientContext ctx;  // idempotent: the chief re-sends its list
    ASSERT_TRUE(stub_->FenceClients(&ctx, fence, &fenced).ok());
    EXPECT_EQ(fenced.newly_fenced(), 0u);
  }
  const std::vector<float> before = Snapshot();
  grpc::Status st = Push("emb", keys, grads, 41, 2);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ABORTED) << st.error_message();
  EXPECT_NE(st.error_message().find("fenced"), std::string::npos) << st.error_message();
  EXPECT_EQ(Push("emb", keys, grads, 41, 1).error_code(),
            grpc::StatusCode::ABORTED);  // a retry too
  // A push batch of a fenced client: nothing of it applies.
  v1::PushBatchRequest batch;
  batch.set_client_id(42);
  v1::PushRequest* part = batch.add_tables();
  part->set_table("emb");
  part->set_keys(keys);
  part->set_grads(grads);
  part->set_sequence(1);
  v1::PushBatchResponse batch_resp;
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(stub_->PushBatch(&ctx, batch, &batch_resp).error_code(), grpc::StatusCode::ABORTED);
  }
  EXPECT_EQ(Snapshot(), before);
  // Everybody else goes on.
  ASSERT_TRUE(Push("emb", keys, grads, 43, 1).ok());
  EXPECT_EQ(Snapshot()[kDim], before[kDim] + 1.0f);
  const ServerStats stats = ps_->Stats();
  EXPECT_EQ(stats.fenced_clients, 2u);
  EXPECT_EQ(stats.fenced_pushes, 3u);
  EXPECT_EQ(RequestCount("Push", "ABORTED"), 2);
  EXPECT_EQ(RequestCount("FenceClients", "OK"), 2);
}

TEST_P(PsServiceTest, NotServingIsUnavailableAndHealthSaysSo) {
  service_->SetServing(false);
  v1::PullResponse resp;
  EXPECT_EQ(Pull("emb", PackKeys({1}), kDim, &resp).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Push("emb", PackKeys({1}), PackFloats(std::vector<float>(kDim, -1))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Snapshot()[0], 0.0f);
  v1::HealthResponse health;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Health(&ctx, v1::HealthRequest(), &health).ok());
  }
  EXPECT_FALSE(health.serving());
  EXPECT_EQ(RequestCount("Pull", "UNAVAILABLE"), 1);
  service_->SetServing(true);
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Health(&ctx, v1::HealthRequest(), &health).ok());
  EXPECT_TRUE(health.serving());
  EXPECT_EQ(health.version(), Version());
  EXPECT_EQ(health.commit(), GitCommit());
}

TEST_P(PsServiceTest, DenseVariablesRoundTrip) {
  v1::CreateDenseRequest create;
  ToProto(CounterDense("w", {2, 3}), create.mutable_dense());
  v1::CreateDenseResponse create_resp;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->CreateDense(&ctx, create, &create_resp).ok());
  }
  v1::PushDenseRequest push;
  push.set_name("w");
  push.set_grads(PackFloats({-1, -2, -3, -4, -5, -6}));
  push.set_client_id(3);
  push.set_sequence(1);
  v1::PushDenseResponse push_resp;
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->PushDense(&ctx, push, &push_resp).ok());
    EXPECT_EQ(push_resp.duplicate(), i == 1);
  }
  v1::PullDenseRequest pull;
  pull.set_name("w");  // num_floats 0: looked up
  v1::PullDenseResponse pull_resp;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->PullDense(&ctx, pull, &pull_resp).ok());
  }
  EXPECT_EQ(UnpackFloats(pull_resp.values()), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  pull.set_num_floats(5);
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(stub_->PullDense(&ctx, pull, &pull_resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  push.set_grads(std::string(5, 'x'));
  push.set_sequence(2);
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(stub_->PushDense(&ctx, push, &push_resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  pull.set_name("missing");
  pull.set_num_floats(0);
  grpc::ClientContext ctx;
  EXPECT_EQ(stub_->PullDense(&ctx, pull, &pull_resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_P(PsServiceTest, StatsReportShardAndTables) {
  ASSERT_TRUE(Push("emb", PackKeys({1, 2}), PackFloats(std::vector<float>(2 * kDim, -1))).ok());
  v1::StatsResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Stats(&ctx, v1::StatsRequest(), &resp).ok());
  EXPECT_EQ(resp.shard_index(), 1);
  EXPECT_EQ(resp.num_shards(), 3);
  ASSERT_EQ(resp.tables_size(), 1);
  EXPECT_EQ(resp.tables(0).name(), "emb");
  EXPECT_EQ(resp.tables(0).dim(), static_cast<uint32_t>(kDim));
  EXPECT_EQ(resp.tables(0).rows(), 2u);
  EXPECT_EQ(resp.tables(0).rows_pushed(), 2u);
  EXPECT_GT(resp.tables(0).memory_bytes(), 0u);
}

TEST_P(PsServiceTest, DropTableRemovesIt) {
  v1::DropTableRequest req;
  req.set_table("emb");
  v1::DropTableResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->DropTable(&ctx, req, &resp).ok());
  v1::PullResponse pull;
  EXPECT_EQ(Pull("emb", PackKeys({1}), kDim, &pull).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_P(PsServiceTest, EmptyPullAndPushAreOk) {
  v1::PullResponse resp;
  ASSERT_TRUE(Pull("emb", "", kDim, &resp).ok());
  EXPECT_TRUE(resp.rows().empty());
  EXPECT_TRUE(Push("emb", "", "").ok());
}

TEST_P(PsServiceTest, MetricsCountOkRequestsAndObserveDurations) {
  v1::PullResponse resp;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Pull("emb", PackKeys({1}), kDim, &resp).ok());
  EXPECT_EQ(RequestCount("Pull", "OK"), 3);
  EXPECT_EQ(RequestCount("Push", "OK"), 0);
  for (const auto& family : registry_->Collect()) {
    if (family.name != "brook_ps_request_duration_seconds") continue;
    for (const auto& m : family.metric) {
      if (m.label[0].value == "Pull") {
        EXPECT_EQ(m.histogram.sample_count, 3u);
      }
    }
  }
}

}  // namespace
}  // namespace brook::ps::rpc
