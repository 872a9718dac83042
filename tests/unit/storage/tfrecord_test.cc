// Round trips, compatibility with TensorFlow's and gzip's files, and the
// reader's position and memory contracts. Corruption: tfrecord_corruption_test.cc.
#include "storage/tfrecord.h"

#include <malloc.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/crc32c.h"
#include "tests/testing/test_util.h"

namespace brook::storage {
namespace {

using ::testing::HasSubstr;

struct ReadResult {
  std::vector<std::string> records;
  absl::Status status;  // OK when the file ended cleanly
};

ReadResult ReadAll(const std::string& path, const TFRecordReaderOptions& options) {
  ReadResult result;
  auto reader = TFRecordReader::Open(path, options);
  if (!reader.ok()) {
    result.status = reader.status();
    return result;
  }
  std::string_view record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) {
      result.status = more.status();
      break;
    }
    if (!*more) break;
    result.records.emplace_back(record);
  }
  return result;
}

ReadResult ReadAll(const std::string& path, Compression compression) {
  TFRecordReaderOptions options;
  options.compression = compression;
  return ReadAll(path, options);
}

void WriteRecords(const std::string& path, const std::vector<std::string>& records,
                  Compression compression, int level = 6) {
  TFRecordWriterOptions options;
  options.compression = compression;
  options.compression_level = level;
  auto writer = TFRecordWriter::Open(path, options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const std::string& record : records) ASSERT_TRUE((*writer)->Write(record).ok());
  EXPECT_EQ(records.size(), (*writer)->records_written());
  ASSERT_TRUE((*writer)->Close().ok());
}

// The frame format spelled out independently of the writer.
std::string Frame(const std::string& data) {
  std::string frame;
  auto put32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) frame.push_back(static_cast<char>(v >> (8 * i)));
  };
  uint64_t length = data.size();
  for (int i = 0; i < 8; ++i) frame.push_back(static_cast<char>(length >> (8 * i)));
  put32(crc32c::Mask(crc32c::Value(frame.data(), 8)));
  frame += data;
  put32(crc32c::Mask(crc32c::Value(data)));
  return frame;
}

std::string RandomString(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::vector<std::string> MixedRecords() {
  std::mt19937 rng(42);
  std::vector<std::string> records = {"", "x", std::string(1, '\0'), "hello tfrecord"};
  for (int i = 0; i < 20; ++i) records.push_back(RandomString(rng, rng() % 100001));
  for (int i = 0; i < 2000; ++i) records.push_back(RandomString(rng, rng() % 200));
  records.push_back(std::string(300000, 'z'));  // larger than the default buffer
  records.push_back("");
  return records;
}

// True if `program` can be run through the shell.
bool HaveProgram(const std::string& program) {
  return brook::testing::RunCommand({"/bin/sh", "-c", "command -v " + program}).exit_code == 0;
}

bool Shell(const std::string& command) {
  auto result = brook::testing::RunCommand({"/bin/sh", "-c", command});
  EXPECT_EQ(0, result.exit_code) << command << "\n" << result.output;
  return result.exit_code == 0;
}

TEST(CompressionTest, ParsesTensorFlowNames) {
  EXPECT_EQ(Compression::kNone, *ParseCompression(""));
  EXPECT_EQ(Compression::kNone, *ParseCompression("NONE"));
  EXPECT_EQ(Compression::kGzip, *ParseCompression("gzip"));
  EXPECT_EQ(Compression::kGzip, *ParseCompression("GZIP"));
  EXPECT_EQ(Compression::kZlib, *ParseCompression("Zlib"));
  auto bad = ParseCompression("snappy");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, bad.status().code());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("snappy"));
  for (Compression c : {Compression::kNone, Compression::kGzip, Compression::kZlib}) {
    EXPECT_EQ(c, *ParseCompression(CompressionName(c)));
  }
}

TEST(CompressionTest, GuessesFromPath) {
  EXPECT_EQ(Compression::kGzip, CompressionFromPath("a/b.tfrecord.gz"));
  EXPECT_EQ(Compression::kGzip, CompressionFromPath("b.GZIP"));
  EXPECT_EQ(Compression::kZlib, CompressionFromPath("b.zlib"));
  EXPECT_EQ(Compression::kZlib, CompressionFromPath("b.zz"));
  EXPECT_EQ(Compression::kNone, CompressionFromPath("b.tfrecords"));
  EXPECT_EQ(Compression::kNone, CompressionFromPath("gz"));
}

class TFRecordRoundTripTest : public ::testing::TestWithParam<Compression> {};

TEST_P(TFRecordRoundTripTest, ReadsBackWhatWasWritten) {
  brook::testing::TempDir dir;
  std::string path = dir.Join("data.tfrecord");
  std::vector<std::string> records = MixedRecords();
  WriteRecords(path, records, GetParam());

  uint64_t framed_bytes = 0;
  for (const std::string& r : records) framed_bytes += r.size() + 16;
  for (size_t buffer_bytes : {size_t{1}, size_t{100}, size_t{4096}, size_t{256} << 10}) {
    TFRecordReaderOptions options;
    options.compression = GetParam();
    options.buffer_bytes = buffer_bytes;
    auto reader = TFRecordReader::Open(path, options);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ(path, (*reader)->name());
    std::string_view record;
    uint64_t expected_offset = 0;
    for (size_t i = 0; i < records.size(); ++i) {
      ASSERT_EQ(i, (*reader)->record_index());
      ASSERT_EQ(expected_offset, (*reader)->offset());
      auto more = (*reader)->Next(&record);
      ASSERT_TRUE(more.ok()) << more.status();
      ASSERT_TRUE(*more) << "record " << i;
      ASSERT_EQ(records[i], record) << "record " << i << " buffer " << buffer_bytes;
      expected_offset += records[i].size() + 16;
    }
    auto more = (*reader)->Next(&record);
    ASSERT_TRUE(more.ok()) << more.status();
    EXPECT_FALSE(*more);
    EXPECT_FALSE(*(*reader)->Next(&record));  // the end stays the end
    EXPECT_EQ(records.size(), (*reader)->record_index());
    EXPECT_EQ(framed_bytes, (*reader)->offset());
    EXPECT_EQ(records.size(), (*reader)->stats().records);
    EXPECT_EQ(framed_bytes, (*reader)->stats().bytes);
    EXPECT_EQ(0u, (*reader)->stats().skipped_regions);
  }
}

TEST_P(TFRecordRoundTripTest, EmptyFileHasNoRecords) {
  brook::testing::TempDir dir;
  std::string written = dir.Join("written");
  WriteRecords(written, {}, GetParam());
  ReadResult result = ReadAll(written, GetParam());
  EXPECT_TRUE(result.status.ok()) << result.status;
  EXPECT_TRUE(result.records.empty());

  // A zero-byte file (e.g. from a writer that died before any output) too.
  std::string empty = dir.Join("empty");
  brook::testing::WriteFileOrDie(empty, "");
  result = ReadAll(empty, GetParam());
  EXPECT_TRUE(result.status.ok()) << result.status;
  EXPECT_TRUE(result.records.empty());
}

TEST_P(TFRecordRoundTripTest, WriterToAStreamMatchesWriterToAPath) {
  brook::testing::TempDir dir;
  std::vector<std::string> records = {"a", "bb", std::string(70000, 'c')};
  WriteRecords(dir.Join("by_path"), records, GetParam());
  auto out = OpenLocalOutput(dir.Join("by_stream"));
  ASSERT_TRUE(out.ok());
  TFRecordWriterOptions options;
  options.compression = GetParam();
  auto writer = TFRecordWriter::Open(std::move(*out), options);
  ASSERT_TRUE(writer.ok());
  for (const auto& r : records) ASSERT_TRUE((*writer)->Write(r).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ(brook::testing::ReadFileOrDie(dir.Join("by_path")),
            brook::testing::ReadFileOrDie(dir.Join("by_stream")));

  auto in = OpenLocalInput(dir.Join("by_stream"));
  ASSERT_TRUE(in.ok());
  TFRecordReaderOptions read_options;
  read_options.compression = GetParam();
  auto reader = TFRecordReader::Open(std::move(*in), read_options);
  ASSERT_TRUE(reader.ok());
  std::string_view record;
  for (const auto& r : records) {
    ASSERT_TRUE(*(*reader)->Next(&record));
    EXPECT_EQ(r, record);
  }
  EXPECT_FALSE(*(*reader)->Next(&record));
}

INSTANTIATE_TEST_SUITE_P(AllCompressions, TFRecordRoundTripTest,
                         ::testing::Values(Compression::kNone, Compression::kGzip,
                                           Compression::kZlib),
                         [](const auto& info) { return std::string(CompressionName(info.param)); });

TEST(TFRecordWriterTest, UncompressedOutputIsExactlyTheFrames) {
  brook::testing::TempDir dir;
  std::vector<std::string> records = {"", "a", "hello", std::string(1000, '\x7f')};
  WriteRecords(dir.Join("f"), records, Compression::kNone);
  std::string expected;
  for (const auto& r : records) expected += Frame(r);
  EXPECT_EQ(expected, brook::testing::ReadFileOrDie(dir.Join("f")));
}

TEST(TFRecordWriterTest, RejectsBadLevelWithoutCreatingTheFile) {
  brook::testing::TempDir dir;
  TFRecordWriterOptions options;
  options.compression = Compression::kGzip;
  options.compression_level = 12;
  auto writer = TFRecordWriter::Open(dir.Join("f"), options);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, writer.status().code());
  EXPECT_FALSE(std::filesystem::exists(dir.Join("f")));
}

TEST(TFRecordWriterTest, WriteOrCloseAfterCloseIsAnError) {
  brook::testing::TempDir dir;
  for (Compression c : {Compression::kNone, Compression::kGzip}) {
    TFRecordWriterOptions options;
    options.compression = c;
    auto writer = TFRecordWriter::Open(dir.Join("f"), options);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Write("a").ok());
    ASSERT_TRUE((*writer)->Close().ok());
    EXPECT_EQ(absl::StatusCode::kFailedPrecondition, (*writer)->Write("b").code());
    EXPECT_EQ(absl::StatusCode::kFailedPrecondition, (*writer)->Close().code());
    EXPECT_EQ(1u, (*writer)->records_written());
  }
}

TEST(TFRecordReaderTest, MissingFileIsNotFound) {
  brook::testing::TempDir dir;
  auto reader = TFRecordReader::Open(dir.Join("nope"), TFRecordReaderOptions{});
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(absl::StatusCode::kNotFound, reader.status().code());
  EXPECT_THAT(std::string(reader.status().message()), HasSubstr(dir.Join("nope")));
}

TEST(TFRecordReaderTest, RejectsZeroBuffer) {
  brook::testing::TempDir dir;
  brook::testing::WriteFileOrDie(dir.Join("f"), "");
  TFRecordReaderOptions options;
  options.buffer_bytes = 0;
  auto reader = TFRecordReader::Open(dir.Join("f"), options);
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, reader.status().code());
}

// The sample TensorFlow itself wrote: 40 tf.train.Example records.
TEST(TFRecordCompatibilityTest, ReadsTheFileTensorFlowWrote) {
  std::string path = brook::testing::SharedDataDir() + "/tfrecord/criteo_sample.te.tfrecords";
  std::string bytes = brook::testing::ReadFileOrDie(path);
  ASSERT_EQ(24305u, bytes.size());

  // Walk the frames by hand, checking both CRCs against our CRC32C.
  std::vector<std::string> frames;
  size_t pos = 0;
  while (pos < bytes.size()) {
    ASSERT_LE(pos + 12, bytes.size());
    uint64_t length = 0;
    for (int i = 0; i < 8; ++i)
      length |= uint64_t{static_cast<unsigned char>(bytes[pos + i])} << (8 * i);
    auto load32 = [&](size_t at) {
      uint32_t v = 0;
      for (int i = 0; i < 4; ++i)
        v |= uint32_t{static_cast<unsigned char>(bytes[at + i])} << (8 * i);
      return v;
    };
    EXPECT_EQ(load32(pos + 8), crc32c::Mask(crc32c::Value(bytes.data() + pos, 8)));
    ASSERT_LE(pos + 16 + length, bytes.size());
    EXPECT_EQ(load32(pos + 12 + length),
              crc32c::Mask(crc32c::Value(bytes.data() + pos + 12, length)));
    frames.push_back(bytes.substr(pos + 12, length));
    pos += 16 + length;
  }
  ASSERT_EQ(40u, frames.size());
  EXPECT_EQ(591u, frames[0].size());  // header bytes 4f 02 00 00 ...

  TFRecordReaderOptions options;
  auto reader = TFRecordReader::Open(path, options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::string_view record;
  for (size_t i = 0; i < frames.size(); ++i) {
    auto more = (*reader)->Next(&record);
    ASSERT_TRUE(more.ok()) << more.status();
    ASSERT_TRUE(*more);
    EXPECT_EQ(frames[i], record);
  }
  EXPECT_FALSE(*(*reader)->Next(&record));
  EXPECT_EQ(40u, (*reader)->record_index());
  EXPECT_EQ(bytes.size(), (*reader)->offset());
  EXPECT_EQ(bytes.size(), (*reader)->stats().bytes);

  // Our writer reproduces TensorFlow's bytes exactly.
  brook::testing::TempDir dir;
  WriteRecords(dir.Join("rewritten"), frames, Compression::kNone);
  EXPECT_EQ(bytes, brook::testing::ReadFileOrDie(dir.Join("rewritten")));
}

TEST(TFRecordCompatibilityTest, ReadsFilesCompressedBySystemGzip) {
  if (!HaveProgram("gzip")) GTEST_SKIP() << "no gzip";
  brook::testing::TempDir dir;
  std::vector<std::string> records = MixedRecords();
  WriteRecords(dir.Join("plain"), records, Compression::kNone);
  ASSERT_TRUE(Shell("gzip -c '" + dir.Join("plain") + "' > '" + dir.Join("plain.gz") + "'"));
  ReadResult result = ReadAll(dir.Join("plain.gz"), Compression::kGzip);
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(records, result.records);

  // Concatenated gzip members read as one stream, as gzip -d reads them.
  std::string criteo = brook::testing::SharedDataDir() + "/tfrecord/criteo_sample.te.tfrecords";
  ASSERT_TRUE(Shell("gzip -c '" + criteo + "' > '" + dir.Join("c.gz") + "' && cat '" +
                    dir.Join("plain.gz") + "' '" + dir.Join("c.gz") + "' > '" +
                    dir.Join("both.gz") + "'"));
  result = ReadAll(dir.Join("both.gz"), Compression::kGzip);
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(records.size() + 40, result.records.size());
}

TEST(TFRecordCompatibilityTest, SystemGzipReadsOurGzipFiles) {
  if (!HaveProgram("gzip")) GTEST_SKIP() << "no gzip";
  brook::testing::TempDir dir;
  std::vector<std::string> records = MixedRecords();
  WriteRecords(dir.Join("plain"), records, Compression::kNone);
  WriteRecords(dir.Join("ours.gz"), records, Compression::kGzip);
  ASSERT_TRUE(Shell("gzip -t '" + dir.Join("ours.gz") + "'"));
  ASSERT_TRUE(Shell("gzip -dc '" + dir.Join("ours.gz") + "' > '" + dir.Join("unzipped") + "'"));
  EXPECT_EQ(brook::testing::ReadFileOrDie(dir.Join("plain")),
            brook::testing::ReadFileOrDie(dir.Join("unzipped")));
}

// ZLIB is the zlib container (RFC 1950), which Python's zlib module speaks.
TEST(TFRecordCompatibilityTest, ZlibFilesInteroperateWithPythonZlib) {
  if (!HaveProgram("python3")) GTEST_SKIP() << "no python3";
  brook::testing::TempDir dir;
  std::vector<std::string> records = {"one", "", std::string(100000, 'q'), "four"};
  WriteRecords(dir.Join("plain"), records, Compression::kNone);
  WriteRecords(dir.Join("ours.zlib"), records, Compression::kZlib);
  const std::string script =
      "import sys, zlib\n"
      "src, dst, mode = sys.argv[1:4]\n"
      "data = open(src, 'rb').read()\n"
      "open(dst, 'wb').write(zlib.decompress(data) if mode == 'd' else zlib.compress(data))\n";
  brook::testing::WriteFileOrDie(dir.Join("z.py"), script);
  ASSERT_TRUE(Shell("python3 '" + dir.Join("z.py") + "' '" + dir.Join("ours.zlib") + "' '" +
                    dir.Join("unzipped") + "' d"));
  EXPECT_EQ(brook::testing::ReadFileOrDie(dir.Join("plain")),
            brook::testing::ReadFileOrDie(dir.Join("unzipped")));
  ASSERT_TRUE(Shell("python3 '" + dir.Join("z.py") + "' '" + dir.Join("plain") + "' '" +
                    dir.Join("theirs.zlib") + "' c"));
  ReadResult result = ReadAll(dir.Join("theirs.zlib"), Compression::kZlib);
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(records, result.records);
}

// Bytes the allocator has handed out (glibc); flat under ASan, which keeps
// its own heap, so the check below then passes trivially.
size_t HeapInUse() {
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

TEST(TFRecordStreamingTest, LargeCompressedFileStreamsInConstantMemory) {
  brook::testing::TempDir dir;
  std::string path = dir.Join("big.gz");
  // 50 MB of records, text-like so deflate has work but keeps up.
  std::mt19937 rng(7);
  std::string pool(1 << 20, '\0');
  for (char& c : pool) c = static_cast<char>('a' + rng() % 16);
  constexpr size_t kRecordBytes = 10000;
  constexpr size_t kRecords = 5000;
  {
    TFRecordWriterOptions options;
    options.compression = Compression::kGzip;
    options.compression_level = 1;
    auto writer = TFRecordWriter::Open(path, options);
    ASSERT_TRUE(writer.ok());
    for (size_t i = 0; i < kRecords; ++i) {
      std::string record = pool.substr((i * 7919) % (pool.size() - kRecordBytes), kRecordBytes);
      std::memcpy(record.data(), &i, sizeof(i));
      ASSERT_TRUE((*writer)->Write(record).ok());
    }
    ASSERT_TRUE((*writer)->Close().ok());
  }
  size_t compressed_bytes = std::filesystem::file_size(path);
  EXPECT_LT(compressed_bytes, kRecords * kRecordBytes);

  const size_t heap_before = HeapInUse();
  size_t heap_peak = heap_before;
  TFRecordReaderOptions options;
  options.compression = Compression::kGzip;
  auto reader = TFRecordReader::Open(path, options);
  ASSERT_TRUE(reader.ok());
  std::string_view record;
  size_t count = 0;
  while (true) {
    auto more = (*reader)->Next(&record);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    ASSERT_EQ(kRecordBytes, record.size());
    size_t index;
    std::memcpy(&index, record.data(), sizeof(index));
    ASSERT_EQ(count, index);
    ++count;
    if (count % 64 == 0) heap_peak = std::max(heap_peak, HeapInUse());
  }
  EXPECT_EQ(kRecords, count);
  EXPECT_EQ(kRecords * (kRecordBytes + 16), (*reader)->offset());
  // Buffers and zlib state are well under 2 MB; the stream is 50 MB.
  EXPECT_LT(heap_peak - heap_before, size_t{4} << 20);
}

}  // namespace
}  // namespace brook::storage

namespace brook::storage {
namespace {

// The mmap path (default for uncompressed local files) and the read(2) path
// must return the same records and the same errors.
TEST(TFRecordMmap, MappedAndReadPathsAgreeOnGoodAndCorruptFiles) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("f.tfrecord");
  {
    auto writer = TFRecordWriter::Open(path, {});
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 50; ++i)
      ASSERT_TRUE((*writer)->Write(std::string(i * 7, 'a' + i % 26)).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  auto read_all = [&](bool use_mmap, std::vector<std::string>* out) -> absl::Status {
    TFRecordReaderOptions ro;
    ro.use_mmap = use_mmap;
    ro.buffer_bytes = 64;
    auto reader = TFRecordReader::Open(path, ro);
    if (!reader.ok()) return reader.status();
    std::string_view rec;
    while (true) {
      auto more = (*reader)->Next(&rec);
      if (!more.ok()) return more.status();
      if (!*more) return absl::OkStatus();
      out->emplace_back(rec);
    }
  };
  std::vector<std::string> mapped, read;
  ASSERT_TRUE(read_all(true, &mapped).ok());
  ASSERT_TRUE(read_all(false, &read).ok());
  EXPECT_EQ(mapped.size(), 50u);
  EXPECT_EQ(mapped, read);

  // Corrupt one data byte of record 10: both paths fail identically.
  std::string bytes = brook::testing::ReadFileOrDie(path);
  size_t off = 0;
  for (int i = 0; i < 10; ++i) off += 16 + i * 7;
  bytes[off + 12 + 3] ^= 0x40;
  brook::testing::WriteFileOrDie(path, bytes);
  mapped.clear();
  read.clear();
  absl::Status a = read_all(true, &mapped), b = read_all(false, &read);
  EXPECT_EQ(a.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(a, b);
  EXPECT_EQ(mapped.size(), 10u);
  EXPECT_EQ(mapped, read);
}

}  // namespace
}  // namespace brook::storage
