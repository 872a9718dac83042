// PullBatch / PushBatch through the gRPC adapter in process (generated stub
// over InProcessChannel): decode and encode of every part, the batch-wide
// fields (scale 0 means 1, parts must agree with the batch), route and reply
// limits, dedup of a resent batch, and request metrics by method.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "brook/v1/ps.grpc.pb.h"
#include "metrics/rpc_metrics.h"
#include "prometheus/registry.h"
#include "ps/parameter_server.h"
#include "ps/rpc/ps_service.h"
#include "tests/testing/ps_rpc_testing.h"

namespace brook::ps::rpc {
namespace {

using testing::CounterDense;
using testing::CounterTable;
using testing::PackFloats;
using testing::PackKeys;
using testing::UnpackFloats;

class PsServiceBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ParameterServerOptions o;
    o.shard_index = 1;
    o.num_shards = 3;
    ps_ = std::make_unique<ParameterServer>(o);
    registry_ = std::make_shared<prometheus::Registry>();
    metrics_ = std::make_unique<metrics::RpcMetrics>(*registry_, "brook_ps", PsMethodNames());
    PsServiceOptions so;
    so.metrics = metrics_.get();
    so.max_reply_bytes = 1 << 12;
    service_ = std::make_unique<PsService>(ps_.get(), so);
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::ParameterServer::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
    ASSERT_TRUE(ps_->CreateTable(CounterTable("a", 2)).ok());
    ASSERT_TRUE(ps_->CreateTable(CounterTable("b", 3)).ok());
    ASSERT_TRUE(ps_->CreateDense(CounterDense("w", {4})).ok());
  }
  void TearDown() override { server_->Shutdown(); }

  static void AddPull(v1::PullBatchRequest* req, const std::string& table,
                      const std::vector<uint64_t>& keys, uint32_t dim) {
    v1::PullRequest* p = req->add_tables();
    p->set_table(table);
    p->set_keys(PackKeys(keys));
    p->set_dim(dim);
  }
  static v1::PushRequest* AddPush(v1::PushBatchRequest* req, const std::string& table,
                                  const std::vector<uint64_t>& keys, const std::vector<float>& g,
                                  uint64_t sequence) {
    v1::PushRequest* p = req->add_tables();
    p->set_table(table);
    p->set_keys(PackKeys(keys));
    p->set_grads(PackFloats(g));
    p->set_sequence(sequence);
    return p;
  }
  grpc::Status PullBatch(const v1::PullBatchRequest& req, v1::PullBatchResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->PullBatch(&ctx, req, resp);
  }
  grpc::Status PushBatch(const v1::PushBatchRequest& req, v1::PushBatchResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->PushBatch(&ctx, req, resp);
  }
  std::vector<float> Rows(const std::string& table, const std::vector<uint64_t>& keys, int dim) {
    std::vector<float> out(keys.size() * dim);
    EXPECT_TRUE(ps_->Pull(table, keys, absl::MakeSpan(out)).ok());
    return out;
  }
  double RequestCount(const std::string& method, const std::string& code) {
    for (const auto& family : registry_->Collect()) {
      if (family.name != "brook_ps_requests_total") continue;
      for (const auto& m : family.metric) {
        bool method_ok = false, code_ok = false;
        for (const auto& l : m.label) {
          method_ok = method_ok || (l.name == "method" && l.value == method);
          code_ok = code_ok || (l.name == "code" && l.value == code);
        }
        if (method_ok && code_ok) return m.counter.value;
      }
    }
    return 0;
  }

  std::unique_ptr<ParameterServer> ps_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<metrics::RpcMetrics> metrics_;
  std::unique_ptr<PsService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

TEST_F(PsServiceBatchTest, PushBatchThenPullBatchRoundTripsEveryPart) {
  v1::PushBatchRequest push;
  push.set_client_id(5);
  push.set_step(9);
  AddPush(&push, "a", {1, 2}, {-1, -2, -3, -4}, 1);
  AddPush(&push, "b", {2}, {-5, -6, -7}, 2);
  v1::PushDenseRequest* d = push.add_dense();
  d->set_name("w");
  d->set_grads(PackFloats({-1, -1, -2, -2}));
  d->set_sequence(3);
  v1::PushBatchResponse pushed;
  ASSERT_TRUE(PushBatch(push, &pushed).ok());
  EXPECT_EQ(pushed.table_duplicate_size(), 2);
  EXPECT_FALSE(pushed.table_duplicate(0) || pushed.table_duplicate(1));
  EXPECT_EQ(service_->handlers().max_step(), 9);
  // Resent as is (a retry): every part is a duplicate, nothing changes.
  ASSERT_TRUE(PushBatch(push, &pushed).ok());
  EXPECT_TRUE(pushed.table_duplicate(0) && pushed.table_duplicate(1) && pushed.dense_duplicate(0));

  v1::PullBatchRequest pull;
  AddPull(&pull, "a", {2, 1, 2}, 2);
  AddPull(&pull, "b", {2, 9}, 0);  // dim 0: looked up
  pull.add_dense()->set_name("w");
  v1::PullBatchResponse rows;
  ASSERT_TRUE(PullBatch(pull, &rows).ok());
  ASSERT_EQ(rows.rows_size(), 2);
  EXPECT_EQ(UnpackFloats(rows.rows(0)), (std::vector<float>{3, 4, 1, 2, 3, 4}));
  EXPECT_EQ(UnpackFloats(rows.rows(1)), (std::vector<float>{5, 6, 7, 0, 0, 0}));
  ASSERT_EQ(rows.dense_values_size(), 1);
  EXPECT_EQ(UnpackFloats(rows.dense_values(0)), (std::vector<float>{1, 1, 2, 2}));
  EXPECT_EQ(RequestCount("PushBatch", "OK"), 2);
  EXPECT_EQ(RequestCount("PullBatch", "OK"), 1);
}

TEST_F(PsServiceBatchTest, ScaleZeroMeansOneAndANegativeScaleIsRefused) {
  v1::PushBatchRequest push;
  AddPush(&push, "a", {1}, {-1, -1}, 0);  // learning_rate_scale unset: 1
  v1::PushBatchResponse resp;
  ASSERT_TRUE(PushBatch(push, &resp).ok());
  EXPECT_EQ(Rows("a", {1}, 2), (std::vector<float>{1, 1}));
  push.set_learning_rate_scale(0.5f);
  ASSERT_TRUE(PushBatch(push, &resp).ok());
  EXPECT_EQ(Rows("a", {1}, 2), (std::vector<float>{1.5f, 1.5f}));
  push.set_learning_rate_scale(-2);
  EXPECT_EQ(PushBatch(push, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The single Push takes the same field.
  v1::PushRequest single;
  single.set_table("a");
  single.set_keys(PackKeys({1}));
  single.set_grads(PackFloats({-1, -1}));
  single.set_learning_rate_scale(0.25f);
  v1::PushResponse single_resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Push(&ctx, single, &single_resp).ok());
  EXPECT_EQ(Rows("a", {1}, 2), (std::vector<float>{1.75f, 1.75f}));
  EXPECT_EQ(RequestCount("PushBatch", "INVALID_ARGUMENT"), 1);
}

TEST_F(PsServiceBatchTest, PartsDisagreeingWithTheBatchAreInvalidArgument) {
  v1::PushBatchRequest push;
  push.set_client_id(5);
  push.set_step(3);
  AddPush(&push, "a", {1}, {-1, -1}, 1)->set_step(4);
  v1::PushBatchResponse resp;
  grpc::Status st = PushBatch(push, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("'a'"), std::string::npos) << st.error_message();
  push.mutable_tables(0)->set_step(3);  // equal: fine
  push.mutable_tables(0)->set_client_id(6);
  EXPECT_EQ(PushBatch(push, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Rows("a", {1}, 2), (std::vector<float>{0, 0}));
}

TEST_F(PsServiceBatchTest, ABadPartRefusesTheWholeBatch) {
  v1::PushBatchRequest push;
  AddPush(&push, "a", {1}, {-1, -1}, 0);
  AddPush(&push, "b", {1}, {-1, -1}, 0);  // 2 floats for a dim-3 table
  v1::PushBatchResponse resp;
  grpc::Status st = PushBatch(push, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("'b'"), std::string::npos) << st.error_message();
  push.mutable_tables(1)->set_table("nope");
  push.mutable_tables(1)->set_grads(PackFloats({-1, -1, -1}));
  st = PushBatch(push, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find("'nope'"), std::string::npos) << st.error_message();
  push.mutable_tables(1)->set_table("b");
  push.mutable_tables(1)->set_keys("123");  // not a multiple of 8 bytes
  EXPECT_EQ(PushBatch(push, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Rows("a", {1}, 2), (std::vector<float>{0, 0}));

  v1::PullBatchRequest pull;
  AddPull(&pull, "a", {1}, 2);
  AddPull(&pull, "missing", {1}, 2);
  v1::PullBatchResponse rows;
  st = PullBatch(pull, &rows);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find("'missing'"), std::string::npos) << st.error_message();
}

TEST_F(PsServiceBatchTest, WrongRouteIsFailedPreconditionAndAReplyPastTheLimitIsRefused) {
  v1::PullBatchRequest pull;
  AddPull(&pull, "a", {1}, 2);
  pull.mutable_route()->set_shard_index(0);
  pull.mutable_route()->set_num_shards(3);
  v1::PullBatchResponse rows;
  EXPECT_EQ(PullBatch(pull, &rows).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  pull.mutable_route()->set_shard_index(1);
  ASSERT_TRUE(PullBatch(pull, &rows).ok());

  v1::PushBatchRequest push;
  AddPush(&push, "a", {1}, {-1, -1}, 0);
  push.mutable_route()->set_shard_index(2);
  push.mutable_route()->set_num_shards(3);
  v1::PushBatchResponse resp;
  EXPECT_EQ(PushBatch(push, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  // 4 KiB reply limit: two parts of 300 keys x 2 floats each pass it together.
  std::vector<uint64_t> keys(300);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  v1::PullBatchRequest big;
  AddPull(&big, "a", keys, 2);
  ASSERT_TRUE(PullBatch(big, &rows).ok());
  AddPull(&big, "a", keys, 2);
  EXPECT_EQ(PullBatch(big, &rows).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  v1::PullBatchRequest huge_dense;
  v1::PullDenseRequest* d = huge_dense.add_dense();
  d->set_name("w");
  d->set_num_floats(~uint64_t{0});  // a made-up size is refused before allocating
  EXPECT_EQ(PullBatch(huge_dense, &rows).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

}  // namespace
}  // namespace brook::ps::rpc
