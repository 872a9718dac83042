#include "datatools/csv_convert.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/absl_compat.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "tensorflow/example.pb.h"

namespace brook::datatools {
namespace {

// Debian's abseil has its own string_view type, not std's.

constexpr size_t kReadChunk = 1 << 20;
// A line (or a quoted record spanning lines) longer than this is taken to be
// a binary file or a stray quote, not a row: fail instead of buffering it all.
constexpr size_t kMaxRecordBytes = 64 << 20;

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

absl::Status Prefixed(std::string_view where, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(AbslView(where), ": ", s.message()));
}

// Parses a number for a float feature. Non-finite values are refused: "nan"
// or "inf" in a CSV is almost always a missing-value marker, which belongs in
// `missing:`, and a NaN feature silently poisons training.
absl::StatusOr<float> ParseNumber(std::string_view text) {
  double d = 0;
  if (!absl::SimpleAtod(AbslView(text), &d)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", AbslView(text), "\" is not a number"));
  }
  const float f = static_cast<float>(d);
  if (!std::isfinite(d) || !std::isfinite(f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", AbslView(text),
                     "\" is not a finite float (list it under `missing:` if it "
                     "marks a missing value)"));
  }
  return f;
}

std::string SerializeDeterministic(const tf::Example& example) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream sos(&out);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    example.SerializeToCodedStream(&cos);
  }
  return out;
}

std::string_view CompressionSuffix(storage::Compression c) {
  switch (c) {
    case storage::Compression::kNone:
      return "";
    case storage::Compression::kGzip:
      return ".gz";
    case storage::Compression::kZlib:
      return ".zz";
  }
  return "";
}

absl::StatusOr<float> LabelValue(const LabelSchema& label, std::string_view value) {
  if (label.positive.empty()) {
    auto f = ParseNumber(value);
    if (!f.ok()) return Prefixed(absl::StrCat("label column \"", label.column, "\""), f.status());
    return *f;
  }
  auto in = [value](const std::vector<std::string>& v) {
    return std::find(v.begin(), v.end(), value) != v.end();
  };
  if (in(label.positive)) return 1.0f;
  if (label.negative.empty() || in(label.negative)) return 0.0f;
  return absl::InvalidArgumentError(
      absl::StrCat("label column \"", label.column, "\": \"", AbslView(value),
                   "\" is neither positive (", absl::StrJoin(label.positive, ", "),
                   ") nor negative (", absl::StrJoin(label.negative, ", "), ")"));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SplitRecord(std::string_view record, char delimiter,
                                                     bool quoting) {
  std::vector<std::string> fields;
  size_t i = 0;
  const size_t n = record.size();
  while (true) {
    size_t j = i;
    while (j < n && IsBlank(record[j]) && record[j] != delimiter) ++j;
    if (quoting && j < n && record[j] == '"') {
      std::string value;
      size_t k = j + 1;
      while (true) {
        if (k >= n) {
          return absl::OutOfRangeError(
              absl::StrCat("field ", fields.size() + 1, ": the record ends inside a quoted field"));
        }
        if (record[k] == '"') {
          if (k + 1 < n && record[k + 1] == '"') {  // "" is an escaped quote
            value += '"';
            k += 2;
            continue;
          }
          ++k;
          break;
        }
        value += record[k++];
      }
      while (k < n && IsBlank(record[k]) && record[k] != delimiter) ++k;
      if (k < n && record[k] != delimiter) {
        return absl::InvalidArgumentError(
            absl::StrCat("field ", fields.size() + 1, ": unexpected text after a closing quote"));
      }
      fields.push_back(std::move(value));
      if (k >= n) break;
      i = k + 1;
    } else {
      const size_t k = record.find(delimiter, i);
      const std::string_view field =
          record.substr(i, k == std::string_view::npos ? std::string_view::npos : k - i);
      fields.emplace_back(absl::StripAsciiWhitespace(AbslView(field)));
      if (k == std::string_view::npos) break;
      i = k + 1;
    }
  }
  return fields;
}

// ---------------------------------------------------------------------------
// DelimitedReader

DelimitedReader::DelimitedReader(std::string path, void* gz, char delimiter, bool quoting)
    : path_(std::move(path)), gz_(gz), delimiter_(delimiter), quoting_(quoting) {}

DelimitedReader::~DelimitedReader() { gzclose(static_cast<gzFile>(gz_)); }

absl::StatusOr<std::unique_ptr<DelimitedReader>> DelimitedReader::Open(const std::string& path,
                                                                       char delimiter,
                                                                       bool quoting) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a text file"));
  }
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  gzbuffer(gz, 256 << 10);
  return std::unique_ptr<DelimitedReader>(new DelimitedReader(path, gz, delimiter, quoting));
}

int64_t DelimitedReader::bytes_read() const {
  return static_cast<int64_t>(gzoffset(static_cast<gzFile>(gz_)));
}

absl::StatusOr<bool> DelimitedReader::ReadLine(std::string* line) {
  while (true) {
    const size_t nl = buf_.find('\n', pos_);
    if (nl != std::string::npos || (eof_ && pos_ < buf_.size())) {
      const size_t end = nl != std::string::npos ? nl : buf_.size();
      line->assign(buf_, pos_, end - pos_);
      pos_ = end + (nl != std::string::npos ? 1 : 0);
      if (!line->empty() && line->back() == '\r') line->pop_back();
      if (lines_read_++ == 0 && line->rfind("\xEF\xBB\xBF", 0) == 0) line->erase(0, 3);
      return true;
    }
    if (eof_) return false;
    if (buf_.size() - pos_ > kMaxRecordBytes) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ":", lines_read_ + 1,
                                                     ": line longer than ", kMaxRecordBytes,
                                                     " bytes; is this a text file?"));
    }
    buf_.erase(0, pos_);
    pos_ = 0;
    const size_t old = buf_.size();
    buf_.resize(old + kReadChunk);
    const int got = gzread(static_cast<gzFile>(gz_), buf_.data() + old, kReadChunk);
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(static_cast<gzFile>(gz_), &errnum);
      return absl::DataLossError(absl::StrCat(path_, ":", lines_read_ + 1, ": read error: ", msg));
    }
    buf_.resize(old + static_cast<size_t>(got));
    if (got == 0) eof_ = true;
  }
}

absl::StatusOr<bool> DelimitedReader::Next(std::vector<std::string>* fields) {
  std::string line;
  do {
    ASSIGN_OR_RETURN(bool more, ReadLine(&line));
    if (!more) return false;
  } while (absl::StripAsciiWhitespace(line).empty());
  record_line_ = lines_read_;
  std::string record = std::move(line);
  while (true) {
    auto split = SplitRecord(record, delimiter_, quoting_);
    if (split.ok()) {
      *fields = std::move(*split);
      return true;
    }
    if (split.status().code() != absl::StatusCode::kOutOfRange) {
      return Prefixed(absl::StrCat(path_, ":", record_line_), split.status());
    }
    // A quoted field spans lines: keep reading until it closes.
    ASSIGN_OR_RETURN(bool more, ReadLine(&line));
    if (!more || record.size() > kMaxRecordBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ":", record_line_, ": ", split.status().message(), " (unbalanced quote?)"));
    }
    record += '\n';
    record += line;
  }
}

// ---------------------------------------------------------------------------
// CsvConverter

struct CsvConverter::Input {
  std::unique_ptr<DelimitedReader> reader;
  std::vector<ResolvedColumn> columns;
  // The first record when it was read to look for a header and is data.
  std::optional<std::vector<std::string>> pending;
  int64_t bytes = 0;  // file size
};

absl::Status ConvertOptions::Validate() const {
  if (out_dir.empty())
    return absl::InvalidArgumentError("--out (the output directory) is required");
  if (shards < 1 || shards > 99999) {
    return absl::InvalidArgumentError(absl::StrCat("--shards must be in [1, 99999], got ", shards));
  }
  if (prefix.empty() || prefix.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--prefix must be a non-empty file name prefix, got \"", prefix, "\""));
  }
  if (!(test_fraction >= 0 && test_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--test-fraction must be in [0, 1), got ", test_fraction));
  }
  if (test_fraction > 0) {
    if (test_prefix.empty() || test_prefix.find('/') != std::string::npos ||
        test_prefix == prefix) {
      return absl::InvalidArgumentError(
          absl::StrCat("the test shards' prefix must be a file name prefix other than --prefix \"",
                       prefix, "\", got \"", test_prefix, "\""));
    }
    if (test_shards < 0 || test_shards > 99999) {
      return absl::InvalidArgumentError(
          absl::StrCat("--test-shards must be in [0, 99999], got ", test_shards));
    }
  }
  return absl::OkStatus();
}

std::string ShardFileName(std::string_view prefix, int index, int count,
                          storage::Compression compression) {
  return absl::StrFormat("%s-%05d-of-%05d.tfrecord%s", AbslView(prefix), index, count,
                         AbslView(CompressionSuffix(compression)));
}

CsvConverter::CsvConverter(ConvertSchema schema, ConvertOptions options, std::vector<Input> inputs)
    : schema_(std::move(schema)), options_(std::move(options)), inputs_(std::move(inputs)) {}

CsvConverter::~CsvConverter() = default;

namespace {

bool AllAreColumnNames(const std::vector<std::string>& fields, const ConvertSchema& schema) {
  if (schema.columns.empty() || fields.size() != schema.columns.size()) return false;
  const std::vector<std::string> names = schema.ColumnNames();
  return std::all_of(fields.begin(), fields.end(), [&](const std::string& f) {
    return std::find(names.begin(), names.end(), f) != names.end();
  });
}

// The delimiter a file is read with: the schema's, unless the first line
// has none of it and splits on the other one into the schema's columns.
absl::StatusOr<std::pair<char, bool>> SniffDelimiter(const std::string& path,
                                                     const ConvertSchema& schema) {
  const std::pair<char, bool> own{schema.delimiter(), schema.quoting()};
  ASSIGN_OR_RETURN(auto reader, DelimitedReader::Open(path, own.first, own.second));
  std::vector<std::string> first;
  ASSIGN_OR_RETURN(bool got, reader->Next(&first));
  if (!got || first.size() != 1) return own;
  const std::pair<char, bool> other =
      own.first == ',' ? std::pair<char, bool>{'\t', false} : std::pair<char, bool>{',', true};
  auto split = SplitRecord(first[0], other.first, other.second);
  if (!split.ok() || split->size() < 2) return own;
  if (!schema.columns.empty() && split->size() != schema.columns.size()) return own;
  return other;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CsvConverter>> CsvConverter::Open(ConvertSchema schema,
                                                                 std::vector<std::string> paths,
                                                                 ConvertOptions options) {
  RETURN_IF_ERROR(schema.Validate());
  RETURN_IF_ERROR(options.Validate());
  if (paths.empty()) return absl::InvalidArgumentError("no input files");
  std::vector<Input> inputs;
  std::vector<std::pair<std::string, ColumnType>> first_features;
  for (const std::string& path : paths) {
    Input in;
    std::pair<char, bool> delim{schema.delimiter(), schema.quoting()};
    if (options.detect_delimiter) {
      ASSIGN_OR_RETURN(delim, SniffDelimiter(path, schema));
    }
    ASSIGN_OR_RETURN(in.reader, DelimitedReader::Open(path, delim.first, delim.second));
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    in.bytes = ec ? 0 : static_cast<int64_t>(size);
    std::vector<std::string> first;
    ASSIGN_OR_RETURN(bool got, in.reader->Next(&first));
    bool header = options.header.value_or(schema.header);
    if (!options.header.has_value() && !schema.header && got && AllAreColumnNames(first, schema)) {
      header = true;  // a header line in a file the schema says has none
    }
    std::vector<std::string> names;
    if (header) {
      if (!got) return absl::InvalidArgumentError(absl::StrCat(path, ": empty; expected a header"));
      names = std::move(first);
    } else {
      if (schema.columns.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": without a header line the schema's `columns:` must list every column"));
      }
      names = schema.ColumnNames();
      if (got) in.pending = std::move(first);
    }
    auto resolved = ResolveColumns(schema, names);
    if (!resolved.ok()) return Prefixed(path, resolved.status());
    in.columns = std::move(*resolved);
    // Every file must yield the same features, or the one feature spec written
    // beside the shards would be wrong for some of them.
    std::vector<std::pair<std::string, ColumnType>> features;
    for (const ResolvedColumn& c : in.columns) {
      if (!c.is_label && c.type != ColumnType::kIgnore) features.emplace_back(c.name, c.type);
    }
    std::sort(features.begin(), features.end());
    if (inputs.empty()) {
      first_features = std::move(features);
    } else if (features != first_features) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": its columns give different features than ", paths.front(), "'s"));
    }
    inputs.push_back(std::move(in));
  }
  return std::unique_ptr<CsvConverter>(
      new CsvConverter(std::move(schema), std::move(options), std::move(inputs)));
}

namespace {

// Fills *example from one row. *missing gets the indices of columns whose
// value was missing. Errors name the column, not the place (the caller knows).
absl::Status BuildExample(const ConvertSchema& schema, const std::vector<ResolvedColumn>& columns,
                          const std::vector<std::string>& fields, tf::Example* example,
                          std::vector<int>* missing) {
  if (fields.size() != columns.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", columns.size(), " fields, got ", fields.size()));
  }
  example->Clear();
  missing->clear();
  auto* features = example->mutable_features()->mutable_feature();
  for (size_t i = 0; i < columns.size(); ++i) {
    const ResolvedColumn& col = columns[i];
    if (!col.is_label && col.type == ColumnType::kIgnore) continue;
    const std::string& value = fields[i];
    if (schema.IsMissing(value)) {
      if (col.is_label) {
        return absl::InvalidArgumentError(
            absl::StrCat("label column \"", col.name, "\" has no value"));
      }
      // Omitted from the Example: the parser's missing policy decides.
      missing->push_back(static_cast<int>(i));
      continue;
    }
    if (col.is_label) {
      ASSIGN_OR_RETURN(float label, LabelValue(schema.label, value));
      (*features)[col.name].mutable_float_list()->add_value(label);
    } else if (col.type == ColumnType::kNumeric) {
      auto f = ParseNumber(value);
      if (!f.ok()) return Prefixed(absl::StrCat("column \"", col.name, "\""), f.status());
      (*features)[col.name].mutable_float_list()->add_value(*f);
    } else if (col.separator.empty()) {
      (*features)[col.name].mutable_bytes_list()->add_value(value);
    } else {
      // A list: its elements, trimmed, in order. An empty element or one
      // equal to a missing token is dropped ("?|b" is [b]); a cell left with
      // none ("?|?", "|") is a missing feature, not a present empty list.
      std::vector<std::string> parts;
      for (absl::string_view part : absl::StrSplit(value, col.separator)) {
        part = absl::StripAsciiWhitespace(part);
        if (part.empty() || schema.IsMissing(std::string_view(part.data(), part.size()))) continue;
        parts.emplace_back(part);
      }
      if (parts.empty()) {
        missing->push_back(static_cast<int>(i));
        continue;
      }
      auto* list = (*features)[col.name].mutable_bytes_list();
      for (std::string& part : parts) list->add_value(std::move(part));
    }
  }
  return absl::OkStatus();
}

// Rows whose hash falls below `fraction` of the 64-bit range are test rows.
bool IsTestRow(const std::vector<std::string>& fields, double fraction) {
  if (fraction <= 0) return false;
  std::string key;
  for (const std::string& f : fields) {
    key += f;
    key += '\x1f';  // unit separator: "a,bc" and "ab,c" hash apart
  }
  const double u = static_cast<double>(Hash64(key) >> 11) * 0x1.0p-53;
  return u < fraction;
}

// What a run adds to the file system, undone when the guard is destroyed
// unless Keep() was called: a failed run leaves no shard or spec it wrote and
// no directory it created. A directory that existed before stays, holding
// what it held (a shard it replaced is gone, though: it was overwritten).
// Declare it before the ShardSets, so their temporary files are gone before
// it removes the directories.
class OutputGuard {
 public:
  explicit OutputGuard(std::string dir) : dir_(std::move(dir)) {}
  ~OutputGuard() {
    if (!kept_) Undo();
  }
  OutputGuard(const OutputGuard&) = delete;
  OutputGuard& operator=(const OutputGuard&) = delete;

  // Creates the directory and its missing parents, noting which were missing.
  absl::Status CreateDir() {
    std::filesystem::path p = std::filesystem::path(dir_).lexically_normal();
    if (!p.has_filename()) p = p.parent_path();  // "out/"
    std::error_code ec;
    for (; !p.empty() && !std::filesystem::exists(p, ec); p = p.parent_path()) {
      created_dirs_.push_back(p);  // deepest first
      if (p == p.parent_path()) break;
    }
    std::filesystem::create_directories(dir_, ec);
    if (ec) {
      return absl::PermissionDeniedError(
          absl::StrCat(dir_, ": cannot create directory: ", ec.message()));
    }
    return absl::OkStatus();
  }
  // `path` (complete or not) is this run's, to remove if the run fails.
  void AddFile(std::string path) { files_.push_back(std::move(path)); }
  void Keep() { kept_ = true; }

 private:
  // Best effort: the run is failing already. remove() takes only an empty
  // directory, so nothing another writer put there is lost.
  void Undo() {
    std::error_code ec;
    for (const std::string& f : files_) std::filesystem::remove(f, ec);
    for (const std::filesystem::path& d : created_dirs_) std::filesystem::remove(d, ec);
  }

  const std::string dir_;
  std::vector<std::filesystem::path> created_dirs_;
  std::vector<std::string> files_;
  bool kept_ = false;
};

// The output shards, written under ".tmp" names until Commit renames them.
class ShardSet {
 public:
  ~ShardSet() { Abandon(); }

  absl::Status Open(const ConvertOptions& options, const std::string& prefix, int shards) {
    storage::TFRecordWriterOptions wopts;
    wopts.compression = options.compression;
    for (int i = 0; i < shards; ++i) {
      paths_.push_back(absl::StrCat(options.out_dir, "/",
                                    ShardFileName(prefix, i, shards, options.compression)));
      tmp_paths_.push_back(paths_.back() + ".tmp");
      ASSIGN_OR_RETURN(auto w, storage::TFRecordWriter::Open(tmp_paths_.back(), wopts));
      writers_.push_back(std::move(w));
    }
    return absl::OkStatus();
  }

  absl::Status Write(int64_t index, const std::string& record) {
    return writers_[index % writers_.size()]->Write(record);
  }

  // Closes every shard and renames it into place, telling *guard of each;
  // fills the record counts.
  absl::Status Commit(std::vector<int64_t>* records, OutputGuard* guard) {
    for (auto& w : writers_) {
      RETURN_IF_ERROR(w->Close());
      records->push_back(static_cast<int64_t>(w->records_written()));
    }
    writers_.clear();
    for (size_t i = 0; i < paths_.size(); ++i) {
      std::error_code ec;
      std::filesystem::rename(tmp_paths_[i], paths_[i], ec);
      if (ec) {
        return absl::InternalError(
            absl::StrCat(paths_[i], ": cannot rename into place: ", ec.message()));
      }
      guard->AddFile(paths_[i]);
    }
    tmp_paths_.clear();
    return absl::OkStatus();
  }

  const std::vector<std::string>& paths() const { return paths_; }

 private:
  // A failed run leaves nothing behind: unclosed writers are dropped and
  // their temporary files removed (best effort: we are already failing).
  void Abandon() {
    writers_.clear();
    for (const std::string& p : tmp_paths_) {
      std::error_code ec;
      std::filesystem::remove(p, ec);
    }
    tmp_paths_.clear();
  }

  std::vector<std::string> paths_;
  std::vector<std::string> tmp_paths_;
  std::vector<std::unique_ptr<storage::TFRecordWriter>> writers_;
};

absl::Status WriteFeatureSpec(const std::string& path, const ConvertSchema& schema,
                              const std::vector<ResolvedColumn>& columns,
                              const ConvertOptions& options) {
  const input::FeatureSpec spec = ToFeatureSpec(schema, columns);
  std::ofstream out(path, std::ios::trunc);
  out << "# Reads " << options.prefix << "-*-of-" << absl::StrFormat("%05d", options.shards)
      << ".tfrecord" << AbslView(CompressionSuffix(options.compression));
  if (options.test_fraction > 0) {
    out << " and " << options.test_prefix << "-*-of-"
        << absl::StrFormat("%05d", options.EffectiveTestShards()) << ".tfrecord"
        << AbslView(CompressionSuffix(options.compression));
  }
  out << "; written by `brook data convert`.\n" << spec.ToYaml();
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ConvertResult> CsvConverter::Run() {
  OutputGuard guard(options_.out_dir);
  RETURN_IF_ERROR(guard.CreateDir());
  ShardSet shards;
  RETURN_IF_ERROR(shards.Open(options_, options_.prefix, options_.shards));
  ShardSet test_shards;
  if (options_.test_fraction > 0) {
    RETURN_IF_ERROR(
        test_shards.Open(options_, options_.test_prefix, options_.EffectiveTestShards()));
  }
  int64_t bytes_before = 0;  // of the files already converted
  int64_t train_written = 0;

  ConvertResult result;
  const std::vector<ResolvedColumn>& first_columns = inputs_.front().columns;
  std::vector<int64_t> missing_counts(first_columns.size(), 0);  // by first_columns index
  tf::Example example;
  std::vector<std::string> fields;
  std::vector<int> missing;
  for (Input& in : inputs_) {
    // Columns may sit in a different order in each file; count by name.
    std::vector<int> to_first(in.columns.size(), -1);
    for (size_t i = 0; i < in.columns.size(); ++i) {
      for (size_t j = 0; j < first_columns.size(); ++j) {
        if (first_columns[j].name == in.columns[i].name) to_first[i] = static_cast<int>(j);
      }
    }
    while (true) {
      absl::StatusOr<bool> next = true;
      if (in.pending.has_value()) {
        fields = *std::move(in.pending);
        in.pending.reset();
      } else {
        next = in.reader->Next(&fields);
      }
      if (options_.progress_bytes != nullptr && (result.rows_read & 1023) == 0) {
        options_.progress_bytes->store(bytes_before + in.reader->bytes_read(),
                                       std::memory_order_relaxed);
      }
      absl::Status row_status;
      if (next.ok()) {
        if (!*next) break;
        ++result.rows_read;
        row_status = BuildExample(schema_, in.columns, fields, &example, &missing);
        if (!row_status.ok()) {
          row_status =
              Prefixed(absl::StrCat(in.reader->path(), ":", in.reader->line()), row_status);
        }
      } else {
        // I/O errors end the run; a row the splitter refused is a bad row
        // (its message already names file:line).
        if (next.status().code() != absl::StatusCode::kInvalidArgument) return next.status();
        ++result.rows_read;
        row_status = next.status();
      }
      if (options_.progress_rows != nullptr) {
        options_.progress_rows->store(result.rows_read, std::memory_order_relaxed);
      }
      if (!row_status.ok()) {
        if (!options_.skip_bad_rows) return row_status;
        ++result.bad_rows;
        if (result.bad_row_samples.size() < ConvertResult::kMaxBadRowSamples) {
          result.bad_row_samples.emplace_back(row_status.message());
        }
        continue;
      }
      for (int i : missing) {
        if (to_first[i] >= 0) ++missing_counts[to_first[i]];
      }
      if (IsTestRow(fields, options_.test_fraction)) {
        RETURN_IF_ERROR(test_shards.Write(result.test_examples, SerializeDeterministic(example)));
        ++result.test_examples;
      } else {
        RETURN_IF_ERROR(shards.Write(train_written, SerializeDeterministic(example)));
        ++train_written;
      }
      ++result.examples_written;
    }
    bytes_before += in.bytes;
    if (options_.progress_bytes != nullptr) {
      options_.progress_bytes->store(bytes_before, std::memory_order_relaxed);
    }
  }
  RETURN_IF_ERROR(shards.Commit(&result.shard_records, &guard));
  result.shard_paths = shards.paths();
  if (options_.test_fraction > 0) {
    RETURN_IF_ERROR(test_shards.Commit(&result.test_shard_records, &guard));
    result.test_shard_paths = test_shards.paths();
  }

  for (size_t j = 0; j < first_columns.size(); ++j) {
    const ResolvedColumn& c = first_columns[j];
    if (c.is_label || c.type != ColumnType::kIgnore)
      result.columns.push_back({c.name, missing_counts[j]});
  }
  if (!options_.feature_spec_name.empty()) {
    result.feature_spec_path = absl::StrCat(options_.out_dir, "/", options_.feature_spec_name);
    guard.AddFile(result.feature_spec_path);
    RETURN_IF_ERROR(WriteFeatureSpec(result.feature_spec_path, schema_, first_columns, options_));
  }
  guard.Keep();
  return result;
}

}  // namespace brook::datatools
