// Per-feature statistics over TFRecord files of tf.train.Example, for
// `brook data stats`: whatever features the records carry, no spec needed.
//
//   ASSIGN_OR_RETURN(DatasetStats s, ComputeStats({"train-00000-of-00004.tfrecord"}, {}));
//   std::cout << FormatStatsTable(s);
//
// Memory is bounded per feature (a HyperLogLog sketch and a Space-Saving
// summary), not per value, so any dataset size streams through. Counts of
// distinct values are estimates (exact up to HyperLogLog::kExactLimit), top
// values exact until a feature has more distinct values than the summary has
// counters. StatsAccumulator is thread-compatible.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"
#include "storage/tfrecord.h"

namespace brook::datatools {

// The value lists of tf.train.Feature.
enum class ValueKind { kInt64 = 0, kFloat = 1, kBytes = 2 };
inline constexpr int kNumValueKinds = 3;
std::string_view ValueKindName(ValueKind k);  // "int64" | "float" | "bytes"

struct TopValue {
  std::string value;   // bytes as is; int64 in decimal
  uint64_t count = 0;  // upper bound (exact when error == 0)
  uint64_t error = 0;
};

struct FeatureStats {
  std::string name;
  // Examples in which the feature carried each kind of list. A Feature with
  // no list set counts as present with zero values and no kind.
  int64_t kind_examples[kNumValueKinds] = {0, 0, 0};
  int64_t present = 0;     // examples with the feature (any kind, even empty)
  int64_t missing = 0;     // examples without it
  int64_t min_values = 0;  // values per example, over examples where present
  int64_t max_values = 0;
  int64_t total_values = 0;
  // Numeric values (int64 and float lists). NaN and infinities are counted in
  // non_finite and left out of the range and mean.
  int64_t numeric_values = 0;
  int64_t non_finite = 0;
  std::optional<int64_t> int_min, int_max;     // over int64 values, exact
  std::optional<double> float_min, float_max;  // over float values (float32 exactly)
  double mean = 0;                             // over finite numeric values
  double distinct = 0;                         // estimate over all values (hashes of the value)
  std::vector<TopValue> top;                   // bytes and int64 values, most frequent first

  // The kind seen in the most examples (ties: int64 < float < bytes); for a
  // feature never seen with a list, kFloat.
  ValueKind main_kind() const;
  int kinds_seen() const;  // how many different kinds occurred
};

struct DatasetStats {
  int64_t examples = 0;
  std::vector<std::string> files;
  std::vector<FeatureStats> features;  // in natural order of names (NaturalLess)

  const FeatureStats* Find(std::string_view name) const;
};

struct StatsOptions {
  // nullopt: from each file's name (storage::CompressionFromPath).
  std::optional<storage::Compression> compression;
  int top_k = 10;
  // Skip corrupt regions of a file (counted by the reader) instead of failing.
  bool skip_corrupt = false;
  // Stop after this many examples in total (0: read everything); for a quick
  // look at a huge dataset.
  int64_t max_examples = 0;
  // If set, examples read so far, and bytes of uncompressed files read so
  // far (compressed files count when finished), for a progress printer on
  // another thread (relaxed).
  std::atomic<int64_t>* progress_examples = nullptr;
  std::atomic<int64_t>* progress_bytes = nullptr;
};

class StatsAccumulator {
 public:
  explicit StatsAccumulator(int top_k = 10);
  ~StatsAccumulator();
  StatsAccumulator(const StatsAccumulator&) = delete;
  StatsAccumulator& operator=(const StatsAccumulator&) = delete;

  // Adds one serialized tf.train.Example. INVALID_ARGUMENT if it does not
  // parse (nothing is counted then).
  absl::Status AddSerializedExample(std::string_view record);
  DatasetStats Finish() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads every record of every file. NOT_FOUND / INVALID_ARGUMENT for a file
// that cannot be opened; DATA_LOSS naming file and offset (or record index)
// for corrupt frames and records that are not tf.train.Example.
absl::StatusOr<DatasetStats> ComputeStats(const std::vector<std::string>& files,
                                          const StatsOptions& options);

// A human table, one feature per line.
std::string FormatStatsTable(const DatasetStats& stats);
nlohmann::json StatsToJson(const DatasetStats& stats);

// True if `value` is valid UTF-8 with no control characters: safe to show,
// to put in YAML and JSON as is.
bool IsPrintableText(std::string_view value);
// For display and JSON: printable text as is, anything else C-escaped
// (\x..), cut to max_chars (0: no limit) with "..." appended.
std::string PrintableValue(std::string_view value, size_t max_chars = 0);

}  // namespace brook::datatools
