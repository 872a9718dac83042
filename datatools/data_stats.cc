#include "datatools/data_stats.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/absl_compat.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "datatools/hyperloglog.h"
#include "datatools/natural_order.h"
#include "datatools/space_saving.h"
#include "tensorflow/example.pb.h"

namespace brook::datatools {
namespace {

// Debian's abseil has its own string_view type, not std's.

// Salts keep an int64 and a float with the same bit pattern apart in the
// distinct-count sketch; strings go through Hash64 (XXH64) as everywhere.
constexpr uint64_t kInt64Salt = 0x1e7a'4b1d'0000'0001ULL;
constexpr uint64_t kFloatSalt = 0x1e7a'4b1d'0000'0002ULL;

// More counters than reported values, so that the reported top-k of a
// long-tailed feature are right: Space-Saving's error bound is N / capacity.
size_t SummaryCapacity(int top_k) { return std::max<size_t>(200, 20 * static_cast<size_t>(top_k)); }

struct FeatureAcc {
  explicit FeatureAcc(int top_k) : top(SummaryCapacity(top_k)) {}

  FeatureStats stats;
  double sum = 0;
  HyperLogLog hll;
  SpaceSaving top;
};

std::string FormatNumber(double v) { return absl::StrFormat("%.6g", v); }

}  // namespace

std::string_view ValueKindName(ValueKind k) {
  switch (k) {
    case ValueKind::kInt64:
      return "int64";
    case ValueKind::kFloat:
      return "float";
    case ValueKind::kBytes:
      return "bytes";
  }
  return "?";
}

ValueKind FeatureStats::main_kind() const {
  int best = static_cast<int>(ValueKind::kFloat);
  int64_t best_count = 0;
  for (int k = 0; k < kNumValueKinds; ++k) {
    if (kind_examples[k] > best_count) {
      best = k;
      best_count = kind_examples[k];
    }
  }
  return static_cast<ValueKind>(best);
}

int FeatureStats::kinds_seen() const {
  int n = 0;
  for (int64_t c : kind_examples) n += c > 0 ? 1 : 0;
  return n;
}

const FeatureStats* DatasetStats::Find(std::string_view name) const {
  auto it = std::lower_bound(
      features.begin(), features.end(), name,
      [](const FeatureStats& f, std::string_view n) { return NaturalLess(f.name, n); });
  return it != features.end() && it->name == name ? &*it : nullptr;
}

struct StatsAccumulator::Impl {
  explicit Impl(int k) : top_k(k) {}

  FeatureAcc& Get(const std::string& name) {
    auto it = features.find(name);
    if (it == features.end()) {
      it = features.emplace(name, std::make_unique<FeatureAcc>(top_k)).first;
      it->second->stats.name = name;
    }
    return *it->second;
  }

  void AddFloat(FeatureAcc& a, float v) {
    if (!std::isfinite(v)) {
      ++a.stats.non_finite;
      return;
    }
    if (v == 0.0f) v = 0.0f;  // -0 and +0 are one value
    const double d = v;
    a.stats.float_min = a.stats.float_min ? std::min(*a.stats.float_min, d) : d;
    a.stats.float_max = a.stats.float_max ? std::max(*a.stats.float_max, d) : d;
    a.sum += d;
    ++a.stats.numeric_values;
    a.hll.AddHash(Mix64(kFloatSalt, std::bit_cast<uint32_t>(v)));
  }

  void AddInt(FeatureAcc& a, int64_t v) {
    a.stats.int_min = a.stats.int_min ? std::min(*a.stats.int_min, v) : v;
    a.stats.int_max = a.stats.int_max ? std::max(*a.stats.int_max, v) : v;
    a.sum += static_cast<double>(v);
    ++a.stats.numeric_values;
    a.hll.AddHash(Mix64(kInt64Salt, static_cast<uint64_t>(v)));
    char buf[24];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
    a.top.Add(std::string_view(buf, end - buf));
  }

  void AddFeature(const std::string& name, const tf::Feature& feature) {
    FeatureAcc& a = Get(name);
    FeatureStats& s = a.stats;
    int64_t n = 0;
    switch (feature.kind_case()) {
      case tf::Feature::kBytesList:
        ++s.kind_examples[static_cast<int>(ValueKind::kBytes)];
        n = feature.bytes_list().value_size();
        for (const std::string& v : feature.bytes_list().value()) {
          a.hll.AddHash(Hash64(v));
          a.top.Add(v);
        }
        break;
      case tf::Feature::kFloatList:
        ++s.kind_examples[static_cast<int>(ValueKind::kFloat)];
        n = feature.float_list().value_size();
        for (float v : feature.float_list().value()) AddFloat(a, v);
        break;
      case tf::Feature::kInt64List:
        ++s.kind_examples[static_cast<int>(ValueKind::kInt64)];
        n = feature.int64_list().value_size();
        for (int64_t v : feature.int64_list().value()) AddInt(a, v);
        break;
      case tf::Feature::KIND_NOT_SET:
        break;
    }
    s.min_values = s.present == 0 ? n : std::min(s.min_values, n);
    s.max_values = s.present == 0 ? n : std::max(s.max_values, n);
    s.total_values += n;
    ++s.present;
  }

  const int top_k;
  int64_t examples = 0;
  tf::Example example;  // reused: parsing into it keeps its allocations
  absl::flat_hash_map<std::string, std::unique_ptr<FeatureAcc>> features;
};

StatsAccumulator::StatsAccumulator(int top_k) : impl_(std::make_unique<Impl>(top_k)) {}
StatsAccumulator::~StatsAccumulator() = default;

absl::Status StatsAccumulator::AddSerializedExample(std::string_view record) {
  if (!impl_->example.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
    return absl::InvalidArgumentError("record is not a tf.train.Example");
  }
  for (const auto& [name, feature] : impl_->example.features().feature()) {
    impl_->AddFeature(name, feature);
  }
  ++impl_->examples;
  return absl::OkStatus();
}

DatasetStats StatsAccumulator::Finish() const {
  DatasetStats out;
  out.examples = impl_->examples;
  for (const auto& [name, acc] : impl_->features) {
    FeatureStats s = acc->stats;
    s.missing = out.examples - s.present;
    s.mean = s.numeric_values > 0 ? acc->sum / static_cast<double>(s.numeric_values) : 0.0;
    s.distinct = acc->hll.Estimate();
    for (SpaceSaving::Entry& e : acc->top.Top(impl_->top_k)) {
      s.top.push_back({std::move(e.value), e.count, e.error});
    }
    out.features.push_back(std::move(s));
  }
  std::sort(
      out.features.begin(), out.features.end(),
      [](const FeatureStats& a, const FeatureStats& b) { return NaturalLess(a.name, b.name); });
  return out;
}

absl::StatusOr<DatasetStats> ComputeStats(const std::vector<std::string>& files,
                                          const StatsOptions& options) {
  if (files.empty()) return absl::InvalidArgumentError("no input files");
  StatsAccumulator acc(options.top_k);
  int64_t total = 0;
  int64_t bytes_before = 0;  // of the files already read
  for (const std::string& path : files) {
    storage::TFRecordReaderOptions ropts;
    ropts.compression = options.compression.value_or(storage::CompressionFromPath(path));
    // The reader's offset is in the decompressed stream: only an
    // uncompressed file's tells how much of it is read.
    const bool offset_is_file_bytes = ropts.compression == storage::Compression::kNone;
    ropts.skip_corrupt = options.skip_corrupt;
    ASSIGN_OR_RETURN(auto reader, storage::TFRecordReader::Open(path, ropts));
    std::string_view record;
    while (options.max_examples == 0 || total < options.max_examples) {
      const uint64_t index = reader->record_index();
      const uint64_t offset = reader->offset();
      ASSIGN_OR_RETURN(bool more, reader->Next(&record));
      if (!more) break;
      absl::Status s = acc.AddSerializedExample(record);
      if (!s.ok()) {
        return absl::DataLossError(
            absl::StrCat(path, ": record ", index, " at offset ", offset, ": ", s.message()));
      }
      ++total;
      if (options.progress_examples != nullptr) {
        options.progress_examples->store(total, std::memory_order_relaxed);
      }
      if (options.progress_bytes != nullptr && offset_is_file_bytes && (total & 1023) == 0) {
        options.progress_bytes->store(bytes_before + static_cast<int64_t>(reader->offset()),
                                      std::memory_order_relaxed);
      }
    }
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    bytes_before += ec ? 0 : static_cast<int64_t>(size);
    if (options.progress_bytes != nullptr) {
      options.progress_bytes->store(bytes_before, std::memory_order_relaxed);
    }
  }
  DatasetStats stats = acc.Finish();
  stats.files = files;
  return stats;
}

bool IsPrintableText(std::string_view v) {
  // Strict UTF-8 (RFC 3629: no overlong forms, no surrogates), as JSON
  // encoders demand.
  auto byte = [&](size_t i) { return static_cast<unsigned char>(v[i]); };
  size_t i = 0;
  while (i < v.size()) {
    const unsigned char c = byte(i);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return false;
    }
    if (i + len > v.size() || byte(i + 1) < lo || byte(i + 1) > hi) return false;
    for (size_t k = 2; k < len; ++k) {
      if ((byte(i + k) & 0xc0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

std::string PrintableValue(std::string_view value, size_t max_chars) {
  std::string out = IsPrintableText(value) ? std::string(value) : absl::CHexEscape(AbslView(value));
  if (max_chars > 0 && out.size() > max_chars) {
    size_t cut = max_chars;
    // Do not cut a UTF-8 sequence in half.
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) --cut;
    out = absl::StrCat(out.substr(0, cut), "...");
  }
  return out;
}

namespace {

std::string KindsText(const FeatureStats& f) {
  if (f.kinds_seen() <= 1)
    return f.kinds_seen() == 0 ? "empty" : std::string(ValueKindName(f.main_kind()));
  std::vector<absl::string_view> names;
  for (int k = 0; k < kNumValueKinds; ++k) {
    if (f.kind_examples[k] > 0) names.push_back(AbslView(ValueKindName(static_cast<ValueKind>(k))));
  }
  return absl::StrCat("mixed(", absl::StrJoin(names, ","), ")");
}

std::optional<double> NumericMin(const FeatureStats& f) {
  if (f.int_min && f.float_min) return std::min<double>(*f.int_min, *f.float_min);
  if (f.int_min) return static_cast<double>(*f.int_min);
  return f.float_min;
}

std::optional<double> NumericMax(const FeatureStats& f) {
  if (f.int_max && f.float_max) return std::max<double>(*f.int_max, *f.float_max);
  if (f.int_max) return static_cast<double>(*f.int_max);
  return f.float_max;
}

}  // namespace

std::string FormatStatsTable(const DatasetStats& stats) {
  constexpr size_t kTopShown = 3;
  const std::vector<std::string> header = {"feature",  "type", "present", "missing", "values",
                                           "distinct", "min",  "max",     "mean",    "top values"};
  std::vector<std::vector<std::string>> rows;
  for (const FeatureStats& f : stats.features) {
    std::vector<std::string> row;
    row.push_back(PrintableValue(f.name, 40));
    row.push_back(KindsText(f));
    row.push_back(stats.examples > 0 ? absl::StrFormat("%.2f%%", 100.0 * f.present / stats.examples)
                                     : "-");
    row.push_back(absl::StrCat(f.missing));
    row.push_back(f.min_values == f.max_values ? absl::StrCat(f.min_values)
                                               : absl::StrCat(f.min_values, "-", f.max_values));
    row.push_back(absl::StrFormat("%.0f", f.distinct));
    const auto lo = NumericMin(f);
    const auto hi = NumericMax(f);
    row.push_back(lo ? FormatNumber(*lo) : "");
    row.push_back(hi ? FormatNumber(*hi) : "");
    row.push_back(f.numeric_values > 0 ? FormatNumber(f.mean) : "");
    std::vector<std::string> top;
    for (size_t i = 0; i < f.top.size() && i < kTopShown; ++i) {
      top.push_back(absl::StrCat(PrintableValue(f.top[i].value, 24), " (", f.top[i].count, ")"));
    }
    if (f.top.size() > kTopShown) top.push_back("...");
    row.push_back(absl::StrJoin(top, ", "));
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  std::string out = absl::StrCat(stats.examples, " examples, ", stats.features.size(),
                                 " features, ", stats.files.size(), " file(s)\n");
  auto append_row = [&](const std::vector<std::string>& r) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      // Counts and numbers read best right-aligned; names and text left.
      const bool right = c >= 2 && c <= 8 && c != 4;
      const std::string pad(width[c] - r[c].size(), ' ');
      absl::StrAppend(&line, c > 0 ? "  " : "", right ? pad + r[c] : r[c] + pad);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
  };
  append_row(header);
  for (const auto& r : rows) append_row(r);
  return out;
}

nlohmann::json StatsToJson(const DatasetStats& stats) {
  nlohmann::json j;
  j["examples"] = stats.examples;
  nlohmann::json files = nlohmann::json::array();
  for (const std::string& f : stats.files) files.push_back(PrintableValue(f));
  j["files"] = std::move(files);
  nlohmann::json features = nlohmann::json::array();
  for (const FeatureStats& f : stats.features) {
    nlohmann::json jf;
    jf["name"] = PrintableValue(f.name);
    jf["type"] = f.kinds_seen() > 0 ? ValueKindName(f.main_kind()) : "empty";
    nlohmann::json kinds = nlohmann::json::object();
    for (int k = 0; k < kNumValueKinds; ++k) {
      if (f.kind_examples[k] > 0) {
        kinds[std::string(ValueKindName(static_cast<ValueKind>(k)))] = f.kind_examples[k];
      }
    }
    jf["kinds"] = kinds;
    jf["present"] = f.present;
    jf["missing"] = f.missing;
    jf["values_per_example"] = {
        {"min", f.min_values}, {"max", f.max_values}, {"total", f.total_values}};
    if (f.numeric_values > 0 || f.non_finite > 0) {
      nlohmann::json num;
      num["count"] = f.numeric_values;
      num["non_finite"] = f.non_finite;
      num["mean"] = f.mean;
      if (f.int_min) num["int64_min"] = *f.int_min;
      if (f.int_max) num["int64_max"] = *f.int_max;
      if (f.float_min) num["float_min"] = *f.float_min;
      if (f.float_max) num["float_max"] = *f.float_max;
      jf["numeric"] = num;
    }
    jf["distinct_estimate"] = std::llround(f.distinct);
    nlohmann::json top = nlohmann::json::array();
    for (const TopValue& t : f.top) {
      top.push_back({{"value", PrintableValue(t.value)}, {"count", t.count}, {"error", t.error}});
    }
    jf["top_values"] = top;
    features.push_back(std::move(jf));
  }
  j["features"] = std::move(features);
  return j;
}

}  // namespace brook::datatools
