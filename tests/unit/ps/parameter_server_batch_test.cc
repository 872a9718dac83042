// ParameterServer::PullBatch / PushBatch and the learning-rate scale: a batch
// equals its parts done one by one, is validated whole before anything
// changes, applies each part exactly once across retries, and a scaled push
// equals a push on a table configured with the scaled learning rate, for
// every optimizer, tables and dense variables alike.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ps/parameter_server.h"
#include "tests/unit/ps/ps_test_util.h"

namespace brook::ps {
namespace {

using test::Dump;
using test::PullOrDie;
using test::SgdTable;
using test::StatsOf;

TableOptions Table(const std::string& name, int dim, OptimizerKind kind, float lr) {
  TableOptions t;
  t.name = name;
  t.dim = dim;
  t.seed = 23;
  t.initializer.kind = InitializerKind::kUniform;
  t.initializer.low = -0.5f;
  t.initializer.high = 0.5f;
  t.optimizer.kind = kind;
  t.optimizer.learning_rate = lr;
  t.optimizer.l1 = 0.001f;  // FTRL
  t.optimizer.l2 = 0.01f;
  return t;
}

DenseOptions Dense(const std::string& name, int64_t n, OptimizerKind kind, float lr) {
  DenseOptions d;
  d.name = name;
  d.shape = {n};
  // Constant, not seeded by the name: variables of different names start equal.
  d.initializer.kind = InitializerKind::kConstant;
  d.initializer.value = 0.25f;
  d.optimizer.kind = kind;
  d.optimizer.learning_rate = lr;
  return d;
}

std::vector<float> Grads(size_t n, uint64_t salt) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = 0.4f * static_cast<float>(std::sin(0.7 * static_cast<double>(i + 3 * salt) + 0.1));
  }
  return g;
}

std::vector<float> PullDense(ParameterServer& ps, const std::string& name, size_t n) {
  std::vector<float> out(n);
  const absl::Status s = ps.PullDense(name, absl::MakeSpan(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Everything observable on a PS: every table's rows (with slots) and the
// named dense variables' values.
struct Snapshot {
  std::map<std::string, std::map<uint64_t, std::vector<float>>> tables;
  std::map<std::string, std::vector<float>> dense;
  bool operator==(const Snapshot&) const = default;
};

Snapshot Snap(ParameterServer& ps, const std::map<std::string, size_t>& dense_sizes) {
  Snapshot s;
  for (const TableStats& t : ps.Stats().tables) s.tables[t.name] = Dump(ps, t.name);
  for (const auto& [name, n] : dense_sizes) s.dense[name] = PullDense(ps, name, n);
  return s;
}

TEST(ParameterServerTest, PullBatchEqualsPullPerTableAndPullDense) {
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(Table("a", 4, OptimizerKind::kAdagrad, 0.1f)));
  PS_ASSERT_OK(ps.CreateTable(Table("b", 8, OptimizerKind::kSgd, 0.1f)));
  PS_ASSERT_OK(ps.CreateDense(Dense("w", 12, OptimizerKind::kSgd, 0.1f)));
  PS_ASSERT_OK(ps.Push("a", std::vector<uint64_t>{1, 5}, Grads(8, 1), {}));
  PS_ASSERT_OK(ps.Push("b", std::vector<uint64_t>{1, 7}, Grads(16, 2), {}));
  PS_ASSERT_OK(ps.PushDense("w", Grads(12, 3), {}));

  // Duplicates within a part, the same key in two tables, a table twice,
  // trained and never-seen keys.
  const std::vector<uint64_t> ka = {1, 2, 1, 5}, kb = {1, 7, 99}, ka2 = {5, 9};
  std::vector<float> ra(16, -7), rb(24, -7), ra2(8, -7), w(12, -7);
  const std::vector<TablePull> tables = {{"a", ka, absl::MakeSpan(ra)},
                                         {"b", kb, absl::MakeSpan(rb)},
                                         {"a", ka2, absl::MakeSpan(ra2)}};
  const std::vector<DensePull> dense = {{"w", absl::MakeSpan(w)}};
  PS_ASSERT_OK(ps.PullBatch(tables, dense));
  EXPECT_EQ(ra, PullOrDie(ps, "a", ka, 4));
  EXPECT_EQ(rb, PullOrDie(ps, "b", kb, 8));
  EXPECT_EQ(ra2, PullOrDie(ps, "a", ka2, 4));
  EXPECT_EQ(w, PullDense(ps, "w", 12));
  EXPECT_NE(ra[0], ra[4]);  // keys 1 and 2 differ: rows really were pulled per key
  EXPECT_EQ(StatsOf(ps, "a").rows_pulled, 2u * (4 + 2));  // counted per table, batch or not
  EXPECT_EQ(StatsOf(ps, "a").rows, 2u);                   // pulls create no rows
  PS_ASSERT_OK(ps.PullBatch({}, {}));
}

TEST(ParameterServerTest, PullBatchErrorsNameThePartAndWriteNothing) {
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(SgdTable("a", 2)));
  PS_ASSERT_OK(ps.CreateDense(Dense("w", 3, OptimizerKind::kSgd, 1)));
  const std::vector<uint64_t> keys = {1, 2};
  std::vector<float> ra(4, -7), bad(3, -7), w(3, -7);
  auto expect = [&](std::vector<TablePull> t, std::vector<DensePull> d, absl::StatusCode code,
                    const std::string& names) {
    const absl::Status s = ps.PullBatch(t, d);
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_NE(s.message().find(names), std::string::npos) << s;
    EXPECT_EQ(ra, std::vector<float>(4, -7));  // checked before the first part is read
    EXPECT_EQ(w, std::vector<float>(3, -7));
  };
  expect({{"a", keys, absl::MakeSpan(ra)}, {"missing", keys, absl::MakeSpan(ra)}},
         {{"w", absl::MakeSpan(w)}}, absl::StatusCode::kNotFound, "'missing'");
  expect({{"a", keys, absl::MakeSpan(ra)}, {"a", keys, absl::MakeSpan(bad)}},
         {{"w", absl::MakeSpan(w)}}, absl::StatusCode::kInvalidArgument, "'a'");
  expect({{"a", keys, absl::MakeSpan(ra)}}, {{"nope", absl::MakeSpan(w)}},
         absl::StatusCode::kNotFound, "'nope'");
  expect({{"a", keys, absl::MakeSpan(ra)}}, {{"w", absl::MakeSpan(bad).subspan(1)}},
         absl::StatusCode::kInvalidArgument, "'w'");
}

TEST(ParameterServerTest, PushBatchEqualsTheSamePushesOneByOne) {
  ParameterServer batched({}), single({});
  for (ParameterServer* ps : {&batched, &single}) {
    PS_ASSERT_OK(ps->CreateTable(Table("adam", 4, OptimizerKind::kAdam, 0.05f)));
    PS_ASSERT_OK(ps->CreateTable(Table("ftrl", 3, OptimizerKind::kFtrl, 0.2f)));
    PS_ASSERT_OK(ps->CreateDense(Dense("w", 10, OptimizerKind::kAdagrad, 0.1f)));
  }
  uint64_t sequence = 0;
  for (int step = 1; step <= 6; ++step) {
    const std::vector<uint64_t> k1 = {1, 2, static_cast<uint64_t>(10 + step)};
    const std::vector<uint64_t> k2 = {30, static_cast<uint64_t>(step)};
    const std::vector<float> g1 = Grads(12, step), g2 = Grads(6, 10 + step),
                             gw = Grads(10, 20 + step);
    const std::vector<TablePushPart> parts = {{"adam", k1, g1, sequence + 1},
                                              {"ftrl", k2, g2, sequence + 2}};
    const std::vector<DensePushPart> dense = {{"w", gw, sequence + 3}};
    PushContext ctx{.client_id = 4, .step = step, .learning_rate_scale = 0.5f};
    absl::StatusOr<PushBatchOutcome> out = batched.PushBatch(parts, dense, ctx);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->tables, std::vector<PushOutcome>(2, PushOutcome::kApplied));
    EXPECT_EQ(out->dense, std::vector<PushOutcome>(1, PushOutcome::kApplied));
    ctx.sequence = ++sequence;
    PS_ASSERT_OK(single.Push("adam", k1, g1, ctx));
    ctx.sequence = ++sequence;
    PS_ASSERT_OK(single.Push("ftrl", k2, g2, ctx));
    ctx.sequence = ++sequence;
    PS_ASSERT_OK(single.PushDense("w", gw, ctx));
  }
  EXPECT_EQ(Snap(batched, {{"w", 10}}), Snap(single, {{"w", 10}}));
  EXPECT_EQ(StatsOf(batched, "adam").rows_pushed, 18u);
}

TEST(ParameterServerTest, PushBatchWithOneBadPartChangesNothingAnywhere) {
  ParameterServerOptions o;
  o.max_keys_per_request = 8;
  ParameterServer ps(o);
  PS_ASSERT_OK(ps.CreateTable(Table("a", 2, OptimizerKind::kAdagrad, 0.1f)));
  PS_ASSERT_OK(ps.CreateTable(Table("b", 3, OptimizerKind::kSgd, 0.1f)));
  PS_ASSERT_OK(ps.CreateDense(Dense("w", 4, OptimizerKind::kSgd, 0.1f)));
  PS_ASSERT_OK(ps.Push("a", std::vector<uint64_t>{1}, Grads(2, 0), {}));
  const Snapshot before = Snap(ps, {{"w", 4}});

  const std::vector<uint64_t> ka = {1, 2}, kb = {5}, dup = {5, 5};
  const std::vector<float> ga = Grads(4, 1), gb = Grads(3, 2), gw = Grads(4, 3);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> gb_nan = gb;
  gb_nan[1] = nan;
  std::vector<float> gw_nan = gw;
  gw_nan[3] = nan;
  std::vector<uint64_t> many_keys(9);
  for (size_t i = 0; i < many_keys.size(); ++i) many_keys[i] = 100 + i;
  const std::vector<float> many_grads(27, 0.1f), dup_grads = Grads(6, 4);
  struct Case {
    const char* what;
    std::vector<TablePushPart> tables;
    std::vector<DensePushPart> dense;
    float scale;
    absl::StatusCode code;
    std::string names;  // the error must name the part
  };
  const std::vector<Case> cases = {
      {"unknown table",
       {{"a", ka, ga, 1}, {"zz", kb, gb, 2}},
       {{"w", gw, 3}},
       1,
       absl::StatusCode::kNotFound,
       "'zz'"},
      {"wrong dim",
       {{"a", ka, ga, 1}, {"b", kb, ga, 2}},
       {{"w", gw, 3}},
       1,
       absl::StatusCode::kInvalidArgument,
       "'b'"},
      {"NaN gradient",
       {{"a", ka, ga, 1}, {"b", kb, gb_nan, 2}},
       {{"w", gw, 3}},
       1,
       absl::StatusCode::kInvalidArgument,
       "'b'"},
      {"duplicate keys",
       {{"a", ka, ga, 1}, {"b", dup, dup_grads, 2}},
       {{"w", gw, 3}},
       1,
       absl::StatusCode::kInvalidArgument,
       "'b'"},
      {"too many keys",
       {{"a", ka, ga, 1}, {"b", many_keys, many_grads, 2}},
       {{"w", gw, 3}},
       1,
       absl::StatusCode::kResourceExhausted,
       "'b'"},
      {"unknown dense",
       {{"a", ka, ga, 1}},
       {{"w", gw, 3}, {"v", gw, 4}},
       1,
       absl::StatusCode::kNotFound,
       "'v'"},
      {"dense size",
       {{"a", ka, ga, 1}},
       {{"w", gb, 3}},
       1,
       absl::StatusCode::kInvalidArgument,
       "'w'"},
      {"dense NaN",
       {{"a", ka, ga, 1}},
       {{"w", gw_nan, 3}},
       1,
       absl::StatusCode::kInvalidArgument,
       "'w'"},
      {"sequence twice",
       {{"a", ka, ga, 1}, {"b", kb, gb, 3}},
       {{"w", gw, 3}},
       1,
       absl::StatusCode::kInvalidArgument,
       "'b'"},
      {"scale 0",
       {{"a", ka, ga, 1}},
       {{"w", gw, 3}},
       0,
       absl::StatusCode::kInvalidArgument,
       "learning_rate_scale"},
      {"negative scale",
       {{"a", ka, ga, 1}},
       {{"w", gw, 3}},
       -0.5f,
       absl::StatusCode::kInvalidArgument,
       "learning_rate_scale"},
      {"NaN scale",
       {{"a", ka, ga, 1}},
       {{"w", gw, 3}},
       nan,
       absl::StatusCode::kInvalidArgument,
       "learning_rate_scale"},
      {"infinite scale",
       {{"a", ka, ga, 1}},
       {{"w", gw, 3}},
       std::numeric_limits<float>::infinity(),
       absl::StatusCode::kInvalidArgument,
       "learning_rate_scale"},
  };
  for (const Case& c : cases) {
    const PushContext ctx{.client_id = 9, .step = 3, .learning_rate_scale = c.scale};
    absl::StatusOr<PushBatchOutcome> out = ps.PushBatch(c.tables, c.dense, ctx);
    EXPECT_EQ(out.status().code(), c.code) << c.what << ": " << out.status();
    EXPECT_NE(out.status().message().find(c.names), std::string::npos)
        << c.what << ": " << out.status();
    EXPECT_EQ(Snap(ps, {{"w", 4}}), before) << c.what;
  }
  EXPECT_EQ(StatsOf(ps, "a").rows_pushed, 1u);
  // No sequence was consumed: the good parts apply now under the same numbers.
  absl::StatusOr<PushBatchOutcome> good =
      ps.PushBatch({{"a", ka, ga, 1}, {"b", kb, gb, 2}}, {{"w", gw, 3}}, {.client_id = 9});
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->tables, std::vector<PushOutcome>(2, PushOutcome::kApplied));
  EXPECT_EQ(good->dense, std::vector<PushOutcome>(1, PushOutcome::kApplied));
  EXPECT_NE(Snap(ps, {{"w", 4}}), before);
}

TEST(ParameterServerTest, RetriedPushBatchAppliesEachPartOnce) {
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(SgdTable("a", 2)));
  PS_ASSERT_OK(ps.CreateTable(SgdTable("b", 1)));
  PS_ASSERT_OK(ps.CreateDense(Dense("w", 2, OptimizerKind::kSgd, 1)));
  const std::vector<uint64_t> ka = {1, 2}, kb = {3};
  const std::vector<float> ga(4, -1.0f), gb(1, -1.0f), gw(2, -1.0f);
  const std::vector<TablePushPart> tables = {{"a", ka, ga, 10}, {"b", kb, gb, 11}};
  const std::vector<DensePushPart> dense = {{"w", gw, 12}};
  const PushContext ctx{.client_id = 77, .step = 1};
  ASSERT_TRUE(ps.PushBatch(tables, dense, ctx).ok());
  const Snapshot once = Snap(ps, {{"w", 2}});
  absl::StatusOr<PushBatchOutcome> again = ps.PushBatch(tables, dense, ctx);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->tables, std::vector<PushOutcome>(2, PushOutcome::kDuplicate));
  EXPECT_EQ(again->dense, std::vector<PushOutcome>(1, PushOutcome::kDuplicate));
  EXPECT_EQ(Snap(ps, {{"w", 2}}), once);
  EXPECT_EQ(PullOrDie(ps, "a", ka, 2), std::vector<float>(4, 1.0f));
  EXPECT_EQ(StatsOf(ps, "a").duplicate_pushes, 1u);
  // A batch mixing an applied part and a new one applies only the new one.
  absl::StatusOr<PushBatchOutcome> mixed =
      ps.PushBatch({{"a", ka, ga, 10}, {"a", ka, ga, 13}}, {}, ctx);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->tables,
            (std::vector<PushOutcome>{PushOutcome::kDuplicate, PushOutcome::kApplied}));
  EXPECT_EQ(PullOrDie(ps, "a", ka, 2), std::vector<float>(4, 2.0f));
}

TEST(ParameterServerTest, PushBatchStoppedByTheBudgetKeepsEarlierPartsAndARetryAppliesTheRest) {
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(SgdTable("a", 2)));
  TableOptions small = SgdTable("b", 2);
  small.memory_budget_bytes = 2 * 2 * sizeof(float);  // two rows
  small.ttl_steps = 1;
  PS_ASSERT_OK(ps.CreateTable(small));
  PS_ASSERT_OK(ps.Push("b", std::vector<uint64_t>{100, 101}, std::vector<float>(4, -1.0f), {}));
  const std::vector<uint64_t> ka = {1}, kb = {102};
  const std::vector<float> g(2, -1.0f);
  const std::vector<TablePushPart> tables = {{"a", ka, g, 1}, {"b", kb, g, 2}};
  const PushContext ctx{.client_id = 5, .step = 5};
  PS_EXPECT_CODE(ps.PushBatch(tables, {}, ctx), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(PullOrDie(ps, "a", ka, 2), std::vector<float>(2, 1.0f));  // applied before b
  EXPECT_EQ(ps.Evict(5), 2u);  // b's rows are past their TTL: room again
  absl::StatusOr<PushBatchOutcome> retry = ps.PushBatch(tables, {}, ctx);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->tables,
            (std::vector<PushOutcome>{PushOutcome::kDuplicate, PushOutcome::kApplied}));
  EXPECT_EQ(PullOrDie(ps, "a", ka, 2), std::vector<float>(2, 1.0f));
  EXPECT_EQ(PullOrDie(ps, "b", kb, 2), std::vector<float>(2, 1.0f));
}

TEST(ParameterServerTest, SgdLearningRateScaleIsExactlyLrTimesScaleTimesGradient) {
  ParameterServer ps({});
  const float lr = 0.1f;
  PS_ASSERT_OK(ps.CreateTable(SgdTable("t", 2, lr)));
  PS_ASSERT_OK(ps.CreateDense(Dense("w", 2, OptimizerKind::kSgd, lr)));
  const std::vector<uint64_t> key = {4};
  float w0 = 0, w1 = 0, d0 = 0.25f, d1 = 0.25f;
  const float scales[] = {0.37f, 1.0f, 2.5f, 1e-3f};
  for (float s : scales) {
    const std::vector<float> g = {1.3f, -0.7f};
    PS_ASSERT_OK(ps.Push("t", key, g, {.learning_rate_scale = s}));
    PS_ASSERT_OK(ps.PushDense("w", g, {.learning_rate_scale = s}));
    const float eff = lr * s;
    w0 -= eff * g[0];
    w1 -= eff * g[1];
    d0 -= eff * g[0];
    d1 -= eff * g[1];
  }
  EXPECT_EQ(PullOrDie(ps, "t", key, 2), (std::vector<float>{w0, w1}));
  EXPECT_EQ(PullDense(ps, "w", 2), (std::vector<float>{d0, d1}));
}

TEST(ParameterServerTest, BadLearningRateScaleIsInvalidArgumentAndChangesNothing) {
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(SgdTable("t", 1)));
  PS_ASSERT_OK(ps.CreateDense(Dense("w", 1, OptimizerKind::kSgd, 1)));
  const std::vector<uint64_t> key = {1};
  const std::vector<float> g = {1.0f};
  for (float s : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::infinity()}) {
    const PushContext ctx{.client_id = 3, .sequence = 1, .learning_rate_scale = s};
    PS_EXPECT_CODE(ps.Push("t", key, g, ctx), absl::StatusCode::kInvalidArgument);
    PS_EXPECT_CODE(ps.PushDense("w", g, ctx), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(StatsOf(ps, "t").rows, 0u);
  EXPECT_EQ(PullDense(ps, "w", 1), std::vector<float>{0.25f});
  // The sequence was not consumed.
  absl::StatusOr<PushOutcome> ok = ps.Push("t", key, g, {.client_id = 3, .sequence = 1});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, PushOutcome::kApplied);
}

// Every optimizer: pushes scaled by s equal pushes to a twin configured with
// learning_rate * s (weights and slots, exactly), through Push, PushBatch
// and PushDense; and differ from unscaled pushes, so the scale is applied.
class LearningRateScaleTest : public ::testing::TestWithParam<OptimizerKind> {};

TEST_P(LearningRateScaleTest, ScaledPushEqualsATwinWithTheScaledLearningRate) {
  const OptimizerKind kind = GetParam();
  const float lr = 0.05f, scale = 0.3f;
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(Table("scaled", 3, kind, lr)));
  PS_ASSERT_OK(ps.CreateTable(Table("batched", 3, kind, lr)));
  PS_ASSERT_OK(ps.CreateTable(Table("twin", 3, kind, lr * scale)));
  PS_ASSERT_OK(ps.CreateTable(Table("unscaled", 3, kind, lr)));
  PS_ASSERT_OK(ps.CreateDense(Dense("d_scaled", 5, kind, lr)));
  PS_ASSERT_OK(ps.CreateDense(Dense("d_batched", 5, kind, lr)));
  PS_ASSERT_OK(ps.CreateDense(Dense("d_twin", 5, kind, lr * scale)));
  const PushContext scaled{.learning_rate_scale = scale};
  for (int step = 0; step < 8; ++step) {
    const std::vector<uint64_t> keys = {1, 2, static_cast<uint64_t>(3 + step % 3)};
    const std::vector<float> g = Grads(9, step), gd = Grads(5, 50 + step);
    PS_ASSERT_OK(ps.Push("scaled", keys, g, scaled));
    PS_ASSERT_OK(ps.PushBatch({{"batched", keys, g}}, {{"d_batched", gd}}, scaled));
    PS_ASSERT_OK(ps.Push("twin", keys, g, {}));
    PS_ASSERT_OK(ps.Push("unscaled", keys, g, {}));
    PS_ASSERT_OK(ps.PushDense("d_scaled", gd, scaled));
    PS_ASSERT_OK(ps.PushDense("d_twin", gd, {}));
  }
  const auto twin = Dump(ps, "twin");
  ASSERT_EQ(twin.size(), 5u);
  EXPECT_EQ(Dump(ps, "scaled"), twin);
  EXPECT_EQ(Dump(ps, "batched"), twin);
  EXPECT_NE(Dump(ps, "unscaled"), twin);
  const std::vector<float> d_twin = PullDense(ps, "d_twin", 5);
  EXPECT_EQ(PullDense(ps, "d_scaled", 5), d_twin);
  EXPECT_EQ(PullDense(ps, "d_batched", 5), d_twin);
  EXPECT_NE(d_twin, std::vector<float>(5, 0.25f));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, LearningRateScaleTest,
                         ::testing::Values(OptimizerKind::kSgd, OptimizerKind::kAdagrad,
                                           OptimizerKind::kAdam, OptimizerKind::kFtrl),
                         [](const ::testing::TestParamInfo<OptimizerKind>& info) -> std::string {
                           switch (info.param) {
                             case OptimizerKind::kSgd:
                               return "Sgd";
                             case OptimizerKind::kAdagrad:
                               return "Adagrad";
                             case OptimizerKind::kAdam:
                               return "Adam";
                             case OptimizerKind::kFtrl:
                               return "Ftrl";
                           }
                           return "?";
                         });

}  // namespace
}  // namespace brook::ps
