// Checks a job's data against its feature spec before any work starts
// (issue 24): every file opens as TFRecord, and the first records of the
// first file of each list parse under the spec. What it finds is named by
// the list's field (e.g. `data.train[0] "train-*"`), the file, and the
// record or feature:
//  - a file whose first frame is not a TFRecord frame (a feature_spec.yaml
//    or a CSV a glob picked up, a GZIP file read as uncompressed) is an
//    error;
//  - a spec feature absent from every sampled record is an error, unless
//    the spec says on_missing: default: then it is a warning with the
//    absence rate (one partly absent is a warning too, never silence);
//  - a sampled record that does not parse (malformed, wrong type, no label)
//    is an error naming file, record index and feature, unless
//    `skip_corrupt`: then a warning counting them.
// No network; reads only the first frame of each file and `sample_records`
// of the first of each list.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "features/feature_spec.h"
#include "storage/tfrecord.h"

namespace brook::input {

struct DataCheckList {
  std::string what;  // how errors name the list: `data.eval[0] "test-*.tfrecord"`
  std::vector<std::string> files;
};

struct DataCheckOptions {
  std::optional<storage::Compression> compression;  // nullopt: from each file name
  int sample_records = 1000;                        // parsed from the first file of each list
  bool skip_corrupt = false;                        // data.on_corrupt: skip
};

struct DataCheckResult {
  std::vector<std::string> warnings;  // one line each, for the user
  uint64_t files_checked = 0;
  uint64_t records_sampled = 0;
};

// InvalidArgument (the data does not fit the spec) or NotFound (a file
// vanished) with a message naming the list, file and what is wrong.
absl::StatusOr<DataCheckResult> CheckData(const FeatureSpec& spec,
                                          const std::vector<DataCheckList>& lists,
                                          const DataCheckOptions& options = {});

}  // namespace brook::input
