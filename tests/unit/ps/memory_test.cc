// Memory per row at a million rows must stay within 1.25x of the row's
// floats (weights + optimizer slots) x 4 bytes, index and metadata included.
#include <cstdio>
#include <vector>

#include "gtest/gtest.h"
#include "ps/parameter_server.h"
#include "tests/unit/ps/ps_test_util.h"

namespace brook::ps {
namespace {

double BytesPerRowAtOneMillion(OptimizerKind kind, int dim) {
  ParameterServer ps({});
  TableOptions t;
  t.name = "big";
  t.dim = dim;
  t.initializer.kind = InitializerKind::kZeros;  // speed; memory is the same
  t.optimizer.kind = kind;
  t.memory_budget_bytes = 4ull << 30;
  EXPECT_TRUE(ps.CreateTable(t).ok());
  constexpr int kRows = 1'000'000;
  constexpr int kBatch = 8192;
  const std::vector<float> grads(static_cast<size_t>(kBatch) * dim, 0.0f);
  std::vector<uint64_t> keys(kBatch);
  for (int base = 0; base < kRows; base += kBatch) {
    const int n = std::min(kBatch, kRows - base);
    keys.resize(n);
    // Arbitrary 64-bit keys, as hashed feature ids are.
    for (int i = 0; i < n; ++i)
      keys[i] = (static_cast<uint64_t>(base + i) + 1) * 0xD6E8FEB86659FD93ULL;
    auto r =
        ps.Push("big", keys, absl::MakeConstSpan(grads.data(), static_cast<size_t>(n) * dim), {});
    EXPECT_TRUE(r.ok()) << r.status();
  }
  const TableStats s = test::StatsOf(ps, "big");
  EXPECT_EQ(s.rows, static_cast<uint64_t>(kRows));
  const double floats = dim + OptimizerSlotFloats(t.optimizer, dim);
  std::printf(
      "[ memory ] dim %d + %d slot floats: %.1f bytes/row (floats alone %.0f, ratio %.3f)\n", dim,
      static_cast<int>(floats) - dim, s.bytes_per_row, floats * 4, s.bytes_per_row / (floats * 4));
  return s.bytes_per_row / (floats * 4);
}

TEST(MemoryTest, Dim16AdagradAtOneMillionRows) {
  EXPECT_LE(BytesPerRowAtOneMillion(OptimizerKind::kAdagrad, 16), 1.25);
}

TEST(MemoryTest, Dim64AdamAtOneMillionRows) {
  EXPECT_LE(BytesPerRowAtOneMillion(OptimizerKind::kAdam, 64), 1.25);
}

}  // namespace
}  // namespace brook::ps
