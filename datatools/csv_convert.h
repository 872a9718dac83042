// `brook data convert`: rows of CSV/TSV text (optionally gzipped) to sharded
// TFRecord files of tf.train.Example, plus the feature spec that reads them.
//
//   ASSIGN_OR_RETURN(auto schema, ConvertSchema::Load("adult"));
//   ASSIGN_OR_RETURN(auto conv, CsvConverter::Open(schema, {"adult.train.csv"},
//                                                  {.out_dir = "out", .shards = 4}));
//   ASSIGN_OR_RETURN(ConvertResult r, conv->Run());
//
// Output: `{prefix}-{i:05d}-of-{n:05d}.tfrecord[.gz|.zz]` in out_dir, rows
// dealt round-robin (row r of the input, counting only rows written, goes to
// shard r % n). Round-robin rather than contiguous because inputs are often
// sorted (by day, by user, by label): each shard is then a uniform sample of
// the whole and the chief's work units are interchangeable. Shards are written
// under a `.tmp` name and renamed when all are complete, and a failed run
// removes what it wrote (shards, spec) and the directory if it created it:
// it leaves no file that looks finished and no empty output directory.
// Output is deterministic (protobuf maps serialized in key order), so the
// same input gives the same bytes.
//
// With test_fraction > 0, a row goes to the test shards
// (`{test_prefix}-...`, beside the train ones) when a hash of its fields
// (XXH64) falls below that fraction: the same row always lands on the same
// side, whatever the file order, shard count or run.
//
// A CsvConverter requires external synchronization.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "datatools/convert_schema.h"
#include "storage/tfrecord.h"

namespace brook::datatools {

// Splits one record of delimited text into fields. Unquoted fields are
// stripped of surrounding whitespace. With `quoting` (CSV), a field may be
// enclosed in double quotes (after optional spaces): it may then contain the
// delimiter, newlines and `""` for a quote, and is kept verbatim. Errors:
// OUT_OF_RANGE when the record ends inside a quoted field (the caller may
// append the next line and retry), INVALID_ARGUMENT for text after a closing
// quote, naming the field (1-based).
absl::StatusOr<std::vector<std::string>> SplitRecord(std::string_view record, char delimiter,
                                                     bool quoting);

// Reads records of delimited text from a local file, plain or gzip (zlib
// reads both transparently). Handles CRLF, a UTF-8 byte-order mark, blank
// lines (skipped) and quoted fields spanning lines.
class DelimitedReader {
 public:
  static absl::StatusOr<std::unique_ptr<DelimitedReader>> Open(const std::string& path,
                                                               char delimiter, bool quoting);
  ~DelimitedReader();
  DelimitedReader(const DelimitedReader&) = delete;
  DelimitedReader& operator=(const DelimitedReader&) = delete;

  // Sets *fields to the next record; false at end of file. Errors name
  // "path:line".
  absl::StatusOr<bool> Next(std::vector<std::string>* fields);
  // 1-based line on which the last record returned started.
  int64_t line() const { return record_line_; }
  // Bytes consumed from the file so far (compressed bytes for .gz).
  int64_t bytes_read() const;
  const std::string& path() const { return path_; }

 private:
  DelimitedReader(std::string path, void* gz, char delimiter, bool quoting);
  absl::StatusOr<bool> ReadLine(std::string* line);

  const std::string path_;
  void* const gz_;  // gzFile; void* keeps zlib.h out of this header
  const char delimiter_;
  const bool quoting_;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
  int64_t lines_read_ = 0;
  int64_t record_line_ = 0;
};

struct ConvertOptions {
  std::string out_dir;  // created if absent
  std::string prefix = "train";
  int shards = 1;
  storage::Compression compression = storage::Compression::kNone;
  // false: the first bad row (unparsable number, wrong field count, bad
  // label) stops the run with an error naming file:line and column.
  // true: such rows are counted, the first few reported, and skipped.
  bool skip_bad_rows = false;
  // Written into out_dir beside the shards; empty: not written.
  std::string feature_spec_name = "feature_spec.yaml";
  // Overrides the schema's `header:`. Unset, a schema without a header (the
  // criteo preset, a `header: false` file) still takes a first line made of
  // exactly its column names as a header.
  std::optional<bool> header;
  // A file whose first line has none of the schema's delimiters but splits
  // on the other one (comma vs tab) into the schema's columns is read with
  // that one: the criteo preset reads a Criteo CSV. Off when the caller
  // fixed the format.
  bool detect_delimiter = true;
  // Fraction of rows, chosen by a hash of the row, written to test shards.
  double test_fraction = 0;
  std::string test_prefix = "test";
  int test_shards = 0;  // 0: as many as `shards`
  // Progress for a printer on another thread, if set: rows read, and bytes
  // of input files consumed (of their total size). Relaxed atomics.
  std::atomic<int64_t>* progress_rows = nullptr;
  std::atomic<int64_t>* progress_bytes = nullptr;

  int EffectiveTestShards() const { return test_shards > 0 ? test_shards : shards; }

  absl::Status Validate() const;
};

struct ColumnCounts {
  std::string name;
  int64_t missing = 0;  // rows where the value was a missing token
};

struct ConvertResult {
  int64_t rows_read = 0;  // data rows seen (header and blank lines excluded)
  int64_t examples_written = 0;
  int64_t bad_rows = 0;                      // only with skip_bad_rows
  std::vector<std::string> bad_row_samples;  // the first kMaxBadRowSamples errors
  std::vector<std::string> shard_paths;
  std::vector<int64_t> shard_records;
  int64_t test_examples = 0;                  // of examples_written
  std::vector<std::string> test_shard_paths;  // empty without test_fraction
  std::vector<int64_t> test_shard_records;
  std::string feature_spec_path;      // empty if not written
  std::vector<ColumnCounts> columns;  // used columns, in file order

  static constexpr int kMaxBadRowSamples = 10;
};

// "{prefix}-{index:05d}-of-{count:05d}.tfrecord" plus ".gz"/".zz".
std::string ShardFileName(std::string_view prefix, int index, int count,
                          storage::Compression compression);

class CsvConverter {
 public:
  // Validates the schema and options, opens every input and resolves its
  // columns against the schema. Errors here are the caller's to fix
  // (INVALID_ARGUMENT, NOT_FOUND): a bad schema, an unreadable input, a
  // header that does not match the schema.
  static absl::StatusOr<std::unique_ptr<CsvConverter>> Open(ConvertSchema schema,
                                                            std::vector<std::string> inputs,
                                                            ConvertOptions options);
  ~CsvConverter();

  // Converts everything. A bad row is INVALID_ARGUMENT naming file, line and
  // column (unless skip_bad_rows); write errors are passed on. On any error
  // the files this run wrote are removed, and out_dir (with any parents) if
  // this run created it. Call once.
  absl::StatusOr<ConvertResult> Run();

 private:
  struct Input;
  CsvConverter(ConvertSchema schema, ConvertOptions options, std::vector<Input> inputs);

  const ConvertSchema schema_;
  const ConvertOptions options_;
  std::vector<Input> inputs_;
};

}  // namespace brook::datatools
