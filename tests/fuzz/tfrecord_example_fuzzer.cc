// Fuzzes the TFRecord reader and the tf.train.Example wire parser together,
// the way the input pipeline uses them. The first input byte picks reader
// options (compression, skip-corrupt); the rest is the file. Every record that
// comes out is parsed by the wire parser and by the protobuf reference parser;
// when both accept it they must produce identical columns (differential check).
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "storage/file.h"
#include "storage/tfrecord.h"
#include "trainer/input/example_parser.h"
#include "trainer/input/example_parser_reference.h"
#include "trainer/input/feature_spec.h"

namespace {

class MemoryInput : public brook::storage::InputStream {
 public:
  explicit MemoryInput(std::string_view data) : data_(data) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    size_t k = std::min(n, data_.size() - pos_);
    std::memcpy(buf, data_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  const std::string& name() const override { return name_; }

 private:
  std::string_view data_;
  size_t pos_ = 0;
  std::string name_ = "fuzz-input";
};

const brook::input::ExampleParser& Parser() {
  static const brook::input::ExampleParser* parser = [] {
    std::string yaml = "label: {name: label, type: float}\nfeatures:\n";
    for (int i = 1; i <= 3; ++i) yaml += "  - {name: I" + std::to_string(i) + ", type: float, length: 1}\n";
    yaml += "  - {name: I4, type: int64, length: 2, default: 7}\n";
    for (int i = 1; i <= 3; ++i) yaml += "  - {name: C" + std::to_string(i) + ", type: int64, kind: varlen}\n";
    yaml += "  - {name: B1, type: bytes, kind: varlen, max_length: 3}\n";
    auto spec = brook::input::FeatureSpec::FromYaml(yaml);
    if (!spec.ok()) __builtin_trap();
    auto parser = brook::input::ExampleParser::Create(*spec);
    if (!parser.ok()) __builtin_trap();
    return new brook::input::ExampleParser(*std::move(parser));
  }();
  return *parser;
}

bool SameBatch(const brook::input::ColumnarBatch& a, const brook::input::ColumnarBatch& b) {
  if (a.num_rows != b.num_rows || a.columns.size() != b.columns.size()) return false;
  if (std::memcmp(a.labels.data(), b.labels.data(), a.labels.size() * sizeof(float)) != 0 ||
      a.labels.size() != b.labels.size())
    return false;
  for (size_t i = 0; i < a.columns.size(); ++i) {
    const auto& x = a.columns[i];
    const auto& y = b.columns[i];
    if (x.floats.size() != y.floats.size() ||
        std::memcmp(x.floats.data(), y.floats.data(), x.floats.size() * sizeof(float)) != 0)
      return false;
    if (x.int64s != y.int64s || x.ids != y.ids || x.row_splits != y.row_splits) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  brook::storage::TFRecordReaderOptions options;
  options.compression = static_cast<brook::storage::Compression>(data[0] % 3);
  options.skip_corrupt = (data[0] & 0x4) != 0;
  options.max_record_bytes = 1 << 20;
  options.buffer_bytes = 64 + (data[0] >> 3) * 16;  // small buffers reach refill paths
  std::string_view file(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto reader = brook::storage::TFRecordReader::Open(std::make_unique<MemoryInput>(file), options);
  if (!reader.ok()) return 0;

  const auto& parser = Parser();
  brook::input::ColumnarBatch wire_batch, ref_batch;
  brook::input::ParseStats wire_stats, ref_stats;
  parser.InitBatch(&wire_batch);
  parser.InitBatch(&ref_batch);
  parser.InitStats(&wire_stats);
  parser.InitStats(&ref_stats);
  for (int i = 0; i < 10000; ++i) {
    std::string_view record;
    auto more = (*reader)->Next(&record);
    if (!more.ok() || !*more) break;
    absl::Status wire = parser.Append(record, &wire_batch, &wire_stats);
    absl::Status ref = brook::input::ReferenceParse(parser.spec(), record, &ref_batch, &ref_stats);
    if (ref.ok() && !wire.ok()) __builtin_trap();  // protobuf accepts => wire must too
    if (wire.ok() && !ref.ok()) {
      // The wire parser is deliberately looser (it skips features outside the
      // spec unread and does not check UTF-8 in names, like TF's fast parser);
      // drop the row it added so the two batches stay in step.
      wire_batch.Clear();
      ref_batch.Clear();
      continue;
    }
    if (!SameBatch(wire_batch, ref_batch)) __builtin_trap();
  }
  return 0;
}
