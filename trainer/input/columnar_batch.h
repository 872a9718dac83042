// A batch of parsed examples, one column per FeatureSpec entry, in spec order.
// Buffers are reused across batches (Clear keeps capacity), so the parse hot
// path allocates nothing once warmed up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brook::input {

struct Column {
  // Fixed float feature: num_rows x length values, row-major.
  std::vector<float> floats;
  // Fixed int64 feature: num_rows x length values, row-major.
  std::vector<int64_t> int64s;
  // Varlen feature: ids of row r are ids[row_splits[r] .. row_splits[r+1]).
  std::vector<uint64_t> ids;
  std::vector<uint32_t> row_splits{0};

  void Clear() {
    floats.clear();
    int64s.clear();
    ids.clear();
    row_splits.assign(1, 0);
  }
};

struct ColumnarBatch {
  size_t num_rows = 0;
  std::vector<float> labels;    // one per row
  std::vector<Column> columns;  // parallel to FeatureSpec::features

  void Clear() {
    num_rows = 0;
    labels.clear();
    for (auto& c : columns) c.Clear();
  }
};

// Counters of the missing / mismatch policy, per feature (spec order).
struct ParseStats {
  uint64_t examples = 0;             // appended to a batch
  uint64_t rejected = 0;             // returned an error; batch unchanged
  std::vector<uint64_t> missing;     // per feature
  std::vector<uint64_t> mismatched;  // per feature
  uint64_t unknown_features = 0;     // present in the example, not in the spec
};

}  // namespace brook::input
