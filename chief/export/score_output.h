// Per-example scores, what `brook predict --output FILE` writes: one row per
// scored example, in the order scored (the files as given, each file's
// records in order).
//
//   FILE.csv                a header, then one line per example:
//                             [ID,]label,score
//                           ID is the --id-feature's value under that
//                           feature's name (bytes CSV-quoted when needed,
//                           int64 in decimal, float as below); label and
//                           score as %.9g (a float reads back exactly).
//   FILE.tfrecord[s][.gz]   one tf.train.Example per example: float_list
//                           `score`, float_list `label`, and the id feature
//                           copied as its record had it. `.gz`: GZIP.
//
// The file appears only when every row is written: rows go to FILE.tmp,
// renamed onto FILE by Finish(); a writer destroyed unfinished removes it.
//
// Thread-compatible.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/tfrecord.h"
#include "tensorflow/feature.pb.h"

namespace brook::chief {

enum class ScoreFileFormat { kCsv, kTfRecord };

struct ScoreFileType {
  ScoreFileFormat format = ScoreFileFormat::kCsv;
  storage::Compression compression = storage::Compression::kNone;
};

// The format from the file name: ".csv"; ".tfrecord" or ".tfrecords",
// optionally followed by ".gz" (GZIP). INVALID_ARGUMENT naming the path and
// the extensions known for anything else.
absl::StatusOr<ScoreFileType> ScoreFileTypeFromPath(const std::string& path);

class ScoreWriter {
 public:
  // Opens `path`.tmp (INVALID_ARGUMENT for an unknown extension, the
  // filesystem's error naming the path when it cannot be created).
  // `id_feature` empty: no id column; else its name, which may not be
  // "label" or "score" (INVALID_ARGUMENT).
  static absl::StatusOr<std::unique_ptr<ScoreWriter>> Open(const std::string& path,
                                                           const std::string& id_feature);
  virtual ~ScoreWriter() = default;

  // `id` is the id feature of the example's record (exactly one value), or
  // nullptr without an id feature.
  virtual absl::Status Write(float label, float score, const tf::Feature* id) = 0;
  // Closes the file and renames it onto `path`.
  virtual absl::Status Finish() = 0;
  virtual uint64_t rows() const = 0;
};

// Reads one feature of every record of `files`, in order: the ids beside
// the scores of those records.
class IdReader {
 public:
  // `compression` nullopt: from each file's name.
  static absl::StatusOr<std::unique_ptr<IdReader>> Open(
      std::vector<std::string> files, std::optional<storage::Compression> compression,
      std::string feature);
  virtual ~IdReader() = default;

  // The next record's feature. INVALID_ARGUMENT naming the feature, file and
  // record index when the record lacks it or it holds other than one value;
  // DATA_LOSS for a record that is not a tf.train.Example; OUT_OF_RANGE past
  // the last record. Valid until the next call.
  virtual absl::StatusOr<const tf::Feature*> Next() = 0;
};

}  // namespace brook::chief
