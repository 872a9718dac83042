// Helpers shared by the ps/ unit tests.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "ps/parameter_server.h"

#define PS_ASSERT_OK(expr)                                               \
  do {                                                                   \
    const ::absl::Status ps_status_ = ::brook::ps::test::ToStatus(expr); \
    ASSERT_TRUE(ps_status_.ok()) << ps_status_;                          \
  } while (0)

#define PS_EXPECT_CODE(expr, code_)                                      \
  do {                                                                   \
    const ::absl::Status ps_status_ = ::brook::ps::test::ToStatus(expr); \
    EXPECT_EQ(ps_status_.code(), code_) << ps_status_;                   \
  } while (0)

namespace brook::ps::test {

inline absl::Status ToStatus(const absl::Status& s) { return s; }
template <typename T>
absl::Status ToStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

// A manually advanced clock in seconds, safe to read from any thread.
class FakeClock {
 public:
  double Now() const { return now_.load(); }
  void Set(double t) { now_.store(t); }
  std::function<double()> AsFunction() {
    return [this] { return Now(); };
  }

 private:
  std::atomic<double> now_{1000.0};
};

inline TableOptions SgdTable(std::string name, int dim, float lr = 1.0f) {
  TableOptions t;
  t.name = std::move(name);
  t.dim = dim;
  t.initializer.kind = InitializerKind::kZeros;
  t.optimizer.kind = OptimizerKind::kSgd;
  t.optimizer.learning_rate = lr;
  return t;
}

// Adam (rows carry 2 x dim slots and a step), uniform init; `budget_rows`
// rows fit in the table's memory budget, the rest spill to RocksDB.
inline TableOptions AdamTable(const std::string& name, int dim, uint64_t seed,
                              uint64_t budget_rows) {
  TableOptions t;
  t.name = name;
  t.dim = dim;
  t.seed = seed;
  t.initializer.kind = InitializerKind::kUniform;
  t.optimizer.kind = OptimizerKind::kAdam;
  t.optimizer.learning_rate = 0.05f;
  t.memory_budget_bytes = budget_rows * (dim * 3 + 1) * sizeof(float);
  return t;
}

inline std::vector<float> PullOrDie(ParameterServer& ps, const std::string& table,
                                    const std::vector<uint64_t>& keys, int dim) {
  std::vector<float> out(keys.size() * dim, -12345.0f);
  const absl::Status s = ps.Pull(table, keys, absl::MakeSpan(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

inline absl::StatusOr<PushOutcome> PushAll(ParameterServer& ps, const std::string& table,
                                           const std::vector<uint64_t>& keys,
                                           const std::vector<float>& grads, PushContext ctx = {}) {
  return ps.Push(table, keys, grads, ctx);
}

inline TableStats StatsOf(const ParameterServer& ps, const std::string& table) {
  for (const TableStats& t : ps.Stats().tables) {
    if (t.name == table) return t;
  }
  ADD_FAILURE() << "no stats for " << table;
  return {};
}

// Everything observable about a table: every row's key, weights and slots.
inline std::map<uint64_t, std::vector<float>> Dump(const ParameterServer& ps,
                                                   const std::string& table) {
  std::map<uint64_t, std::vector<float>> rows;
  const absl::Status s = ps.ScanTable(
      table, [&](uint64_t key, absl::Span<const float> w, absl::Span<const float> slots) {
        std::vector<float> all(w.begin(), w.end());
        all.insert(all.end(), slots.begin(), slots.end());
        EXPECT_TRUE(rows.emplace(key, std::move(all)).second) << "key seen twice " << key;
      });
  EXPECT_TRUE(s.ok()) << s;
  return rows;
}

}  // namespace brook::ps::test
