// Behaviour of ParameterServer tables and dense variables: creation,
// pull/push semantics, admission, eviction, bad gradients, request
// validation, memory budget, dedup of retried pushes.
#include "ps/parameter_server.h"

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ps/initializer.h"
#include "tests/unit/ps/ps_test_util.h"

namespace brook::ps {
namespace {

using test::Dump;
using test::FakeClock;
using test::PullOrDie;
using test::PushAll;
using test::SgdTable;
using test::StatsOf;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

std::vector<float> Initial(const TableOptions& t, uint64_t key) {
  std::vector<float> v(t.dim);
  Initializer(t.initializer, t.seed).Fill(key, absl::MakeSpan(v));
  return v;
}

TEST(ParameterServerTest, CreateTableIsIdempotentAndChecksOptions) {
  ParameterServer ps({});
  TableOptions t = SgdTable("emb", 4);
  PS_ASSERT_OK(ps.CreateTable(t));
  PS_ASSERT_OK(ps.CreateTable(t));  // re-declaration by a restarted trainer
  TableOptions other = t;
  other.dim = 8;
  PS_EXPECT_CODE(ps.CreateTable(other), absl::StatusCode::kAlreadyExists);
  // The error names what differs and what to do (a standalone run reusing
  // an earlier run's table saw only "exists with different options").
  other = t;
  other.optimizer.kind = OptimizerKind::kAdagrad;
  other.admission_min_count = 2;
  const absl::Status refused = ps.CreateTable(other);
  EXPECT_NE(refused.message().find("(optimizer, admission_min_count)"), std::string::npos)
      << refused;
  EXPECT_NE(refused.message().find("Drop it"), std::string::npos) << refused;
  TableOptions bad = t;
  bad.name = "bad";
  bad.dim = 0;
  PS_EXPECT_CODE(ps.CreateTable(bad), kInvalid);
  PS_EXPECT_CODE(ps.DropTable("nope"), absl::StatusCode::kNotFound);
  PS_ASSERT_OK(ps.DropTable("emb"));
  std::vector<float> out(4);
  PS_EXPECT_CODE(ps.Pull("emb", std::vector<uint64_t>{1}, absl::MakeSpan(out)),
                 absl::StatusCode::kNotFound);
}

TEST(ParameterServerTest, PullOfUnseenKeysReturnsInitialValueWithoutCreatingRows) {
  ParameterServer ps({});
  TableOptions t;
  t.name = "emb";
  t.dim = 8;
  t.seed = 77;
  t.initializer.kind = InitializerKind::kTruncatedNormal;
  PS_ASSERT_OK(ps.CreateTable(t));
  const std::vector<uint64_t> keys = {0, 1, ~0ull, 1ull << 63, 123456789};
  const auto out = PullOrDie(ps, "emb", keys, 8);
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(std::vector<float>(out.begin() + i * 8, out.begin() + (i + 1) * 8),
              Initial(t, keys[i]));
  }
  // Same key, another PS: same initial row.
  ParameterServer other({});
  PS_ASSERT_OK(other.CreateTable(t));
  EXPECT_EQ(PullOrDie(other, "emb", keys, 8), out);
  const TableStats s = StatsOf(ps, "emb");
  EXPECT_EQ(s.rows, 0u);
  EXPECT_EQ(s.rows_pulled, keys.size());
}

TEST(ParameterServerTest, PushCreatesRowFromInitialValueAndApplies) {
  ParameterServer ps({});
  TableOptions t = SgdTable("emb", 3, 0.5f);
  t.initializer.kind = InitializerKind::kUniform;
  t.seed = 3;
  PS_ASSERT_OK(ps.CreateTable(t));
  const auto before = PullOrDie(ps, "emb", {10, 20}, 3);
  auto r = PushAll(ps, "emb", {20, 10}, {1, 2, 3, -1, -2, -3});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, PushOutcome::kApplied);
  const auto after = PullOrDie(ps, "emb", {10, 20}, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(after[i], before[i] - 0.5f * -(i + 1));         // key 10
    EXPECT_FLOAT_EQ(after[3 + i], before[3 + i] - 0.5f * (i + 1));  // key 20
  }
  // Duplicate keys in a pull are fine.
  const auto twice = PullOrDie(ps, "emb", {10, 10}, 3);
  EXPECT_EQ(std::vector<float>(twice.begin(), twice.begin() + 3),
            std::vector<float>(twice.begin() + 3, twice.end()));
  const TableStats s = StatsOf(ps, "emb");
  EXPECT_EQ(s.rows, 2u);
  EXPECT_EQ(s.admissions, 2u);
  EXPECT_EQ(s.rows_pushed, 2u);
}

TEST(ParameterServerTest, EmptyRequestsAreFine) {
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(SgdTable("emb", 2)));
  std::vector<float> none;
  PS_ASSERT_OK(ps.Pull("emb", {}, absl::MakeSpan(none)));
  auto r = ps.Push("emb", {}, {}, {});
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(ParameterServerTest, AdmissionCountsPushesBeforeCreatingRow) {
  ParameterServer ps({});
  TableOptions t = SgdTable("emb", 2);
  t.initializer.kind = InitializerKind::kConstant;
  t.initializer.value = 0.5f;
  t.admission_min_count = 3;
  PS_ASSERT_OK(ps.CreateTable(t));
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(PushAll(ps, "emb", {7, 8}, {1, 1, 1, 1}).ok());
    EXPECT_EQ(PullOrDie(ps, "emb", {7}, 2), std::vector<float>({0.5f, 0.5f}));
  }
  TableStats s = StatsOf(ps, "emb");
  EXPECT_EQ(s.rows, 0u);
  EXPECT_EQ(s.pending_keys, 2u);
  // The third push admits key 7 and applies its gradient; key 8 waits.
  ASSERT_TRUE(PushAll(ps, "emb", {7}, {1, 2}).ok());
  EXPECT_EQ(PullOrDie(ps, "emb", {7, 8}, 2), std::vector<float>({-0.5f, -1.5f, 0.5f, 0.5f}));
  s = StatsOf(ps, "emb");
  EXPECT_EQ(s.rows, 1u);
  EXPECT_EQ(s.pending_keys, 1u);
  EXPECT_EQ(s.admissions, 1u);
  // Once admitted, every push applies.
  ASSERT_TRUE(PushAll(ps, "emb", {7}, {1, 1}).ok());
  EXPECT_EQ(PullOrDie(ps, "emb", {7}, 2), std::vector<float>({-1.5f, -2.5f}));
}

TEST(ParameterServerTest, PendingKeysPastTheBoundAreForgottenByDecay) {
  ParameterServer ps({});
  TableOptions t = SgdTable("emb", 1);
  t.admission_min_count = 4;
  t.max_pending_keys = 2048;  // well under the 20000 keys pushed
  PS_ASSERT_OK(ps.CreateTable(t));
  std::vector<uint64_t> keys(20000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  ASSERT_TRUE(PushAll(ps, "emb", keys, std::vector<float>(keys.size(), 1.0f)).ok());
  const TableStats s = StatsOf(ps, "emb");
  EXPECT_LE(s.pending_keys, t.max_pending_keys);
  EXPECT_GT(s.pending_forgotten, 0u);
  EXPECT_EQ(s.pending_keys + s.pending_forgotten, keys.size());
  EXPECT_EQ(s.rows, 0u);
}

TEST(ParameterServerTest, EvictionByStepsDropsStaleRows) {
  ParameterServer ps({});
  TableOptions t = SgdTable("emb", 2);
  t.initializer.kind = InitializerKind::kUniform;
  t.ttl_steps = 10;
  PS_ASSERT_OK(ps.CreateTable(t));
  ASSERT_TRUE(PushAll(ps, "emb", {1}, {1, 1}, {.step = 100}).ok());
  ASSERT_TRUE(PushAll(ps, "emb", {2}, {1, 1}, {.step = 105}).ok());
  EXPECT_EQ(ps.Evict(109), 0u);
  EXPECT_EQ(ps.Evict(110), 1u);                            // key 1: 10 steps without update
  EXPECT_EQ(PullOrDie(ps, "emb", {1}, 2), Initial(t, 1));  // back to its initial value
  EXPECT_NE(PullOrDie(ps, "emb", {2}, 2), Initial(t, 2));
  EXPECT_EQ(ps.Evict(115), 1u);
  TableStats s = StatsOf(ps, "emb");
  EXPECT_EQ(s.rows, 0u);
  EXPECT_EQ(s.evictions, 2u);
  // Freed rows are reused; an evicted key re-enters as a new row.
  ASSERT_TRUE(PushAll(ps, "emb", {1}, {0, 0}, {.step = 120}).ok());
  EXPECT_EQ(PullOrDie(ps, "emb", {1}, 2), Initial(t, 1));
  s = StatsOf(ps, "emb");
  EXPECT_EQ(s.rows, 1u);
  EXPECT_EQ(s.admissions, 3u);
}

TEST(ParameterServerTest, EvictionBySecondsUsesInjectedClock) {
  FakeClock clock;
  ParameterServerOptions o;
  o.now = clock.AsFunction();
  ParameterServer ps(o);
  TableOptions t = SgdTable("emb", 1);
  t.ttl_seconds = 60;
  PS_ASSERT_OK(ps.CreateTable(t));
  ASSERT_TRUE(PushAll(ps, "emb", {1}, {1}).ok());
  clock.Set(clock.Now() + 30);
  ASSERT_TRUE(PushAll(ps, "emb", {2}, {1}).ok());
  clock.Set(clock.Now() + 29);
  EXPECT_EQ(ps.Evict(0), 0u);
  clock.Set(clock.Now() + 1);  // key 1 idle for 60 s
  EXPECT_EQ(ps.Evict(0), 1u);
  EXPECT_EQ(PullOrDie(ps, "emb", {1, 2}, 1), std::vector<float>({0.0f, -1.0f}));
  clock.Set(clock.Now() + 30);
  EXPECT_EQ(ps.Evict(0), 1u);
  EXPECT_EQ(StatsOf(ps, "emb").evictions, 2u);
}

TEST(ParameterServerTest, EvictionUpdatesTouchTime) {
  FakeClock clock;
  ParameterServerOptions o;
  o.now = clock.AsFunction();
  ParameterServer ps(o);
  TableOptions t = SgdTable("emb", 1);
  t.ttl_seconds = 10;
  PS_ASSERT_OK(ps.CreateTable(t));
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(PushAll(ps, "emb", {1}, {1}).ok());
    clock.Set(clock.Now() + 9);
    EXPECT_EQ(ps.Evict(0), 0u);
  }
  EXPECT_EQ(PullOrDie(ps, "emb", {1}, 1), std::vector<float>({-5.0f}));
}

TEST(ParameterServerTest, NonFiniteGradientsRejectWholePush) {
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(SgdTable("emb", 2)));
  ASSERT_TRUE(PushAll(ps, "emb", {1, 2}, {1, 1, 1, 1}).ok());
  const auto before = Dump(ps, "emb");
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    PS_EXPECT_CODE(PushAll(ps, "emb", {1, 3}, {1, 1, 1, bad}), kInvalid);
  }
  EXPECT_EQ(Dump(ps, "emb"), before);
  EXPECT_EQ(StatsOf(ps, "emb").rejected_gradients, 3u);
}

TEST(ParameterServerTest, NonFiniteGradientsZeroedUnderZeroPolicy) {
  ParameterServer ps({});
  TableOptions t = SgdTable("emb", 4);
  t.bad_gradient = BadGradientPolicy::kZero;
  PS_ASSERT_OK(ps.CreateTable(t));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(PushAll(ps, "emb", {1, 2}, {1, nan, inf, 2, -inf, 1, 1, 1}).ok());
  EXPECT_EQ(PullOrDie(ps, "emb", {1, 2}, 4), std::vector<float>({-1, 0, 0, -2, 0, -1, -1, -1}));
  EXPECT_EQ(StatsOf(ps, "emb").rejected_gradients, 3u);

  DenseOptions d;
  d.name = "d";
  d.shape = {3};
  d.initializer.kind = InitializerKind::kZeros;
  d.optimizer.learning_rate = 1;
  d.bad_gradient = BadGradientPolicy::kZero;
  PS_ASSERT_OK(ps.CreateDense(d));
  ASSERT_TRUE(ps.PushDense("d", std::vector<float>{nan, 1, inf}, {}).ok());
  std::vector<float> out(3);
  PS_ASSERT_OK(ps.PullDense("d", absl::MakeSpan(out)));
  EXPECT_EQ(out, std::vector<float>({0, -1, 0}));
  EXPECT_EQ(ps.Stats().dense[0].rejected_gradients, 2u);
}

TEST(ParameterServerTest, GradientClipBoundsEachValue) {
  ParameterServer ps({});
  TableOptions t = SgdTable("emb", 3);
  t.gradient_clip = 0.5f;
  PS_ASSERT_OK(ps.CreateTable(t));
  ASSERT_TRUE(PushAll(ps, "emb", {1}, {3, -7, 0.25f}).ok());
  EXPECT_EQ(PullOrDie(ps, "emb", {1}, 3), std::vector<float>({-0.5f, 0.5f, -0.25f}));
}

TEST(ParameterServerTest, BadRequestsLeaveStateUnchanged) {
  ParameterServerOptions o;
  o.max_keys_per_request = 8;
  ParameterServer ps(o);
  TableOptions t = SgdTable("emb", 2);
  t.initializer.kind = InitializerKind::kUniform;
  t.optimizer.kind = OptimizerKind::kAdagrad;
  t.admission_min_count = 2;
  // Room for 4 rows of 2 weights + 2 accumulators.
  t.memory_budget_bytes = 4 * 4 * sizeof(float);
  PS_ASSERT_OK(ps.CreateTable(t));
  const PushContext ctx{.client_id = 9, .sequence = 1};
  ASSERT_TRUE(PushAll(ps, "emb", {1, 2, 3}, {1, 1, 1, 1, 1, 1}, ctx).ok());
  ASSERT_TRUE(
      PushAll(ps, "emb", {1, 2, 3, 4}, {1, 1, 1, 1, 1, 1, 1, 1}, {.client_id = 9, .sequence = 2})
          .ok());  // admits 1, 2, 3; key 4 pending
  const std::vector<uint64_t> all = {1, 2, 3, 4, 5, 6, 7};
  const auto pulled = PullOrDie(ps, "emb", all, 2);
  const auto dumped = Dump(ps, "emb");
  const TableStats stats = StatsOf(ps, "emb");
  ASSERT_EQ(stats.rows, 3u);

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const PushContext next{.client_id = 9, .sequence = 3};
  // Wrong gradient size.
  PS_EXPECT_CODE(ps.Push("emb", std::vector<uint64_t>{1, 2}, std::vector<float>{1, 1, 1}, next),
                 kInvalid);
  // Duplicate keys.
  PS_EXPECT_CODE(ps.Push("emb", std::vector<uint64_t>{5, 1, 5}, std::vector<float>(6, 1), next),
                 kInvalid);
  // NaN (reject policy).
  PS_EXPECT_CODE(
      ps.Push("emb", std::vector<uint64_t>{1, 5}, std::vector<float>{1, 1, nan, 1}, next),
      kInvalid);
  // Over the key limit.
  PS_EXPECT_CODE(ps.Push("emb", std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9},
                         std::vector<float>(18, 1), next),
                 absl::StatusCode::kResourceExhausted);
  std::vector<float> big(18);
  PS_EXPECT_CODE(
      ps.Pull("emb", std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}, absl::MakeSpan(big)),
      absl::StatusCode::kResourceExhausted);
  // Wrong pull buffer size.
  std::vector<float> small(3);
  PS_EXPECT_CODE(ps.Pull("emb", std::vector<uint64_t>{1, 2}, absl::MakeSpan(small)), kInvalid);
  // Unknown table.
  PS_EXPECT_CODE(ps.Push("nope", std::vector<uint64_t>{1}, std::vector<float>{1, 1}, next),
                 absl::StatusCode::kNotFound);
  // Budget: after one more push of key 5, keys 4 and 5 are each one push
  // from admission. A push of {1, 4, 5, 6} would create 2 rows (4 and 5; 6
  // only counts) with room for 1: refused, and nothing changes, not even
  // the pending counts or key 1's row.
  ASSERT_TRUE(PushAll(ps, "emb", {5}, {1, 1}, {.client_id = 10, .sequence = 1}).ok());
  const auto dumped2 = Dump(ps, "emb");
  const auto pulled2 = PullOrDie(ps, "emb", all, 2);
  PS_EXPECT_CODE(ps.Push("emb", std::vector<uint64_t>{1, 4, 5, 6}, std::vector<float>(8, 1), next),
                 absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Dump(ps, "emb"), dumped2);
  EXPECT_EQ(PullOrDie(ps, "emb", all, 2), pulled2);
  EXPECT_EQ(StatsOf(ps, "emb").budget_rejections, 1u);
  EXPECT_EQ(StatsOf(ps, "emb").pending_keys, 2u);  // 4 and 5, counts unchanged

  // Before the budget push nothing had changed either.
  EXPECT_EQ(std::vector<float>(pulled.begin(), pulled.end()), pulled2);
  for (const auto& [key, row] : dumped) EXPECT_EQ(dumped2.at(key), row);

  // None of the refused pushes consumed sequence 3.
  auto r = ps.Push("emb", std::vector<uint64_t>{1}, std::vector<float>{1, 1}, next);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, PushOutcome::kApplied);
  // A push that fits the budget still works: 4 is admitted (4th row).
  ASSERT_TRUE(PushAll(ps, "emb", {4}, {1, 1}).ok());
  EXPECT_EQ(StatsOf(ps, "emb").rows, 4u);
  PS_EXPECT_CODE(PushAll(ps, "emb", {5}, {1, 1}), absl::StatusCode::kResourceExhausted);
}

TEST(ParameterServerTest, DuplicatePushIsAcknowledgedNotApplied) {
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(SgdTable("emb", 1)));
  const PushContext ctx{.client_id = 42, .sequence = 7};
  auto r = PushAll(ps, "emb", {1}, {-1}, ctx);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, PushOutcome::kApplied);
  r = PushAll(ps, "emb", {1}, {-1}, ctx);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, PushOutcome::kDuplicate);
  EXPECT_EQ(PullOrDie(ps, "emb", {1}, 1), std::vector<float>({1.0f}));
  EXPECT_EQ(StatsOf(ps, "emb").duplicate_pushes, 1u);
  // Another client with the same sequence is a different push.
  r = PushAll(ps, "emb", {1}, {-1}, {.client_id = 43, .sequence = 7});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, PushOutcome::kApplied);
  // client_id 0 disables dedup.
  for (int i = 0; i < 2; ++i) {
    r = PushAll(ps, "emb", {1}, {-1}, {.client_id = 0, .sequence = 7});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, PushOutcome::kApplied);
  }
  EXPECT_EQ(PullOrDie(ps, "emb", {1}, 1), std::vector<float>({4.0f}));
}

TEST(ParameterServerTest, SequencesAreSharedAcrossTablesAndDense) {
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(SgdTable("a", 1)));
  PS_ASSERT_OK(ps.CreateTable(SgdTable("b", 1)));
  DenseOptions d;
  d.name = "d";
  d.shape = {1};
  PS_ASSERT_OK(ps.CreateDense(d));
  const PushContext ctx{.client_id = 5, .sequence = 1};
  ASSERT_EQ(*PushAll(ps, "a", {1}, {-1}, ctx), PushOutcome::kApplied);
  EXPECT_EQ(*PushAll(ps, "b", {1}, {-1}, ctx), PushOutcome::kDuplicate);
  EXPECT_EQ(*ps.PushDense("d", std::vector<float>{1}, ctx), PushOutcome::kDuplicate);
  EXPECT_EQ(*ps.PushDense("d", std::vector<float>{1}, {.client_id = 5, .sequence = 2}),
            PushOutcome::kApplied);
  EXPECT_EQ(*ps.PushDense("d", std::vector<float>{1}, {.client_id = 5, .sequence = 2}),
            PushOutcome::kDuplicate);
  EXPECT_EQ(PullOrDie(ps, "b", {1}, 1), std::vector<float>({0.0f}));
}

TEST(ParameterServerTest, SequenceOlderThanWindowIsRefused) {
  ParameterServerOptions o;
  o.dedup_window = 64;
  ParameterServer ps(o);
  PS_ASSERT_OK(ps.CreateTable(SgdTable("emb", 1)));
  auto push = [&](uint64_t seq) {
    return PushAll(ps, "emb", {1}, {-1}, {.client_id = 1, .sequence = seq});
  };
  ASSERT_EQ(*push(10), PushOutcome::kApplied);
  ASSERT_EQ(*push(200), PushOutcome::kApplied);
  PS_EXPECT_CODE(push(10), absl::StatusCode::kFailedPrecondition);   // applied, but forgotten
  PS_EXPECT_CODE(push(136), absl::StatusCode::kFailedPrecondition);  // 200 - 136 = 64
  EXPECT_EQ(*push(137), PushOutcome::kApplied);  // in the window, never seen: out of order is fine
  EXPECT_EQ(*push(137), PushOutcome::kDuplicate);
  EXPECT_EQ(*push(199), PushOutcome::kApplied);
  EXPECT_EQ(*push(200), PushOutcome::kDuplicate);
  // A big jump forgets everything before it.
  ASSERT_EQ(*push(100000), PushOutcome::kApplied);
  PS_EXPECT_CODE(push(200), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*push(99999), PushOutcome::kApplied);
  EXPECT_EQ(PullOrDie(ps, "emb", {1}, 1), std::vector<float>({6.0f}));
}

// An ended job's tables go together: every table and dense variable named
// with its prefix, none of another job's.
TEST(ParameterServerTest, DropTablesWithPrefixDropsOnlyThatJobsTablesAndDense) {
  ParameterServer ps{ParameterServerOptions{}};
  for (const char* name : {"a-1/emb", "a-1/wide", "a-10/emb", "b-1/emb"}) {
    PS_ASSERT_OK(ps.CreateTable(SgdTable(name, 4)));
  }
  DenseOptions d;
  d.shape = {2};
  for (const char* name : {"a-1/deep/w0", "b-1/deep/w0"}) {
    d.name = name;
    PS_ASSERT_OK(ps.CreateDense(d));
  }
  PS_EXPECT_CODE(ps.DropTablesWithPrefix(""), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<DroppedTables> dropped = ps.DropTablesWithPrefix("a-1/");
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(dropped->tables, 2u);
  EXPECT_EQ(dropped->dense, 1u);
  const ServerStats s = ps.Stats();
  std::vector<std::string> left;
  for (const TableStats& t : s.tables) left.push_back(t.name);
  for (const DenseStats& v : s.dense) left.push_back(v.name);
  EXPECT_EQ(left, (std::vector<std::string>{"a-10/emb", "b-1/emb", "b-1/deep/w0"}));
  // Again: nothing left to drop, not an error.
  dropped = ps.DropTablesWithPrefix("a-1/");
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped->tables + dropped->dense, 0u);
}

TEST(ParameterServerTest, DenseVariablesPullPushAndValidate) {
  ParameterServerOptions o;
  o.max_keys_per_request = 100;
  ParameterServer ps(o);
  DenseOptions d;
  d.name = "w";
  d.shape = {2, 2};
  d.seed = 1;
  d.initializer.kind = InitializerKind::kUniform;
  d.optimizer.learning_rate = 0.5f;
  PS_ASSERT_OK(ps.CreateDense(d));
  PS_ASSERT_OK(ps.CreateDense(d));
  DenseOptions same_seed = d;
  same_seed.name = "w2";
  PS_ASSERT_OK(ps.CreateDense(same_seed));
  std::vector<float> w(4), w2(4);
  PS_ASSERT_OK(ps.PullDense("w", absl::MakeSpan(w)));
  PS_ASSERT_OK(ps.PullDense("w2", absl::MakeSpan(w2)));
  // A function of the seed alone, not of the name on the PS (which holds the
  // job id): the trainer gives each variable a seed of its own.
  EXPECT_EQ(w, w2);
  DenseOptions other_seed = d;
  other_seed.name = "w3";
  other_seed.seed = 2;
  PS_ASSERT_OK(ps.CreateDense(other_seed));
  std::vector<float> w3(4);
  PS_ASSERT_OK(ps.PullDense("w3", absl::MakeSpan(w3)));
  EXPECT_NE(w, w3);
  PS_ASSERT_OK(ps.DropDense("w3"));
  DenseOptions changed = d;
  changed.shape = {4};
  PS_EXPECT_CODE(ps.CreateDense(changed), absl::StatusCode::kAlreadyExists);
  DenseOptions huge = d;
  huge.name = "huge";
  huge.shape = {101};
  PS_EXPECT_CODE(ps.CreateDense(huge), kInvalid);

  ASSERT_TRUE(ps.PushDense("w", std::vector<float>{1, 2, 3, 4}, {}).ok());
  std::vector<float> after(4);
  PS_ASSERT_OK(ps.PullDense("w", absl::MakeSpan(after)));
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(after[i], w[i] - 0.5f * (i + 1));

  PS_EXPECT_CODE(ps.PushDense("w", std::vector<float>{1, 2, 3}, {}), kInvalid);
  PS_EXPECT_CODE(
      ps.PushDense("w", std::vector<float>{1, std::numeric_limits<float>::quiet_NaN(), 3, 4}, {}),
      kInvalid);
  std::vector<float> wrong(3);
  PS_EXPECT_CODE(ps.PullDense("w", absl::MakeSpan(wrong)), kInvalid);
  PS_EXPECT_CODE(ps.PullDense("nope", absl::MakeSpan(wrong)), absl::StatusCode::kNotFound);
  std::vector<float> unchanged(4);
  PS_ASSERT_OK(ps.PullDense("w", absl::MakeSpan(unchanged)));
  EXPECT_EQ(unchanged, after);
  const ServerStats s = ps.Stats();
  ASSERT_EQ(s.dense.size(), 2u);
  EXPECT_EQ(s.dense[0].name, "w");
  EXPECT_EQ(s.dense[0].pushes, 1u);
  EXPECT_EQ(s.dense[0].rejected_gradients, 1u);
  PS_ASSERT_OK(ps.DropDense("w2"));
  PS_EXPECT_CODE(ps.DropDense("w2"), absl::StatusCode::kNotFound);
}

TEST(ParameterServerTest, ScanTableVisitsEveryRowWithSlots) {
  ParameterServer ps({});
  TableOptions t = SgdTable("emb", 2);
  t.optimizer.kind = OptimizerKind::kAdagrad;
  t.optimizer.initial_accumulator = 0.1f;
  PS_ASSERT_OK(ps.CreateTable(t));
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 1000; ++k) keys.push_back(k * 7919);
  ASSERT_TRUE(PushAll(ps, "emb", keys, std::vector<float>(2 * keys.size(), 1.0f)).ok());
  const auto rows = Dump(ps, "emb");
  ASSERT_EQ(rows.size(), keys.size());
  for (uint64_t k : keys) {
    const auto& r = rows.at(k);
    ASSERT_EQ(r.size(), 4u);
    EXPECT_FLOAT_EQ(r[2], 1.1f);  // accumulator = 0.1 + 1^2
  }
  PS_EXPECT_CODE(
      ps.ScanTable("nope", [](uint64_t, absl::Span<const float>, absl::Span<const float>) {}),
      absl::StatusCode::kNotFound);
}

TEST(ParameterServerTest, StatsReportMemoryPerRow) {
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(SgdTable("emb", 4)));
  std::vector<uint64_t> keys(5000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  ASSERT_TRUE(PushAll(ps, "emb", keys, std::vector<float>(4 * keys.size(), 1.0f)).ok());
  const TableStats s = StatsOf(ps, "emb");
  EXPECT_EQ(s.rows, 5000u);
  EXPECT_GT(s.memory_bytes, 5000u * 32);
  EXPECT_DOUBLE_EQ(s.bytes_per_row, static_cast<double>(s.memory_bytes) / 5000);
  EXPECT_EQ(s.memory_budget_bytes, TableOptions{}.memory_budget_bytes);
}

}  // namespace
}  // namespace brook::ps
