// Rough throughput of the PS core, compared in the same run with a random
// gather from a plain array (the ceiling for a pull). Skipped unless
// BROOK_PS_PERF=1; run in an optimized build:
//   BROOK_PS_PERF=1 ./build-ps/tests/brook_ps_tests --gtest_filter='PerfTest.*'
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "ps/parameter_server.h"
#include "tests/unit/ps/ps_test_util.h"

namespace brook::ps {
namespace {

constexpr int kDim = 64;
constexpr uint64_t kRows = 1'000'000;
constexpr int kBatch = 4096;
constexpr int kRounds = 300;

bool Enabled() {
  const char* e = std::getenv("BROOK_PS_PERF");
  return e != nullptr && std::string(e) == "1";
}

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t KeyOf(uint64_t i) { return (i + 1) * 0xD6E8FEB86659FD93ULL; }

// Random batches of distinct row indices.
std::vector<std::vector<uint64_t>> Batches(uint64_t universe, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint64_t>> out(kRounds);
  for (auto& b : out) {
    b.resize(kBatch);
    for (auto& i : b) i = rng() % universe;
    std::sort(b.begin(), b.end());
    b.erase(std::unique(b.begin(), b.end()), b.end());
    std::shuffle(b.begin(), b.end(), rng);
  }
  return out;
}

double GatherRate(const std::vector<std::vector<uint64_t>>& batches) {
  const size_t bytes = kRows * kDim * sizeof(float);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(p, MAP_FAILED);
  madvise(p, bytes, MADV_HUGEPAGE);
  auto* table = static_cast<float*>(p);
  for (size_t i = 0; i < kRows * kDim; ++i) table[i] = static_cast<float>(i & 1023);
  std::vector<float> out(kBatch * kDim);
  uint64_t rows = 0;
  const double t0 = Seconds();
  for (const auto& b : batches) {
    for (size_t j = 0; j < b.size(); ++j) {
      std::memcpy(&out[j * kDim], table + b[j] * kDim, kDim * sizeof(float));
    }
    rows += b.size();
  }
  const double dt = Seconds() - t0;
  volatile float sink = out[17];
  (void)sink;
  munmap(p, bytes);
  return rows / dt;
}

struct Rates {
  double pull, pull_unknown, push;
};

Rates PsRates(OptimizerKind kind, const std::vector<std::vector<uint64_t>>& batches) {
  ParameterServer ps({});
  TableOptions t;
  t.name = "t";
  t.dim = kDim;
  t.optimizer.kind = kind;
  t.memory_budget_bytes = 8ull << 30;
  EXPECT_TRUE(ps.CreateTable(t).ok());
  std::vector<uint64_t> keys(kBatch);
  std::vector<float> grads(kBatch * kDim, 0.01f);
  for (uint64_t base = 0; base < kRows; base += kBatch) {
    keys.clear();
    for (uint64_t i = base; i < std::min(kRows, base + kBatch); ++i) keys.push_back(KeyOf(i));
    EXPECT_TRUE(ps.Push("t", keys, absl::MakeConstSpan(grads.data(), keys.size() * kDim), {}).ok());
  }
  std::vector<std::vector<uint64_t>> key_batches;
  for (const auto& b : batches) {
    key_batches.emplace_back();
    for (uint64_t i : b) key_batches.back().push_back(KeyOf(i));
  }
  std::vector<float> out(kBatch * kDim);
  Rates r{};
  uint64_t rows = 0;
  double t0 = Seconds();
  for (const auto& k : key_batches) {
    EXPECT_TRUE(ps.Pull("t", k, absl::MakeSpan(out.data(), k.size() * kDim)).ok());
    rows += k.size();
  }
  r.pull = rows / (Seconds() - t0);
  // Keys never pushed: every row comes from the initializer.
  rows = 0;
  t0 = Seconds();
  for (const auto& k : key_batches) {
    std::vector<uint64_t> unknown(k.size());
    for (size_t j = 0; j < k.size(); ++j) unknown[j] = k[j] ^ 0x5555;
    EXPECT_TRUE(ps.Pull("t", unknown, absl::MakeSpan(out.data(), k.size() * kDim)).ok());
    rows += k.size();
  }
  r.pull_unknown = rows / (Seconds() - t0);
  rows = 0;
  t0 = Seconds();
  for (const auto& k : key_batches) {
    EXPECT_TRUE(ps.Push("t", k, absl::MakeConstSpan(grads.data(), k.size() * kDim), {}).ok());
    rows += k.size();
  }
  r.push = rows / (Seconds() - t0);
  return r;
}

TEST(PerfTest, PullApproachesPlainGather) {
  if (!Enabled()) GTEST_SKIP() << "set BROOK_PS_PERF=1";
  const auto batches = Batches(kRows, 1);
  const double gather = GatherRate(batches);
  std::printf("[ perf ] plain gather, 1M x %d floats, huge pages: %.2f M rows/s\n", kDim,
              gather / 1e6);
  for (auto [kind, name] :
       {std::pair{OptimizerKind::kSgd, "sgd"}, std::pair{OptimizerKind::kAdagrad, "adagrad"},
        std::pair{OptimizerKind::kAdam, "adam"}}) {
    const Rates r = PsRates(kind, batches);
    std::printf(
        "[ perf ] %-8s pull %.2f M rows/s (%.0f%% of gather), pull unknown keys %.2f M rows/s, "
        "push %.2f M rows/s\n",
        name, r.pull / 1e6, 100 * r.pull / gather, r.pull_unknown / 1e6, r.push / 1e6);
  }
}

}  // namespace
}  // namespace brook::ps
