// A slow, obviously-correct twin of ExampleParser::Append: it parses with the
// generated protobuf classes (brook::tf::Example) and then applies the same
// feature-spec policy. Tests and fuzzers compare the two; nothing on a hot
// path should call it.
//
// Thread-compatible: concurrent calls need distinct batches and stats.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "features/feature_spec.h"
#include "trainer/input/columnar_batch.h"

namespace brook::input {

// Appends `serialized` as one row exactly as ExampleParser::Append would:
// same batch contents, same stats, same error codes; INVALID_ARGUMENT
// messages are identical, DATA_LOSS ones carry no byte offset (protobuf does
// not report one). `batch` must come from ExampleParser::InitBatch (or an
// equivalent) for `spec`; `stats` may be null. REQUIRES: spec.Validate() ok.
absl::Status ReferenceParse(const FeatureSpec& spec, std::string_view serialized,
                            ColumnarBatch* batch, ParseStats* stats);

}  // namespace brook::input
