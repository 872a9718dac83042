#include "trainer/input/data_check.h"

#include <memory>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "storage/file.h"
#include "trainer/input/example_parser.h"

namespace brook::input {
namespace {

storage::TFRecordReaderOptions ReaderOptions(const DataCheckOptions& o, const std::string& path) {
  storage::TFRecordReaderOptions r;
  r.compression = o.compression.value_or(storage::CompressionFromPath(path));
  r.use_mmap = false;  // a file may be replaced under us; read(2) is enough
  r.buffer_bytes = 64 << 10;
  return r;
}

// What the first bytes of a file that is not a TFRecord look like.
std::string Sniff(const std::string& path, storage::Compression compression) {
  absl::StatusOr<std::unique_ptr<storage::InputStream>> opened = storage::OpenLocalInput(path);
  if (!opened.ok()) return "";
  std::string head(4, '\0');
  absl::StatusOr<size_t> n = (*opened)->Read(head.data(), head.size());
  if (!n.ok()) return "";
  head.resize(*n);
  if (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
      static_cast<unsigned char>(head[1]) == 0x8b && compression != storage::Compression::kGzip) {
    return "; it starts like a GZIP file: read it as GZIP (a job spec's data.compression: "
           "gzip, or --compression gzip; a \".gz\" name is read as GZIP)";
  }
  bool text = !head.empty();
  for (char c : head) text = text && (c == '\n' || c == '\t' || c == '\r' || (c >= 32 && c < 127));
  if (text) return absl::StrCat("; it starts with text (\"", absl::CEscape(head), "...\")");
  return "";
}

absl::Status CheckOpens(const DataCheckList& list, const std::string& path,
                        const DataCheckOptions& o) {
  const storage::TFRecordReaderOptions ro = ReaderOptions(o, path);
  absl::StatusOr<std::unique_ptr<storage::TFRecordReader>> reader =
      storage::TFRecordReader::Open(path, ro);
  if (!reader.ok()) {
    return absl::Status(reader.status().code(),
                        absl::StrCat(list.what, " matches ", path,
                                     ", which cannot be read: ", reader.status().message()));
  }
  std::string_view record;
  absl::StatusOr<bool> first = (*reader)->Next(&record);
  if (first.ok()) return absl::OkStatus();
  if ((*reader)->offset() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        list.what, " matches ", path, ", which is not a TFRecord file (",
        std::string(storage::CompressionName(ro.compression)),
        "): its first bytes are not a record frame", Sniff(path, ro.compression),
        ". If the glob picks up other files (e.g. a feature_spec.yaml beside the shards), "
        "narrow it, e.g. \"train-*.tfrecord\""));
  }
  if (o.skip_corrupt) return absl::OkStatus();  // counted when it is read
  return absl::InvalidArgumentError(absl::StrCat(list.what, ": ", first.status().message()));
}

// Parses the first records of `path` and adds what does not fit to `result`.
absl::Status Sample(const FeatureSpec& spec, const DataCheckList& list, const std::string& path,
                    const DataCheckOptions& o, DataCheckResult* result) {
  // Defaults for missing features, so their absence is counted, not fatal:
  // the real policy decides below what the counts mean.
  FeatureSpec counting = spec;
  counting.on_missing = MissingPolicy::kDefault;
  ASSIGN_OR_RETURN(ExampleParser parser, ExampleParser::Create(counting));
  ColumnarBatch batch;
  parser.InitBatch(&batch);
  ParseStats stats;
  parser.InitStats(&stats);
  storage::TFRecordReaderOptions ro = ReaderOptions(o, path);
  ro.skip_corrupt = o.skip_corrupt;
  ASSIGN_OR_RETURN(std::unique_ptr<storage::TFRecordReader> reader,
                   storage::TFRecordReader::Open(path, ro));
  uint64_t rows = 0, rejected = 0;
  std::string first_error;
  std::string_view record;
  while (rows < static_cast<uint64_t>(o.sample_records)) {
    absl::StatusOr<bool> next = reader->Next(&record);
    if (!next.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(list.what, ": ", next.status().message()));
    }
    if (!*next) break;
    const uint64_t index = reader->record_index() - 1;
    ++rows;
    if (absl::Status s = parser.Append(record, &batch, &stats); !s.ok()) {
      ++rejected;
      if (first_error.empty()) {
        first_error = absl::StrCat(path, " record ", index, ": ", s.message());
      }
    }
    if (batch.num_rows >= 4096) parser.InitBatch(&batch);
  }
  result->records_sampled += rows;
  if (rejected > 0) {
    if (!o.skip_corrupt) {
      return absl::InvalidArgumentError(absl::StrCat(
          list.what, ": ", first_error, " (", rejected, " of the first ", rows,
          " records do not parse under the feature spec; to skip and count them instead, set "
          "data.on_corrupt: skip)"));
    }
    result->warnings.push_back(
        absl::StrFormat("%s: %d of the first %d records of %s do not parse and will be skipped "
                        "(data.on_corrupt: skip); the first: %s",
                        list.what, rejected, rows, path, first_error));
  }
  const uint64_t parsed = rows - rejected;
  if (parsed == 0) return absl::OkStatus();
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const uint64_t missing = i < stats.missing.size() ? stats.missing[i] : 0;
    if (missing == 0) continue;
    const FeatureSpecEntry& f = spec.features[i];
    const double rate = static_cast<double>(missing) / static_cast<double>(parsed);
    const std::string where = absl::StrFormat("%d of the first %d records (%.1f%%) of %s", missing,
                                              parsed, 100 * rate, path);
    if (spec.on_missing == MissingPolicy::kError) {
      return absl::InvalidArgumentError(absl::StrCat(
          list.what, ": feature \"", f.name, "\" of the feature spec is absent from ", where,
          missing == parsed ? ": is the name right? The data's features are listed by `brook "
                              "data inspect`"
                            : "",
          " (the spec says on_missing: error; on_missing: default fills absent features with "
          "their default)"));
    }
    const std::string fill = f.kind == FeatureKind::kVarLen
                                 ? std::string("an empty id list")
                                 : absl::StrCat("its default ", f.default_value);
    result->warnings.push_back(
        missing == parsed
            ? absl::StrCat(list.what, ": feature \"", f.name, "\" is absent from all ", where,
                           ": every example gets ", fill,
                           " (on_missing: default). Is the name right? `brook data inspect` "
                           "lists the data's features")
            : absl::StrCat(list.what, ": feature \"", f.name, "\" is absent from ", where,
                           "; those get ", fill, " (on_missing: default)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DataCheckResult> CheckData(const FeatureSpec& spec,
                                          const std::vector<DataCheckList>& lists,
                                          const DataCheckOptions& options) {
  DataCheckResult result;
  for (const DataCheckList& list : lists) {
    for (const std::string& path : list.files) {
      RETURN_IF_ERROR(CheckOpens(list, path, options));
      ++result.files_checked;
    }
    if (!list.files.empty() && options.sample_records > 0) {
      RETURN_IF_ERROR(Sample(spec, list, list.files.front(), options, &result));
    }
  }
  return result;
}

}  // namespace brook::input
