#include "ps/wire/proto_convert.h"

#include <gtest/gtest.h>

#include "brook/v1/ps.pb.h"
#include "ps/config_codec.h"

namespace brook::ps::wire {
namespace {

// Options and checkpoint infos are ps/config_codec.h's; stats are the wire's.
using ps::FromProto;
using ps::ToProto;
using wire::FromProto;
using wire::ToProto;

TableOptions NonDefaultTable() {
  TableOptions t;
  t.name = "ads";
  t.dim = 16;
  t.seed = 99;
  t.initializer = {InitializerKind::kTruncatedNormal, 0.5f, -1.0f, 1.0f, 0.1f, 0.2f};
  t.optimizer.kind = OptimizerKind::kFtrl;
  t.optimizer.learning_rate = 0.05f;
  t.optimizer.initial_accumulator = 0.2f;
  t.optimizer.beta1 = 0.8f;
  t.optimizer.beta2 = 0.99f;
  t.optimizer.epsilon = 1e-6f;
  t.optimizer.l1 = 0.01f;
  t.optimizer.l2 = 0.02f;
  t.optimizer.l2_shrinkage = 0.03f;
  t.optimizer.lr_power = -0.6f;
  t.memory_budget_bytes = 12345678;
  t.admission_min_count = 3;
  t.max_pending_keys = 1000;
  t.ttl_steps = 100;
  t.ttl_seconds = 60.5;
  t.bad_gradient = BadGradientPolicy::kZero;
  t.gradient_clip = 5.0f;
  return t;
}

TEST(ProtoConvertTest, TableOptionsRoundTripEveryField) {
  const TableOptions t = NonDefaultTable();
  v1::TableConfig p;
  ToProto(t, &p);
  auto back = FromProto(p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == t);
}

TEST(ProtoConvertTest, DefaultTableOptionsRoundTrip) {
  TableOptions t;
  t.name = "x";
  t.dim = 8;
  v1::TableConfig p;
  ToProto(t, &p);
  auto back = FromProto(p);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == t);
}

TEST(ProtoConvertTest, ZeroBudgetAndUnspecifiedEnumsTakeDefaults) {
  v1::TableConfig p;
  p.set_name("x");
  p.set_dim(4);
  auto t = FromProto(p);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->memory_budget_bytes, TableOptions().memory_budget_bytes);
  EXPECT_EQ(t->max_pending_keys, TableOptions().max_pending_keys);
  EXPECT_EQ(t->initializer.kind, InitializerOptions().kind);
  EXPECT_EQ(t->optimizer.kind, OptimizerOptions().kind);
  EXPECT_EQ(t->bad_gradient, BadGradientPolicy::kReject);
}

TEST(ProtoConvertTest, UnknownEnumValuesAreInvalidArgument) {
  v1::TableConfig p;
  p.mutable_initializer()->set_kind(static_cast<v1::InitializerKind>(77));
  EXPECT_EQ(FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  p.Clear();
  p.set_bad_gradient(static_cast<v1::BadGradientPolicy>(9));
  EXPECT_EQ(FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  v1::DenseConfig d;
  d.mutable_optimizer()->set_kind(static_cast<v1::OptimizerKind>(12));
  EXPECT_EQ(FromProto(d).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProtoConvertTest, DenseOptionsRoundTrip) {
  DenseOptions d;
  d.name = "mlp/w0";
  d.shape = {13, 256};
  d.seed = 5;
  d.initializer.kind = InitializerKind::kUniform;
  d.optimizer.kind = OptimizerKind::kAdam;
  d.bad_gradient = BadGradientPolicy::kZero;
  v1::DenseConfig p;
  ToProto(d, &p);
  auto back = FromProto(p);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == d);
}

TEST(ProtoConvertTest, StatsRoundTrip) {
  ServerStats s;
  TableStats t;
  t.name = "emb";
  t.dim = 8;
  t.rows = 10;
  t.pending_keys = 2;
  t.memory_bytes = 1000;
  t.rows_pulled = 30;
  t.rows_pushed = 20;
  t.admissions = 10;
  t.evictions = 1;
  t.rejected_gradients = 3;
  t.duplicate_pushes = 4;
  t.memory_budget_bytes = 1 << 20;
  t.pending_forgotten = 5;
  t.budget_rejections = 6;
  t.budget_deferred = 7;
  s.tables.push_back(t);
  s.dense.push_back({"w", 12, 3, 1});
  v1::StatsResponse p;
  ToProto(s, &p);
  ServerStats back = FromProto(p);
  ASSERT_EQ(back.tables.size(), 1u);
  const TableStats& b = back.tables[0];
  EXPECT_EQ(b.name, "emb");
  EXPECT_EQ(b.dim, 8);
  EXPECT_EQ(b.rows, 10u);
  EXPECT_EQ(b.pending_keys, 2u);
  EXPECT_EQ(b.memory_bytes, 1000u);
  EXPECT_DOUBLE_EQ(b.bytes_per_row, 100.0);
  EXPECT_EQ(b.rows_pulled, 30u);
  EXPECT_EQ(b.rows_pushed, 20u);
  EXPECT_EQ(b.admissions, 10u);
  EXPECT_EQ(b.evictions, 1u);
  EXPECT_EQ(b.rejected_gradients, 3u);
  EXPECT_EQ(b.duplicate_pushes, 4u);
  EXPECT_EQ(b.memory_budget_bytes, 1u << 20);
  EXPECT_EQ(b.pending_forgotten, 5u);
  EXPECT_EQ(b.budget_rejections, 6u);
  EXPECT_EQ(b.budget_deferred, 7u);
  ASSERT_EQ(back.dense.size(), 1u);
  EXPECT_EQ(back.dense[0].name, "w");
  EXPECT_EQ(back.dense[0].num_floats, 12u);
  EXPECT_EQ(back.dense[0].pushes, 3u);
  EXPECT_EQ(back.dense[0].rejected_gradients, 1u);
}

}  // namespace
}  // namespace brook::ps::wire
