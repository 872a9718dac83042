// Helpers for the model tests: a feature spec with every kind of column, and
// random ColumnarBatches for it.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "features/feature_spec.h"
#include "gtest/gtest.h"
#include "trainer/input/columnar_batch.h"
#include "trainer/model/model_spec.h"

namespace brook::trainer::testing {

// I1, I2 (length 2), I3: fixed floats; age: fixed int64; C1, C2: varlen
// int64; country: varlen bytes (hashed ids); slots: fixed int64 of length 2.
inline constexpr char kFeatures[] = R"(label: {name: label, type: float}
features:
  - {name: I1, type: float, length: 1}
  - {name: I2, type: float, length: 2}
  - {name: I3, type: float, length: 1}
  - {name: age, type: int64, length: 1}
  - {name: C1, type: int64, kind: varlen}
  - {name: C2, type: int64, kind: varlen}
  - {name: country, type: bytes, kind: varlen}
  - {name: slots, type: int64, length: 2}
)";

inline input::FeatureSpec Features() {
  absl::StatusOr<input::FeatureSpec> f = input::FeatureSpec::FromYaml(kFeatures);
  EXPECT_TRUE(f.ok()) << f.status();
  return *f;
}

inline ModelSpec Spec(const std::string& yaml, const input::FeatureSpec& features) {
  absl::StatusOr<ModelSpec> s = ModelSpec::FromYaml(yaml, features);
  EXPECT_TRUE(s.ok()) << s.status() << "\n" << yaml;
  return s.ok() ? *s : ModelSpec{};
}

// A random batch of `rows` examples. Varlen ids come from [0, id_range) so
// that keys repeat; example 0 has no varlen ids at all. Labels are 0/1 when
// binary, else uniform in [-1, 2].
inline input::ColumnarBatch RandomBatch(const input::FeatureSpec& spec, size_t rows, uint32_t seed,
                                        bool binary = true, int id_range = 6) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-2.0f, 3.0f);
  std::uniform_int_distribution<int> count(0, 3), id(0, id_range - 1), small(-3, 40);
  input::ColumnarBatch b;
  b.num_rows = rows;
  b.columns.resize(spec.features.size());
  for (size_t c = 0; c < spec.features.size(); ++c) {
    const input::FeatureSpecEntry& f = spec.features[c];
    input::Column& col = b.columns[c];
    for (size_t r = 0; r < rows; ++r) {
      if (f.kind == input::FeatureKind::kVarLen) {
        const int n = r == 0 ? 0 : count(rng);
        for (int i = 0; i < n; ++i) col.ids.push_back(static_cast<uint64_t>(id(rng)) * 1000003u);
        col.row_splits.push_back(static_cast<uint32_t>(col.ids.size()));
      } else if (f.type == input::FeatureType::kFloat) {
        for (int i = 0; i < f.length; ++i) col.floats.push_back(value(rng));
      } else {
        for (int i = 0; i < f.length; ++i)
          col.int64s.push_back(f.length > 1 ? id(rng) : small(rng));
      }
    }
  }
  std::uniform_real_distribution<float> soft(-1.0f, 2.0f);
  for (size_t r = 0; r < rows; ++r) {
    b.labels.push_back(binary ? static_cast<float>(rng() % 2) : soft(rng));
  }
  return b;
}

}  // namespace brook::trainer::testing
