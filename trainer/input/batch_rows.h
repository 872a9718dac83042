// Row operations on ColumnarBatch that the input pipeline needs to re-batch
// parsed rows (after skipped examples, from the cache). Internal to
// trainer/input.
#pragma once

#include <cstddef>

#include "features/feature_spec.h"
#include "trainer/input/columnar_batch.h"

namespace brook::input::internal {

// Appends rows [begin, end) of `src` to `dst`. REQUIRES: both hold whole rows
// of `spec` (prepared by ExampleParser::InitBatch), begin <= end <= src.num_rows.
void AppendRows(const FeatureSpec& spec, const ColumnarBatch& src, size_t begin, size_t end,
                ColumnarBatch* dst);

// Bytes of column data the batch holds (sizes, not capacities).
size_t BatchBytes(const ColumnarBatch& batch);

}  // namespace brook::input::internal
