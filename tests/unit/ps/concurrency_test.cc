// Many threads on one ParameterServer. Run under TSan too
// (-DBROOK_SANITIZE=thread): the suite is named ConcurrencyTest so it can be
// selected with --gtest_filter='ConcurrencyTest.*'.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "common/part_runner.h"
#include "gtest/gtest.h"
#include "ps/parameter_server.h"
#include "ps/table.h"
#include "tests/unit/ps/ps_test_util.h"

namespace brook::ps {
namespace {

using test::PullOrDie;
using test::SgdTable;
using test::StatsOf;

constexpr int kThreads = 4;

// Random distinct keys from [0, universe).
std::vector<uint64_t> RandomKeys(std::mt19937_64& rng, int n, uint64_t universe) {
  std::vector<uint64_t> keys;
  std::uniform_int_distribution<uint64_t> pick(0, universe - 1);
  while (static_cast<int>(keys.size()) < n) {
    const uint64_t k = pick(rng) * 0x9E3779B97F4A7C15ULL;  // spread over all stripes
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  return keys;
}

// SGD with lr = 1 and gradient -1: every applied push adds exactly 1 to each
// of its rows, so final values must equal the push counts, whatever the
// interleaving (integers are exact in float up to 2^24).
TEST(ConcurrencyTest, CounterPushesFromManyThreadsMatchSingleThreadedReference) {
  ParameterServer ps({});
  const int dim = 8;
  PS_ASSERT_OK(ps.CreateTable(SgdTable("emb", dim, 1.0f)));
  constexpr uint64_t kUniverse = 3000;
  constexpr int kIters = 150;
  std::vector<std::vector<std::vector<uint64_t>>> plans(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    std::mt19937_64 rng(t + 1);
    for (int i = 0; i < kIters; ++i) plans[t].push_back(RandomKeys(rng, 64, kUniverse));
  }
  std::atomic<bool> go{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      std::vector<float> out;
      for (int i = 0; i < kIters; ++i) {
        const auto& keys = plans[t][i];
        const std::vector<float> grads(keys.size() * dim, -1.0f);
        if (!ps.Push("emb", keys, grads,
                     {.client_id = static_cast<uint64_t>(t + 1),
                      .sequence = static_cast<uint64_t>(i)})
                 .ok()) {
          ++failures;
        }
        // Interleaved pulls of another thread's keys: every value is a whole
        // number of pushes and all dims of a row agree.
        const auto& other = plans[(t + 1) % kThreads][i];
        out.assign(other.size() * dim, 0);
        if (!ps.Pull("emb", other, absl::MakeSpan(out)).ok()) ++failures;
        for (size_t r = 0; r < other.size(); ++r) {
          for (int d = 0; d < dim; ++d) {
            if (out[r * dim + d] != std::floor(out[r * dim + d])) ++failures;
          }
        }
      }
    });
  }
  go = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);

  // Single-threaded reference.
  std::map<uint64_t, float> want;
  for (const auto& plan : plans) {
    for (const auto& keys : plan) {
      for (uint64_t k : keys) want[k] += 1.0f;
    }
  }
  std::vector<uint64_t> keys;
  for (const auto& [k, v] : want) keys.push_back(k);
  const auto got = PullOrDie(ps, "emb", keys, dim);
  for (size_t i = 0; i < keys.size(); ++i) {
    for (int d = 0; d < dim; ++d) ASSERT_EQ(got[i * dim + d], want[keys[i]]) << keys[i];
  }
  const TableStats s = StatsOf(ps, "emb");
  EXPECT_EQ(s.rows, keys.size());
  EXPECT_EQ(s.admissions, keys.size());
}

TEST(ConcurrencyTest, ConcurrentDuplicatePushesApplyOnce) {
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(SgdTable("emb", 4, 1.0f)));
  constexpr int kRounds = 40;
  std::vector<uint64_t> keys(256);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  const std::vector<float> grads(keys.size() * 4, -1.0f);
  std::atomic<int> applied{0}, duplicate{0}, errors{0};
  std::atomic<int> round{-1};
  std::atomic<int> arrived{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r) {
        while (round.load() < r) std::this_thread::yield();
        // Every thread sends the same (client, sequence): a retried push.
        auto out =
            ps.Push("emb", keys, grads, {.client_id = 77, .sequence = static_cast<uint64_t>(r)});
        if (!out.ok()) {
          ++errors;
        } else if (*out == PushOutcome::kApplied) {
          ++applied;
        } else {
          ++duplicate;
        }
        ++arrived;
      }
    });
  }
  for (int r = 0; r < kRounds; ++r) {
    round = r;
    while (arrived.load() < (r + 1) * kThreads) std::this_thread::yield();
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(applied.load(), kRounds);
  EXPECT_EQ(duplicate.load(), kRounds * (kThreads - 1));
  const auto got = PullOrDie(ps, "emb", keys, 4);
  for (float v : got) ASSERT_EQ(v, static_cast<float>(kRounds));
  EXPECT_EQ(StatsOf(ps, "emb").duplicate_pushes, static_cast<uint64_t>(kRounds * (kThreads - 1)));
}

// Pushes, pulls, admission, eviction, scans, stats and table creation all at
// once: nothing to compare exactly, but TSan and ASan watch, and the
// invariants that hold under any interleaving are checked.
// Pairs of threads share a client id and a plan of batches, so every batch
// is pushed twice at once (an original and its racing retry): each part
// must land exactly once, and claims taken in sequence order never deadlock.
TEST(ConcurrencyTest, RacingRetriesOfPushBatchesApplyEachPartOnce) {
  ParameterServer ps({});
  PS_ASSERT_OK(ps.CreateTable(SgdTable("a", 4, 1.0f)));
  PS_ASSERT_OK(ps.CreateTable(SgdTable("b", 2, 1.0f)));
  DenseOptions w;
  w.name = "w";
  w.shape = {3};
  w.initializer.kind = InitializerKind::kZeros;
  w.optimizer.kind = OptimizerKind::kSgd;
  w.optimizer.learning_rate = 1.0f;
  PS_ASSERT_OK(ps.CreateDense(w));
  constexpr int kPairs = kThreads / 2, kIters = 60;
  std::vector<std::vector<std::vector<uint64_t>>> plan_a(kPairs), plan_b(kPairs);
  std::map<uint64_t, float> want_a, want_b;
  for (int p = 0; p < kPairs; ++p) {
    std::mt19937_64 rng(50 + p);
    for (int i = 0; i < kIters; ++i) {
      plan_a[p].push_back(RandomKeys(rng, 32, 400));
      plan_b[p].push_back(RandomKeys(rng, 16, 100));
      for (uint64_t k : plan_a[p].back()) want_a[k] += 1;
      for (uint64_t k : plan_b[p].back()) want_b[k] += 1;
    }
  }
  const std::vector<float> ga(32 * 4, -1.0f), gb(16 * 2, -1.0f), gw(3, -1.0f);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int p = t / 2;
      const PushContext ctx{.client_id = static_cast<uint64_t>(100 + p), .step = 1};
      for (int i = 0; i < kIters; ++i) {
        const uint64_t base = 3 * static_cast<uint64_t>(i) + 1;
        const std::vector<TablePushPart> tables = {{"a", plan_a[p][i], ga, base},
                                                   {"b", plan_b[p][i], gb, base + 1}};
        const std::vector<DensePushPart> dense = {{"w", gw, base + 2}};
        if (!ps.PushBatch(tables, dense, ctx).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (const auto& [table, want, dim] :
       {std::tuple{"a", &want_a, 4}, std::tuple{"b", &want_b, 2}}) {
    for (const auto& [key, count] : *want) {
      const std::vector<float> row = PullOrDie(ps, table, {key}, dim);
      for (float v : row) ASSERT_EQ(v, count) << table << " key " << key;
    }
  }
  std::vector<float> values(3);
  PS_ASSERT_OK(ps.PullDense("w", absl::MakeSpan(values)));
  EXPECT_EQ(values, std::vector<float>(3, static_cast<float>(kPairs * kIters)));
  EXPECT_EQ(StatsOf(ps, "a").duplicate_pushes, static_cast<uint64_t>(kPairs * kIters));
}

// Pushes of thousands of keys applied in parts on helper threads
// (PushContext::helpers), from several threads at once, leave every row,
// slot and count exactly as the same pushes applied whole on one thread.
// Each thread owns its keys, so each row's updates come in one order either
// way; Adagrad with admission, clipping and a zeroed NaN makes every part
// of ApplyPush count.
TEST(ConcurrencyTest, PushesSplitOverHelpersMatchWholePushes) {
  TableOptions t;
  t.name = "emb";
  t.dim = 8;
  t.seed = 5;
  t.initializer.kind = InitializerKind::kTruncatedNormal;
  t.optimizer.kind = OptimizerKind::kAdagrad;
  t.optimizer.learning_rate = 0.1f;
  t.admission_min_count = 2;
  t.gradient_clip = 0.5f;
  t.bad_gradient = BadGradientPolicy::kZero;
  constexpr int kPushers = 3, kPushes = 6, kKeys = 2500;
  ASSERT_GE(kKeys, static_cast<int>(Table::kMinSplitPushKeys));
  // plans[p][i]: pusher p's i-th push, keys from its own range.
  struct Planned {
    std::vector<uint64_t> keys;
    std::vector<float> grads;
  };
  std::vector<std::vector<Planned>> plans(kPushers);
  for (int p = 0; p < kPushers; ++p) {
    std::mt19937_64 rng(p + 40);
    for (int i = 0; i < kPushes; ++i) {
      Planned push;
      std::vector<uint64_t> ids(4000);
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      for (int k = 0; k < kKeys; ++k) {
        push.keys.push_back((ids[k] * 4 + p) * 0x9E3779B97F4A7C15ULL);  // spread over stripes
      }
      push.grads.resize(push.keys.size() * t.dim);
      for (float& g : push.grads) g = static_cast<float>(rng() % 2001) * 1e-3f - 1.0f;
      if (i == 2) push.grads[17] = std::nanf("");
      plans[p].push_back(std::move(push));
    }
  }
  ParameterServer whole({}), split({});
  PS_ASSERT_OK(whole.CreateTable(t));
  PS_ASSERT_OK(split.CreateTable(t));
  for (int p = 0; p < kPushers; ++p) {
    for (const Planned& push : plans[p]) PS_ASSERT_OK(whole.Push("emb", push.keys, push.grads, {}));
  }
  PartRunner helpers(3);
  // Pusher 0's first push alone: no other request runs, so it is split.
  PS_ASSERT_OK(split.Push("emb", plans[0][0].keys, plans[0][0].grads, {.helpers = &helpers}));
  EXPECT_EQ(helpers.split_runs(), 1u);
  // A push below the threshold runs whole even with helpers idle.
  const std::vector<uint64_t> few = {3, 7, 11};  // no plan's: theirs are multiplied out
  const std::vector<float> few_grads(few.size() * t.dim, 0.25f);
  PS_ASSERT_OK(split.Push("emb", few, few_grads, {.helpers = &helpers}));
  PS_ASSERT_OK(whole.Push("emb", few, few_grads, {}));
  EXPECT_EQ(helpers.split_runs(), 1u);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < kPushers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = p == 0 ? 1 : 0; i < kPushes; ++i) {
        const Planned& push = plans[p][i];
        if (!split.Push("emb", push.keys, push.grads, {.helpers = &helpers}).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);

  const auto want = test::Dump(whole, "emb");
  ASSERT_GT(want.size(), 1000u) << "admission let too few keys in for the test to mean much";
  EXPECT_EQ(test::Dump(split, "emb"), want);
  const TableStats a = StatsOf(whole, "emb"), b = StatsOf(split, "emb");
  EXPECT_EQ(b.rows, a.rows);
  EXPECT_EQ(b.pending_keys, a.pending_keys);
  EXPECT_EQ(b.admissions, a.admissions);
  EXPECT_EQ(b.rows_pushed, a.rows_pushed);
  EXPECT_EQ(b.rejected_gradients, a.rejected_gradients);
}

TEST(ConcurrencyTest, MixedOperationsWithEvictionAndAdmission) {
  test::FakeClock clock;
  ParameterServerOptions o;
  o.now = clock.AsFunction();
  ParameterServer ps(o);
  TableOptions t = SgdTable("emb", 4, 1.0f);
  t.admission_min_count = 2;
  t.ttl_steps = 5;
  t.max_pending_keys = 256 * 16;
  t.memory_budget_bytes = 1500 * 4 * sizeof(float);  // 1500 rows: the budget is hit
  PS_ASSERT_OK(ps.CreateTable(t));
  std::atomic<bool> stop{false};
  std::atomic<int64_t> step{0};
  std::atomic<int> unexpected{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 3; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(100 + w);
      std::vector<float> out;
      for (int i = 0; i < 300; ++i) {
        const auto keys = RandomKeys(rng, 48, 4000);
        const std::vector<float> grads(keys.size() * 4, -1.0f);
        auto r = ps.Push("emb", keys, grads,
                         {.client_id = static_cast<uint64_t>(w + 1),
                          .sequence = static_cast<uint64_t>(i),
                          .step = step.load()});
        if (!r.ok() && r.status().code() != absl::StatusCode::kResourceExhausted) ++unexpected;
        out.resize(keys.size() * 4);
        if (!ps.Pull("emb", keys, absl::MakeSpan(out)).ok()) ++unexpected;
        for (size_t k = 0; k < keys.size(); ++k) {
          // Rows of a key move together: all dims equal, never negative.
          for (int d = 1; d < 4; ++d) {
            if (out[k * 4 + d] != out[k * 4]) ++unexpected;
          }
          if (out[k * 4] < 0) ++unexpected;
        }
      }
    });
  }
  threads.emplace_back([&] {
    while (!stop.load()) {
      step.fetch_add(1);
      ps.Evict(step.load());
      uint64_t rows = 0;
      const absl::Status s = ps.ScanTable(
          "emb", [&](uint64_t, absl::Span<const float>, absl::Span<const float>) { ++rows; });
      if (!s.ok()) ++unexpected;
      const TableStats st = StatsOf(ps, "emb");
      if (st.rows > 1500) ++unexpected;
      // Declaring and dropping other tables concurrently.
      if (!ps.CreateTable(SgdTable("side", 2)).ok()) ++unexpected;
      if (!ps.DropTable("side").ok()) ++unexpected;
      std::this_thread::yield();
    }
  });
  for (int i = 0; i < 3; ++i) threads[i].join();
  stop = true;
  threads.back().join();
  EXPECT_EQ(unexpected.load(), 0);
  const TableStats s = StatsOf(ps, "emb");
  EXPECT_LE(s.rows, 1500u);
  EXPECT_GT(s.admissions, 0u);
  EXPECT_EQ(s.admissions - s.evictions, s.rows);
}

}  // namespace
}  // namespace brook::ps
