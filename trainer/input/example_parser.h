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
#include "features/feature_spec.h"
#include "trainer/input/columnar_batch.h"

namespace brook::input {

// Decisions beyond feature_spec.h, shared with ReferenceParse:
//  - The label may arrive as float_list or int64_list (converted to float)
//    and must hold exactly one value; otherwise the row is rejected
//    (INVALID_ARGUMENT `label "NAME" missing`, or naming what arrived).
//    No policy applies to the label.
//  - A type mismatch under on_type_mismatch: default fills the default (or
//    the empty list) and counts in `mismatched` only, even with
//    on_missing: error: the user asked for defaults on mismatch.
//  - Counters (examples, missing, mismatched, unknown_features) count
//    appended rows only; a rejected row adds 1 to `rejected` and nothing else.
//    unknown_features counts distinct names per row (a protobuf map holds a
//    name once).
//  - Protobuf semantics throughout: a name given twice keeps the last entry;
//    a Feature with no list set is missing; an empty list of the right kind
//    is present. Packed and unpacked lists are both accepted.
//  - Features outside the spec are skipped without reading their contents,
//    and names are not checked to be UTF-8 (as TensorFlow's fast parser), so
//    a record protobuf would reject there can still parse; anything protobuf
//    accepts parses identically.
//  - `batch` must hold whole rows of this spec (InitBatch, then only Append
//    and Clear); otherwise FAILED_PRECONDITION. `stats` may be null.
//
//   ExampleParser parser = ExampleParser::Create(spec).value();
//   ColumnarBatch batch;
//   parser.InitBatch(&batch);
//   for (std::string_view record : records) {
//     absl::Status s = parser.Append(record, &batch, &stats);  // row or error
//   }
class ExampleParser {
 public:
  static absl::StatusOr<ExampleParser> Create(const FeatureSpec& spec);
  // For serving: an example without the label is a row with label 0 (a
  // label that is present is still checked).
  static absl::StatusOr<ExampleParser> CreateLabelOptional(const FeatureSpec& spec);

  // Prepares `batch` for this spec (right number of columns, cleared).
  void InitBatch(ColumnarBatch* batch) const;
  void InitStats(ParseStats* stats) const;

  // Appends one example as a new row. Malformed wire data is DATA_LOSS with
  // the byte offset inside the record; a policy violation is INVALID_ARGUMENT
  // naming the feature. On any error the batch is left exactly as it was
  // (the row is rolled back) and stats->rejected is incremented.
  absl::Status Append(std::string_view serialized, ColumnarBatch* batch, ParseStats* stats) const;

  const FeatureSpec& spec() const { return spec_; }

 private:
  explicit ExampleParser(FeatureSpec spec);
  FeatureSpec spec_;
  bool label_optional_ = false;
  // Implementation detail (name lookup table etc.) lives in the .cc.
  struct Index;
  std::shared_ptr<const Index> index_;
};

}  // namespace brook::input
