#include "chief/export/score_output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "tensorflow/example.pb.h"

namespace brook::chief {
namespace {

std::string Float(float v) { return absl::StrFormat("%.9g", v); }

// RFC 4180: quoted when it holds a comma, quote, line break or edge blank.
std::string CsvCell(std::string_view s) {
  const bool quote = s.find_first_of(",\"\r\n") != std::string_view::npos ||
                     (!s.empty() && (s.front() == ' ' || s.back() == ' '));
  if (!quote) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string IdCell(const tf::Feature& id) {
  switch (id.kind_case()) {
    case tf::Feature::kBytesList:
      return CsvCell(id.bytes_list().value(0));
    case tf::Feature::kInt64List:
      return absl::StrCat(id.int64_list().value(0));
    case tf::Feature::kFloatList:
      return Float(id.float_list().value(0));
    case tf::Feature::KIND_NOT_SET:
      break;
  }
  return "";
}

class ScoreWriterImpl : public ScoreWriter {
 public:
  ScoreWriterImpl(std::string path, std::string id_feature, ScoreFileType type)
      : path_(std::move(path)), tmp_(path_ + ".tmp"), id_(std::move(id_feature)), type_(type) {}
  ~ScoreWriterImpl() override {
    if (csv_ != nullptr) std::fclose(csv_);
    if (tfrecord_ != nullptr) tfrecord_->Close().IgnoreError();  // removed below: unfinished
    if (!finished_) {
      std::error_code ec;
      std::filesystem::remove(tmp_, ec);
    }
  }

  absl::Status Open() {
    if (type_.format == ScoreFileFormat::kTfRecord) {
      ASSIGN_OR_RETURN(tfrecord_,
                       storage::TFRecordWriter::Open(tmp_, {.compression = type_.compression}));
      return absl::OkStatus();
    }
    csv_ = std::fopen(tmp_.c_str(), "w");
    if (csv_ == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot create ", tmp_, ": ", std::strerror(errno)));
    }
    return Put(absl::StrCat(id_.empty() ? "" : CsvCell(id_) + ",", "label,score\n"));
  }

  absl::Status Write(float label, float score, const tf::Feature* id) override {
    ++rows_;
    if (csv_ != nullptr) {
      return Put(absl::StrCat(id != nullptr ? IdCell(*id) + "," : "", Float(label), ",",
                              Float(score), "\n"));
    }
    example_.Clear();
    auto* features = example_.mutable_features()->mutable_feature();
    (*features)["score"].mutable_float_list()->add_value(score);
    (*features)["label"].mutable_float_list()->add_value(label);
    if (id != nullptr) (*features)[id_] = *id;
    if (!example_.SerializeToString(&record_)) {
      return absl::InternalError(absl::StrCat(tmp_, ": cannot serialize row ", rows_));
    }
    return tfrecord_->Write(record_);
  }

  absl::Status Finish() override {
    if (csv_ != nullptr) {
      const bool ok = std::fflush(csv_) == 0 && std::ferror(csv_) == 0;
      const bool closed = std::fclose(csv_) == 0;
      csv_ = nullptr;
      if (!ok || !closed) return absl::DataLossError(absl::StrCat("cannot write ", tmp_));
    } else {
      absl::Status st = tfrecord_->Close();
      tfrecord_.reset();
      RETURN_IF_ERROR(st);
    }
    std::error_code ec;
    std::filesystem::rename(tmp_, path_, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot rename ", tmp_, " to ", path_, ": ", ec.message()));
    }
    finished_ = true;
    return absl::OkStatus();
  }

  uint64_t rows() const override { return rows_; }

 private:
  absl::Status Put(const std::string& text) {
    if (std::fwrite(text.data(), 1, text.size(), csv_) != text.size()) {
      return absl::DataLossError(absl::StrCat("cannot write ", tmp_, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }

  const std::string path_, tmp_, id_;
  const ScoreFileType type_;
  std::FILE* csv_ = nullptr;
  std::unique_ptr<storage::TFRecordWriter> tfrecord_;
  tf::Example example_;
  std::string record_;
  uint64_t rows_ = 0;
  bool finished_ = false;
};

class IdReaderImpl : public IdReader {
 public:
  IdReaderImpl(std::vector<std::string> files, std::optional<storage::Compression> compression,
               std::string feature)
      : files_(std::move(files)), compression_(compression), feature_(std::move(feature)) {}

  absl::StatusOr<const tf::Feature*> Next() override {
    std::string_view record;
    for (;;) {
      if (reader_ == nullptr) {
        if (next_file_ >= files_.size()) {
          return absl::OutOfRangeError("ids: past the last record of the data");
        }
        const std::string& file = files_[next_file_++];
        ASSIGN_OR_RETURN(
            reader_,
            storage::TFRecordReader::Open(
                file, {.compression = compression_.value_or(storage::CompressionFromPath(file))}));
      }
      index_ = reader_->record_index();
      ASSIGN_OR_RETURN(const bool more, reader_->Next(&record));
      if (more) break;
      reader_.reset();
    }
    if (!example_.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
      return absl::DataLossError(
          absl::StrCat(reader_->name(), ": record ", index_, " is not a tf.train.Example"));
    }
    const auto& features = example_.features().feature();
    const auto it = features.find(feature_);
    if (it == features.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--id-feature ", feature_, ": missing in record ", index_, " of ", reader_->name()));
    }
    const tf::Feature& f = it->second;
    const int n = f.has_bytes_list()   ? f.bytes_list().value_size()
                  : f.has_int64_list() ? f.int64_list().value_size()
                  : f.has_float_list() ? f.float_list().value_size()
                                       : 0;
    if (n != 1) {
      return absl::InvalidArgumentError(absl::StrCat("--id-feature ", feature_, ": record ", index_,
                                                     " of ", reader_->name(), " holds ", n,
                                                     " values, want 1"));
    }
    return &f;
  }

 private:
  const std::vector<std::string> files_;
  const std::optional<storage::Compression> compression_;
  const std::string feature_;
  size_t next_file_ = 0;
  std::unique_ptr<storage::TFRecordReader> reader_;
  uint64_t index_ = 0;
  tf::Example example_;
};

}  // namespace

absl::StatusOr<ScoreFileType> ScoreFileTypeFromPath(const std::string& path) {
  absl::string_view name = path;
  ScoreFileType type;
  if (absl::EndsWith(name, ".gz")) {
    type.compression = storage::Compression::kGzip;
    name.remove_suffix(3);
  }
  if (type.compression == storage::Compression::kNone && absl::EndsWith(name, ".csv")) {
    type.format = ScoreFileFormat::kCsv;
    return type;
  }
  if (absl::EndsWith(name, ".tfrecord") || absl::EndsWith(name, ".tfrecords")) {
    type.format = ScoreFileFormat::kTfRecord;
    return type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--output ", path,
                   ": unknown file type; the extension picks it: .csv, .tfrecord or .tfrecords "
                   "(.tfrecord.gz for GZIP)"));
}

absl::StatusOr<std::unique_ptr<ScoreWriter>> ScoreWriter::Open(const std::string& path,
                                                               const std::string& id_feature) {
  ASSIGN_OR_RETURN(const ScoreFileType type, ScoreFileTypeFromPath(path));
  if (id_feature == "label" || id_feature == "score") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--id-feature ", id_feature, ": the output has a column of that name; pick another"));
  }
  auto writer = std::make_unique<ScoreWriterImpl>(path, id_feature, type);
  RETURN_IF_ERROR(writer->Open());
  return writer;
}

absl::StatusOr<std::unique_ptr<IdReader>> IdReader::Open(
    std::vector<std::string> files, std::optional<storage::Compression> compression,
    std::string feature) {
  if (feature.empty()) return absl::InvalidArgumentError("--id-feature: empty name");
  return std::make_unique<IdReaderImpl>(std::move(files), compression, std::move(feature));
}

}  // namespace brook::chief
