// Fuzzes the TFRecord reader (storage/tfrecord.h): framing, CRCs, GZIP/ZLIB
// streams, skip_corrupt's resync scan, buffer refills. Input: 2 option bytes,
// then the file.
//   byte 0: bits 0-1 compression (0 none, 1 gzip, 2 zlib, 3 none),
//           bit 2 skip_corrupt, bit 3 verify_data_crc off,
//           bit 4 also read it as a local file (memory-mapped when
//           uncompressed) and count it with CountTFRecords
//   byte 1: read buffer = 16 + 16 * byte bytes (small buffers reach refills)
// Differential check with bit 4: the file reader (mmap) and the stream reader
// must return the same records and end the same way, and a file that reads
// to a clean end has as many frames as CountTFRecords counts.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "storage/file.h"
#include "storage/tfrecord.h"

namespace {

using brook::storage::Compression;
using brook::storage::TFRecordReader;
using brook::storage::TFRecordReaderOptions;

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

struct Outcome {
  std::vector<std::string> records;
  absl::StatusCode end = absl::StatusCode::kOk;  // of the Open or Next that stopped it
};

Outcome ReadAll(absl::StatusOr<std::unique_ptr<TFRecordReader>> reader) {
  Outcome out;
  if (!reader.ok()) {
    out.end = reader.status().code();
    return out;
  }
  for (int i = 0; i < 10000; ++i) {
    std::string_view record;
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) {
      out.end = more.status().code();
      break;
    }
    if (!*more) break;
    out.records.emplace_back(record);
    if ((*reader)->record_index() != out.records.size()) __builtin_trap();
  }
  if ((*reader)->stats().records != out.records.size()) __builtin_trap();
  return out;
}

const std::string& TempPath() {
  static const std::string* path = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto* p = new std::string(std::string(tmp != nullptr ? tmp : "/tmp") + "/brook-tfrecord-fuzz-" +
                              std::to_string(::getpid()) + ".tfrecord");
    return p;
  }();
  return *path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  TFRecordReaderOptions options;
  const int c = data[0] & 0x3;
  options.compression = c == 1   ? Compression::kGzip
                        : c == 2 ? Compression::kZlib
                                 : Compression::kNone;
  options.skip_corrupt = (data[0] & 0x4) != 0;
  options.verify_data_crc = (data[0] & 0x8) == 0;
  options.max_record_bytes = 1 << 20;
  options.buffer_bytes = 16 + size_t{data[1]} * 16;
  const std::string_view file(reinterpret_cast<const char*>(data) + 2, size - 2);

  Outcome stream = ReadAll(TFRecordReader::Open(std::make_unique<MemoryInput>(file), options));
  if ((data[0] & 0x10) == 0) return 0;

  const std::string& path = TempPath();
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) __builtin_trap();
    if (!file.empty() && std::fwrite(file.data(), 1, file.size(), f) != file.size())
      __builtin_trap();
    std::fclose(f);
  }
  Outcome local = ReadAll(TFRecordReader::Open(path, options));
  if (local.records != stream.records || local.end != stream.end) __builtin_trap();
  if (!options.skip_corrupt && stream.end == absl::StatusCode::kOk &&
      stream.records.size() < 10000) {
    absl::StatusOr<uint64_t> count = brook::storage::CountTFRecords(path, options.compression);
    if (!count.ok() || *count != stream.records.size()) __builtin_trap();
  }
  std::remove(path.c_str());
  return 0;
}
