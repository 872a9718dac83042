#include "trainer/input/batch_rows.h"

#include <cstdint>
#include <vector>

namespace brook::input::internal {
namespace {

template <typename T>
void AppendSlice(const std::vector<T>& src, size_t begin, size_t end, std::vector<T>* dst) {
  dst->insert(dst->end(), src.begin() + static_cast<ptrdiff_t>(begin),
              src.begin() + static_cast<ptrdiff_t>(end));
}

}  // namespace

void AppendRows(const FeatureSpec& spec, const ColumnarBatch& src, size_t begin, size_t end,
                ColumnarBatch* dst) {
  if (begin >= end) return;
  AppendSlice(src.labels, begin, end, &dst->labels);
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const FeatureSpecEntry& f = spec.features[i];
    const Column& s = src.columns[i];
    Column& d = dst->columns[i];
    if (f.kind == FeatureKind::kFixed) {
      const size_t len = static_cast<size_t>(f.length);
      if (f.type == FeatureType::kFloat) {
        AppendSlice(s.floats, begin * len, end * len, &d.floats);
      } else {
        AppendSlice(s.int64s, begin * len, end * len, &d.int64s);
      }
    } else {
      const uint32_t first = s.row_splits[begin];
      AppendSlice(s.ids, first, s.row_splits[end], &d.ids);
      const uint32_t base = d.row_splits.back();
      for (size_t r = begin + 1; r <= end; ++r) {
        d.row_splits.push_back(base + (s.row_splits[r] - first));
      }
    }
  }
  dst->num_rows += end - begin;
}

size_t BatchBytes(const ColumnarBatch& batch) {
  size_t bytes = batch.labels.size() * sizeof(float);
  for (const Column& c : batch.columns) {
    bytes += c.floats.size() * sizeof(float) + c.int64s.size() * sizeof(int64_t) +
             c.ids.size() * sizeof(uint64_t) + c.row_splits.size() * sizeof(uint32_t);
  }
  return bytes;
}

}  // namespace brook::input::internal
