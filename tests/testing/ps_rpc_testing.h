// Helpers for the PS service, client and cluster tests: table options whose
// results are exact (SGD, lr 1, zero init: a row is minus the sum of its
// gradients) and packing helpers for building raw requests.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ps/options.h"

namespace brook::testing {

// SGD with learning rate `lr`, zero-initialized rows: after pushes of
// gradient -1 a row counts them.
inline ps::TableOptions CounterTable(std::string name, int dim, float lr = 1.0f) {
  ps::TableOptions t;
  t.name = std::move(name);
  t.dim = dim;
  t.initializer.kind = ps::InitializerKind::kZeros;
  t.optimizer.kind = ps::OptimizerKind::kSgd;
  t.optimizer.learning_rate = lr;
  return t;
}

inline ps::DenseOptions CounterDense(std::string name, std::vector<int64_t> shape) {
  ps::DenseOptions d;
  d.name = std::move(name);
  d.shape = std::move(shape);
  d.initializer.kind = ps::InitializerKind::kZeros;
  d.optimizer.kind = ps::OptimizerKind::kSgd;
  d.optimizer.learning_rate = 1.0f;
  return d;
}

inline std::string PackKeys(const std::vector<uint64_t>& keys) {
  return std::string(reinterpret_cast<const char*>(keys.data()), keys.size() * 8);
}
inline std::string PackFloats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}
inline std::vector<float> UnpackFloats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

inline absl::Status StatusOf(const absl::Status& s) { return s; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

}  // namespace brook::testing

// EXPECT / ASSERT that an absl::Status or StatusOr is OK or has a code.
#define BROOK_ASSERT_OK(expr)                                         \
  do {                                                                \
    const ::absl::Status brook_s_ = ::brook::testing::StatusOf(expr); \
    ASSERT_TRUE(brook_s_.ok()) << brook_s_;                           \
  } while (0)
#define BROOK_EXPECT_OK(expr)                                         \
  do {                                                                \
    const ::absl::Status brook_s_ = ::brook::testing::StatusOf(expr); \
    EXPECT_TRUE(brook_s_.ok()) << brook_s_;                           \
  } while (0)
#define BROOK_EXPECT_CODE(expr, want_code)                            \
  do {                                                                \
    const ::absl::Status brook_s_ = ::brook::testing::StatusOf(expr); \
    EXPECT_EQ(brook_s_.code(), want_code) << brook_s_;                \
  } while (0)
