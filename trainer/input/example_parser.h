// Parses serialized tf.train.Example bytes straight from the protobuf wire
// format into a ColumnarBatch, without building message objects. This is the
// hot path of the input pipeline. ReferenceParse (example_parser_reference.h)
// does the same through generated protobuf classes; tests compare the two.
//
// An ExampleParser is immutable after Create and safe for concurrent use from
// multiple threads, each with its own batch and stats.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/input/columnar_batch.h"
#include "trainer/input/feature_spec.h"

namespace brook::input {

class ExampleParser {
 public:
  static absl::StatusOr<ExampleParser> Create(const FeatureSpec& spec);

  // Prepares `batch` for this spec (right number of columns, cleared).
  void InitBatch(ColumnarBatch* batch) const;
  void InitStats(ParseStats* stats) const;

  // Appends one example as a new row. Malformed wire data is DATA_LOSS with
  // the byte offset inside the record; a policy violation is INVALID_ARGUMENT
  // naming the feature. On any error the batch is left exactly as it was
  // (the row is rolled back) and stats->rejected is incremented.
  absl::Status Append(std::string_view serialized, ColumnarBatch* batch,
                      ParseStats* stats) const;

  const FeatureSpec& spec() const { return spec_; }

 private:
  explicit ExampleParser(FeatureSpec spec);
  FeatureSpec spec_;
  // Implementation detail (name lookup table etc.) lives in the .cc.
  struct Index;
  std::shared_ptr<const Index> index_;
};

}  // namespace brook::input
