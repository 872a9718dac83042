#include "bench/tfrecord_bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/malloc_tuning.h"
#include "common/status_macros.h"
#include "features/feature_spec.h"
#include "storage/crc32c.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "trainer/input/example_parser.h"
#include "trainer/input/example_parser_reference.h"

namespace brook::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Best (shortest) wall time of `repeats` runs of fn.
template <typename Fn>
absl::StatusOr<double> BestOf(int repeats, Fn fn) {
  double best = 1e300;
  for (int i = 0; i < repeats; ++i) {
    auto t0 = Clock::now();
    RETURN_IF_ERROR(fn());
    best = std::min(best, Seconds(t0, Clock::now()));
  }
  return best;
}

// Criteo-shaped: 13 count-like floats, 26 single categorical ids, a label.
std::vector<std::string> MakeRecords(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> counts(1.0, 1.5);
  std::vector<std::string> records;
  records.reserve(n);
  brook::tf::Example example;
  for (int64_t i = 0; i < n; ++i) {
    example.Clear();
    auto* f = example.mutable_features()->mutable_feature();
    (*f)["label"].mutable_float_list()->add_value(static_cast<float>(rng() % 4 == 0));
    for (int d = 1; d <= 13; ++d)
      (*f)[absl::StrCat("I", d)].mutable_float_list()->add_value(std::floor(counts(rng)));
    for (int c = 1; c <= 26; ++c)
      (*f)[absl::StrCat("C", c)].mutable_int64_list()->add_value(
          static_cast<int64_t>(rng() % (c * 100000ull)));
    records.push_back(example.SerializeAsString());
  }
  return records;
}

input::FeatureSpec CriteoSpec() {
  input::FeatureSpec spec;
  spec.label_name = "label";
  for (int d = 1; d <= 13; ++d)
    spec.features.push_back({.name = absl::StrCat("I", d), .type = input::FeatureType::kFloat});
  for (int c = 1; c <= 26; ++c)
    spec.features.push_back({.name = absl::StrCat("C", c),
                             .type = input::FeatureType::kInt64,
                             .kind = input::FeatureKind::kVarLen});
  return spec;
}

absl::Status WriteFile(const std::string& path, const std::vector<std::string>& records,
                       storage::Compression compression) {
  storage::TFRecordWriterOptions wo;
  wo.compression = compression;
  ASSIGN_OR_RETURN(auto writer, storage::TFRecordWriter::Open(path, wo));
  for (const auto& r : records) RETURN_IF_ERROR(writer->Write(r));
  return writer->Close();
}

absl::Status PlainRead(const std::string& path, std::vector<char>* buf, uint64_t* total) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  *total = 0;
  while (true) {
    ssize_t n = ::read(fd, buf->data(), buf->size());
    if (n < 0) {
      ::close(fd);
      return absl::InternalError(absl::StrCat("read ", path, " failed"));
    }
    if (n == 0) break;
    *total += n;
  }
  ::close(fd);
  return absl::OkStatus();
}

absl::Status ReadAll(const std::string& path, storage::Compression c, uint64_t* records,
                     uint64_t* bytes) {
  storage::TFRecordReaderOptions ro;
  ro.compression = c;
  ASSIGN_OR_RETURN(auto reader, storage::TFRecordReader::Open(path, ro));
  std::string_view rec;
  *records = 0;
  *bytes = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool more, reader->Next(&rec));
    if (!more) break;
    ++*records;
    *bytes += rec.size();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunTfrecordBench(const TfrecordBenchOptions& options, std::ostream& out,
                              nlohmann::json* result) {
  if (options.examples <= 0 || options.repeats <= 0)
    return absl::InvalidArgumentError("--examples and --repeats must be positive");
  std::string dir = options.dir;
  bool own_dir = dir.empty();
  if (own_dir) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "brook_bench_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) return absl::InternalError("mkdtemp failed");
    dir = tmpl;
  }
  const std::string plain_path = dir + "/bench.tfrecord";
  const std::string gzip_path = dir + "/bench.tfrecord.gz";

  auto records = MakeRecords(options.examples, options.seed);
  RETURN_IF_ERROR(WriteFile(plain_path, records, storage::Compression::kNone));
  RETURN_IF_ERROR(WriteFile(gzip_path, records, storage::Compression::kGzip));
  const double file_bytes = static_cast<double>(std::filesystem::file_size(plain_path));
  uint64_t payload = 0;
  for (const auto& r : records) payload += r.size();

  // Ceiling 1: plain read() of the same file, hot in the page cache.
  std::vector<char> buf(1 << 20);
  uint64_t read_total = 0;
  RETURN_IF_ERROR(PlainRead(plain_path, &buf, &read_total));  // warm the cache
  ASSIGN_OR_RETURN(double t_read, BestOf(options.repeats,
                                         [&] { return PlainRead(plain_path, &buf, &read_total); }));

  // Ceiling 2: bare CRC32C over the same bytes, in 1 MiB chunks (one stream
  // per chunk, as crc32c::Extend runs it) and per record (as frames are).
  std::vector<char> blob;
  blob.reserve(static_cast<size_t>(file_bytes));
  for (const auto& r : records) blob.insert(blob.end(), r.begin(), r.end());
  volatile uint32_t sink = 0;
  ASSIGN_OR_RETURN(double t_crc, BestOf(options.repeats, [&] {
                     uint32_t c = 0;
                     for (size_t off = 0; off < blob.size(); off += (1 << 20))
                       c ^= storage::crc32c::Value(blob.data() + off,
                                                   std::min<size_t>(1 << 20, blob.size() - off));
                     sink = c;
                     return absl::OkStatus();
                   }));
  ASSIGN_OR_RETURN(double t_crc_rec, BestOf(options.repeats, [&] {
                     uint32_t c = 0;
                     for (const auto& r : records) c ^= storage::crc32c::Value(r);
                     sink = c;
                     return absl::OkStatus();
                   }));

  // Brook: TFRecordReader, both CRCs of every frame verified.
  uint64_t got_records = 0, got_bytes = 0;
  ASSIGN_OR_RETURN(double t_reader, BestOf(options.repeats, [&] {
                     return ReadAll(plain_path, storage::Compression::kNone, &got_records,
                                    &got_bytes);
                   }));
  if (got_records != records.size())
    return absl::InternalError(
        absl::StrCat("reader returned ", got_records, " of ", records.size(), " records"));
  ASSIGN_OR_RETURN(double t_gzip, BestOf(options.repeats, [&] {
                     return ReadAll(gzip_path, storage::Compression::kGzip, &got_records,
                                    &got_bytes);
                   }));

  // Parsing: wire parser vs the generated-protobuf reference, same records,
  // same columns, batches of 1024.
  auto spec = CriteoSpec();
  ASSIGN_OR_RETURN(auto parser, input::ExampleParser::Create(spec));
  input::ColumnarBatch batch;
  input::ParseStats stats;
  parser.InitBatch(&batch);
  parser.InitStats(&stats);
  ASSIGN_OR_RETURN(double t_wire, BestOf(options.repeats, [&]() -> absl::Status {
                     for (size_t i = 0; i < records.size(); ++i) {
                       if (batch.num_rows == 1024) batch.Clear();
                       RETURN_IF_ERROR(parser.Append(records[i], &batch, &stats));
                     }
                     return absl::OkStatus();
                   }));
  batch.Clear();
  ASSIGN_OR_RETURN(double t_proto, BestOf(options.repeats, [&]() -> absl::Status {
                     for (size_t i = 0; i < records.size(); ++i) {
                       if (batch.num_rows == 1024) batch.Clear();
                       RETURN_IF_ERROR(input::ReferenceParse(spec, records[i], &batch, &stats));
                     }
                     return absl::OkStatus();
                   }));
  brook::tf::Example example;
  ASSIGN_OR_RETURN(double t_proto_only, BestOf(options.repeats, [&]() -> absl::Status {
                     for (const auto& r : records)
                       if (!example.ParseFromString(r))
                         return absl::InternalError("protobuf parse failed");
                     return absl::OkStatus();
                   }));

  const double mb = 1e6;
  const double n = static_cast<double>(records.size());
  double read_mbs = file_bytes / t_read / mb;
  double crc_mbs = static_cast<double>(blob.size()) / t_crc / mb;
  double crc_rec_mbs = static_cast<double>(blob.size()) / t_crc_rec / mb;
  double reader_mbs = file_bytes / t_reader / mb;
  double gzip_mbs = file_bytes / t_gzip / mb;
  double ceiling = std::min(read_mbs, crc_mbs);
  double reader_ratio = reader_mbs / ceiling;
  double wire_eps = n / t_wire, proto_eps = n / t_proto, proto_only_eps = n / t_proto_only;
  double parse_ratio = wire_eps / proto_eps;

  auto pass = [](bool ok) { return ok ? "PASS" : "MISS"; };
  out << absl::StrFormat(
      "brook bench tfrecord: %d Criteo-shaped examples (%.1f MB file, mean record %.0f B), "
      "best of %d, allocator: %s, CRC32C: %s\n\n",
      records.size(), file_bytes / mb, static_cast<double>(payload) / n, options.repeats,
      MallocDescription(), storage::crc32c::HardwareAvailable() ? "SSE4.2" : "portable");
  out << absl::StrFormat("  %-46s %10s %14s   %s\n", "", "MB/s", "examples/s", "vs ceiling");
  out << absl::StrFormat("  %-46s %10.0f %14s   ceiling\n", "plain read() of the file (hot cache)",
                         read_mbs, "");
  out << absl::StrFormat("  %-46s %10.0f %14s   ceiling\n", "bare CRC32C, 1 MiB chunks", crc_mbs,
                         "");
  out << absl::StrFormat("  %-46s %10.0f %14s   (information)\n", "bare CRC32C, per record",
                         crc_rec_mbs, "");
  out << absl::StrFormat("  %-46s %10.0f %14.0f   %.0f%% of min(read, CRC) [goal >= 70%%] %s\n",
                         "TFRecordReader: read + both CRCs", reader_mbs, n / t_reader,
                         100 * reader_ratio, pass(reader_ratio >= 0.7));
  out << absl::StrFormat("  %-46s %10.0f %14.0f   (information: zlib inflate bound)\n",
                         "TFRecordReader: GZIP file (decompressed MB/s)", gzip_mbs, n / t_gzip);
  out << absl::StrFormat("  %-46s %10s %14.0f   %.1fx protobuf [goal >= 3x] %s\n",
                         "wire parser -> columns", "", wire_eps, parse_ratio,
                         pass(parse_ratio >= 3.0));
  out << absl::StrFormat("  %-46s %10s %14.0f   ceiling to beat\n",
                         "protobuf parser -> columns (reference)", "", proto_eps);
  out << absl::StrFormat("  %-46s %10s %14.0f   (information)\n",
                         "protobuf ParseFromString only, no columns", "", proto_only_eps);

  if (result) {
    *result = {{"examples", records.size()},
               {"file_mb", file_bytes / mb},
               {"allocator", MallocDescription()},
               {"plain_read_mb_s", read_mbs},
               {"bare_crc32c_mb_s", crc_mbs},
               {"bare_crc32c_per_record_mb_s", crc_rec_mbs},
               {"reader_mb_s", reader_mbs},
               {"reader_vs_ceiling", reader_ratio},
               {"gzip_reader_mb_s", gzip_mbs},
               {"wire_parser_examples_s", wire_eps},
               {"protobuf_parser_examples_s", proto_eps},
               {"protobuf_parse_only_examples_s", proto_only_eps},
               {"wire_vs_protobuf", parse_ratio}};
  }
  if (own_dir)
    std::filesystem::remove_all(dir);
  else {
    std::filesystem::remove(plain_path);
    std::filesystem::remove(gzip_path);
  }
  return absl::OkStatus();
}

}  // namespace brook::bench
