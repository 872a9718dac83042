// Each optimizer against a reference loop written here, independently, in
// double precision (closed forms from the TF raw-op docs), over several
// steps, through the public ParameterServer API.
#include "ps/optimizer.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ps/parameter_server.h"
#include "tests/unit/ps/ps_test_util.h"

namespace brook::ps {
namespace {

using test::PullOrDie;

constexpr int kDim = 5;
constexpr int kSteps = 12;

// Deterministic gradient of (key, step, element), mixed signs and scales.
double Grad(uint64_t key, int step, int i) {
  return 0.3 * std::sin(1.7 * step + 0.9 * i + 0.37 * static_cast<double>(key)) +
         (i == 0 ? 0.05 : 0.0);
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0, std::abs(want[i])))
        << what << " element " << i;
  }
}

// Drives one table: `schedule[s]` lists the keys pushed at step s. Returns
// the final rows of `keys` and their initial values (pulled first).
struct TableRun {
  std::vector<std::vector<double>> initial;  // per key
  std::vector<std::vector<float>> final_rows;
};

TableRun Drive(const OptimizerOptions& opt, const std::vector<uint64_t>& keys,
               const std::vector<std::vector<uint64_t>>& schedule) {
  ParameterServer ps({});
  TableOptions t;
  t.name = "t";
  t.dim = kDim;
  t.seed = 5;
  t.initializer.kind = InitializerKind::kUniform;
  t.initializer.low = -0.5f;
  t.initializer.high = 0.5f;
  t.optimizer = opt;
  EXPECT_TRUE(ps.CreateTable(t).ok());
  TableRun run;
  for (uint64_t k : keys) {
    const auto row = PullOrDie(ps, "t", {k}, kDim);
    run.initial.emplace_back(row.begin(), row.end());
  }
  for (int step = 0; step < static_cast<int>(schedule.size()); ++step) {
    std::vector<float> grads;
    for (uint64_t k : schedule[step]) {
      for (int i = 0; i < kDim; ++i) grads.push_back(static_cast<float>(Grad(k, step, i)));
    }
    auto r = ps.Push("t", schedule[step], grads, {});
    EXPECT_TRUE(r.ok()) << r.status();
  }
  for (uint64_t k : keys) run.final_rows.push_back(PullOrDie(ps, "t", {k}, kDim));
  return run;
}

// Key 1 is pushed every step; key 2 only from step 7 on, so a lazy
// optimizer's per-row state (Adam's t) must not count the steps it missed.
const std::vector<uint64_t> kKeys = {1, 2};
std::vector<std::vector<uint64_t>> Schedule() {
  std::vector<std::vector<uint64_t>> s;
  for (int step = 0; step < kSteps; ++step) {
    s.push_back(step >= 7 ? std::vector<uint64_t>{1, 2} : std::vector<uint64_t>{1});
  }
  return s;
}

// Steps at which `key` is pushed.
std::vector<int> StepsOf(uint64_t key) {
  std::vector<int> out;
  const auto s = Schedule();
  for (int step = 0; step < static_cast<int>(s.size()); ++step) {
    for (uint64_t k : s[step]) {
      if (k == key) out.push_back(step);
    }
  }
  return out;
}

TEST(OptimizerTest, SgdMatchesReference) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.learning_rate = 0.3f;
  const TableRun run = Drive(o, kKeys, Schedule());
  for (size_t k = 0; k < kKeys.size(); ++k) {
    std::vector<double> w = run.initial[k];
    for (int step : StepsOf(kKeys[k])) {
      for (int i = 0; i < kDim; ++i) w[i] -= double{o.learning_rate} * Grad(kKeys[k], step, i);
    }
    ExpectClose(run.final_rows[k], w, "sgd");
  }
}

TEST(OptimizerTest, AdagradMatchesReference) {
  for (float eps : {0.0f, 1e-7f, 0.01f}) {
    OptimizerOptions o;
    o.kind = OptimizerKind::kAdagrad;
    o.learning_rate = 0.2f;
    o.initial_accumulator = 0.1f;
    o.epsilon = eps;
    const TableRun run = Drive(o, kKeys, Schedule());
    for (size_t k = 0; k < kKeys.size(); ++k) {
      std::vector<double> w = run.initial[k];
      std::vector<double> acc(kDim, o.initial_accumulator);
      for (int step : StepsOf(kKeys[k])) {
        for (int i = 0; i < kDim; ++i) {
          const double g = Grad(kKeys[k], step, i);
          acc[i] += g * g;
          w[i] -= double{o.learning_rate} * g / (std::sqrt(acc[i]) + eps);
        }
      }
      ExpectClose(run.final_rows[k], w, "adagrad eps=" + std::to_string(eps));
    }
  }
}

TEST(OptimizerTest, AdamMatchesReferenceWithPerRowStepCount) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.learning_rate = 0.05f;
  o.beta1 = 0.8f;
  o.beta2 = 0.95f;
  o.epsilon = 1e-3f;
  const TableRun run = Drive(o, kKeys, Schedule());
  for (size_t k = 0; k < kKeys.size(); ++k) {
    std::vector<double> w = run.initial[k];
    std::vector<double> m(kDim, 0), v(kDim, 0);
    const double b1 = o.beta1, b2 = o.beta2, lr = o.learning_rate, eps = o.epsilon;
    int t = 0;  // this row's own update count
    for (int step : StepsOf(kKeys[k])) {
      ++t;
      const double lr_t = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
      for (int i = 0; i < kDim; ++i) {
        const double g = Grad(kKeys[k], step, i);
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
      }
    }
    ExpectClose(run.final_rows[k], w, "adam key " + std::to_string(kKeys[k]));
  }
}

// FTRL-Proximal per TF ApplyFtrlV2, in double.
std::vector<double> FtrlReference(const OptimizerOptions& o, uint64_t key,
                                  const std::vector<double>& initial) {
  const double lr = o.learning_rate, l1 = o.l1, l2 = o.l2, shrink = o.l2_shrinkage;
  const double p = -double{o.lr_power};
  std::vector<double> w = initial;
  std::vector<double> n(kDim, o.initial_accumulator), z(kDim, 0);
  for (int step : StepsOf(key)) {
    for (int i = 0; i < kDim; ++i) {
      const double g = Grad(key, step, i);
      const double g_shrunk = g + 2 * shrink * w[i];
      const double n_new = n[i] + g * g;
      const double sigma = (std::pow(n_new, p) - std::pow(n[i], p)) / lr;
      z[i] += g_shrunk - sigma * w[i];
      n[i] = n_new;
      if (std::abs(z[i]) <= l1) {
        w[i] = 0;
      } else {
        const double sign = z[i] > 0 ? 1 : -1;
        w[i] = -(z[i] - sign * l1) / (std::pow(n_new, p) / lr + 2 * l2);
      }
    }
  }
  return w;
}

TEST(OptimizerTest, FtrlMatchesReference) {
  struct Case {
    float l1, l2, shrink, lr_power;
  };
  for (const Case& c :
       {Case{0, 0, 0, -0.5f}, Case{0.01f, 0.05f, 0, -0.5f}, Case{0.02f, 0.1f, 0.03f, -0.5f},
        Case{0.01f, 0.05f, 0.02f, -0.3f}, Case{0, 0.1f, 0, -1.0f}, Case{0.2f, 0, 0, -0.5f}}) {
    OptimizerOptions o;
    o.kind = OptimizerKind::kFtrl;
    o.learning_rate = 0.1f;
    o.initial_accumulator = 0.1f;
    o.l1 = c.l1;
    o.l2 = c.l2;
    o.l2_shrinkage = c.shrink;
    o.lr_power = c.lr_power;
    const TableRun run = Drive(o, kKeys, Schedule());
    for (size_t k = 0; k < kKeys.size(); ++k) {
      ExpectClose(run.final_rows[k], FtrlReference(o, kKeys[k], run.initial[k]),
                  "ftrl l1=" + std::to_string(c.l1) + " lr_power=" + std::to_string(c.lr_power));
    }
  }
}

TEST(OptimizerTest, DirectApplyIsStatelessBetweenRows) {
  // One instance, two rows interleaved: each row's result depends only on its
  // own weights, slots and gradients.
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  auto opt = CreateOptimizer(o);
  ASSERT_TRUE(opt.ok());
  const int slots = (*opt)->SlotFloats(3);
  ASSERT_EQ(slots, 7);
  std::vector<float> wa(3, 1.0f), sa(slots), wb(3, 1.0f), sb(slots), wc(3, 1.0f), sc(slots);
  (*opt)->InitSlots(absl::MakeSpan(sa));
  (*opt)->InitSlots(absl::MakeSpan(sb));
  (*opt)->InitSlots(absl::MakeSpan(sc));
  const std::vector<float> g = {0.5f, -0.25f, 1.0f};
  for (int i = 0; i < 3; ++i) {
    (*opt)->Apply(absl::MakeSpan(wa), absl::MakeSpan(sa), g, 1.0f);
    (*opt)->Apply(absl::MakeSpan(wb), absl::MakeSpan(sb), g, 1.0f);
  }
  for (int i = 0; i < 3; ++i) (*opt)->Apply(absl::MakeSpan(wc), absl::MakeSpan(sc), g, 1.0f);
  EXPECT_EQ(wa, wb);
  EXPECT_EQ(wa, wc);
  EXPECT_EQ(sa, sc);
}

TEST(OptimizerTest, DenseVariableUsesTheSameOptimizers) {
  ParameterServer ps({});
  DenseOptions d;
  d.name = "w";
  d.shape = {2, 3};
  d.initializer.kind = InitializerKind::kConstant;
  d.initializer.value = 0.5f;
  d.optimizer.kind = OptimizerKind::kAdagrad;
  d.optimizer.learning_rate = 0.1f;
  d.optimizer.initial_accumulator = 0.2f;
  d.optimizer.epsilon = 0;
  PS_ASSERT_OK(ps.CreateDense(d));
  std::vector<double> w(6, 0.5), acc(6, 0.2);
  for (int step = 0; step < 4; ++step) {
    std::vector<float> g(6);
    for (int i = 0; i < 6; ++i) g[i] = static_cast<float>(Grad(99, step, i));
    auto r = ps.PushDense("w", g, {});
    ASSERT_TRUE(r.ok()) << r.status();
    for (int i = 0; i < 6; ++i) {
      acc[i] += double{g[i]} * g[i];
      w[i] -= 0.1 * g[i] / std::sqrt(acc[i]);
    }
  }
  std::vector<float> out(6);
  PS_ASSERT_OK(ps.PullDense("w", absl::MakeSpan(out)));
  ExpectClose(out, w, "dense adagrad");
}

}  // namespace
}  // namespace brook::ps
