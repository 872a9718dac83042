// What the TFRecord reader does with damaged input: every flipped byte and
// every truncation of a small file, absurd lengths, wrong compression,
// broken gzip streams, and resynchronisation in skip_corrupt mode.
#include <malloc.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/crc32c.h"
#include "storage/internal/zlib_stream.h"
#include "storage/tfrecord.h"
#include "tests/testing/test_util.h"

namespace brook::storage {
namespace {

using ::testing::HasSubstr;

struct ReadResult {
  std::vector<std::string> records;
  absl::Status status;  // OK when the file ended cleanly
  TFRecordReaderStats stats;
  uint64_t offset = 0;
};

ReadResult ReadAll(const std::string& path, const TFRecordReaderOptions& options) {
  ReadResult result;
  auto reader = TFRecordReader::Open(path, options);
  if (!reader.ok()) {
    result.status = reader.status();
    return result;
  }
  std::string_view record;
  // A reader that never ends would hang the test; no file here holds 1000.
  for (int i = 0; i < 1000; ++i) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) {
      result.status = more.status();
      // The error is sticky: the reader does not go on from a bad state.
      absl::StatusOr<bool> again = (*reader)->Next(&record);
      EXPECT_FALSE(again.ok());
      if (!again.ok()) {
        EXPECT_EQ(result.status, again.status());
      }
      break;
    }
    if (!*more) break;
    result.records.emplace_back(record);
  }
  result.stats = (*reader)->stats();
  result.offset = (*reader)->offset();
  return result;
}

ReadResult ReadAll(const std::string& path, Compression compression, bool skip_corrupt = false) {
  TFRecordReaderOptions options;
  options.compression = compression;
  options.skip_corrupt = skip_corrupt;
  return ReadAll(path, options);
}

std::string Encode(const std::vector<std::string>& records, Compression compression,
                   const brook::testing::TempDir& dir) {
  std::string path = dir.Join("encoded");
  TFRecordWriterOptions options;
  options.compression = compression;
  auto writer = TFRecordWriter::Open(path, options);
  EXPECT_TRUE(writer.ok());
  for (const auto& r : records) EXPECT_TRUE((*writer)->Write(r).ok());
  EXPECT_TRUE((*writer)->Close().ok());
  return brook::testing::ReadFileOrDie(path);
}

std::string Header(uint64_t length) {
  std::string header;
  for (int i = 0; i < 8; ++i) header.push_back(static_cast<char>(length >> (8 * i)));
  uint32_t crc = crc32c::Mask(crc32c::Value(header.data(), 8));
  for (int i = 0; i < 4; ++i) header.push_back(static_cast<char>(crc >> (8 * i)));
  return header;
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

const std::vector<std::string>& SmallRecords() {
  static const auto* records =
      new std::vector<std::string>{"first", "the second record", "3rd: a record of ~30 bytes!!"};
  return *records;
}

// Frame start offsets of SmallRecords(), and the end of the file.
std::vector<size_t> SmallBoundaries() {
  std::vector<size_t> boundaries = {0};
  for (const auto& r : SmallRecords()) boundaries.push_back(boundaries.back() + r.size() + 16);
  return boundaries;
}

// Index of the frame holding byte `offset`.
size_t FrameOf(size_t offset) {
  std::vector<size_t> b = SmallBoundaries();
  return static_cast<size_t>(std::upper_bound(b.begin(), b.end(), offset) - b.begin()) - 1;
}

TEST(TFRecordCorruptionTest, EveryFlippedByteIsCaughtAtItsFrame) {
  brook::testing::TempDir dir;
  const std::string good = Encode(SmallRecords(), Compression::kNone, dir);
  const std::vector<size_t> boundaries = SmallBoundaries();
  ASSERT_EQ(boundaries.back(), good.size());
  ASSERT_LT(good.size(), 120u);
  const std::string path = dir.Join("flipped.tfrecord");
  for (size_t at = 0; at < good.size(); ++at) {
    for (unsigned char mask : {0x01, 0xff}) {
      SCOPED_TRACE(::testing::Message() << "byte " << at << " xor " << int{mask});
      std::string bad = good;
      bad[at] = static_cast<char>(bad[at] ^ mask);
      brook::testing::WriteFileOrDie(path, bad);
      const size_t frame = FrameOf(at);

      ReadResult strict = ReadAll(path, Compression::kNone);
      ASSERT_EQ(absl::StatusCode::kDataLoss, strict.status.code()) << strict.status;
      EXPECT_THAT(Message(strict.status), HasSubstr(path));
      EXPECT_THAT(Message(strict.status),
                  HasSubstr("at offset " + std::to_string(boundaries[frame]) + " "));
      EXPECT_THAT(Message(strict.status), HasSubstr("mismatch"));
      ASSERT_EQ(frame, strict.records.size());
      for (size_t i = 0; i < frame; ++i) EXPECT_EQ(SmallRecords()[i], strict.records[i]);
      EXPECT_EQ(boundaries[frame], strict.offset);

      ReadResult skipping = ReadAll(path, Compression::kNone, /*skip_corrupt=*/true);
      ASSERT_TRUE(skipping.status.ok()) << skipping.status;
      std::vector<std::string> expected = SmallRecords();
      expected.erase(expected.begin() + static_cast<long>(frame));
      EXPECT_EQ(expected, skipping.records);
      EXPECT_EQ(1u, skipping.stats.skipped_regions);
      EXPECT_EQ(boundaries[frame + 1] - boundaries[frame], skipping.stats.skipped_bytes);
      EXPECT_EQ(good.size(), skipping.stats.bytes);
    }
  }
}

TEST(TFRecordCorruptionTest, EveryTruncationIsAnErrorUnlessAtAFrameBoundary) {
  brook::testing::TempDir dir;
  const std::string good = Encode(SmallRecords(), Compression::kNone, dir);
  const std::vector<size_t> boundaries = SmallBoundaries();
  const std::string path = dir.Join("truncated.tfrecord");
  for (size_t size = 0; size < good.size(); ++size) {
    SCOPED_TRACE(::testing::Message() << "truncated to " << size);
    brook::testing::WriteFileOrDie(path, good.substr(0, size));
    const size_t whole_frames = FrameOf(size);
    const bool at_boundary = boundaries[whole_frames] == size;
    ReadResult strict = ReadAll(path, Compression::kNone);
    ASSERT_EQ(whole_frames, strict.records.size());
    ReadResult skipping = ReadAll(path, Compression::kNone, /*skip_corrupt=*/true);
    ASSERT_TRUE(skipping.status.ok()) << skipping.status;
    EXPECT_EQ(whole_frames, skipping.records.size());
    EXPECT_EQ(size, skipping.stats.bytes);
    if (at_boundary) {
      EXPECT_TRUE(strict.status.ok()) << strict.status;
      EXPECT_EQ(0u, skipping.stats.skipped_regions);
      continue;
    }
    ASSERT_EQ(absl::StatusCode::kDataLoss, strict.status.code()) << strict.status;
    EXPECT_THAT(Message(strict.status), HasSubstr(path));
    EXPECT_THAT(Message(strict.status),
                HasSubstr("at offset " + std::to_string(boundaries[whole_frames]) + " "));
    EXPECT_THAT(Message(strict.status), HasSubstr("truncated"));
    const size_t tail = size - boundaries[whole_frames];
    if (tail < 12) {
      EXPECT_THAT(Message(strict.status), HasSubstr("truncated length header"));
    } else {
      const size_t frame_bytes = boundaries[whole_frames + 1] - boundaries[whole_frames];
      EXPECT_THAT(Message(strict.status), HasSubstr("truncated record: expected " +
                                                    std::to_string(frame_bytes) + " bytes"));
      EXPECT_THAT(Message(strict.status), HasSubstr("file ends after " + std::to_string(tail)));
    }
    EXPECT_EQ(1u, skipping.stats.skipped_regions);
    EXPECT_EQ(tail, skipping.stats.skipped_bytes);
  }
}

size_t HeapInUse() {
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

TEST(TFRecordCorruptionTest, AbsurdLengthIsRejectedBeforeAllocating) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("absurd.tfrecord");
  for (uint64_t length : {~uint64_t{0}, uint64_t{1} << 40, (uint64_t{256} << 20) + 1}) {
    SCOPED_TRACE(length);
    brook::testing::WriteFileOrDie(path, Header(length) + "some data that follows");
    const size_t heap_before = HeapInUse();
    ReadResult result = ReadAll(path, Compression::kNone);
    EXPECT_LT(HeapInUse() - std::min(HeapInUse(), heap_before), size_t{8} << 20);
    ASSERT_EQ(absl::StatusCode::kDataLoss, result.status.code());
    EXPECT_THAT(Message(result.status), HasSubstr(path));
    EXPECT_THAT(Message(result.status), HasSubstr("offset 0"));
    EXPECT_THAT(Message(result.status), HasSubstr("record length " + std::to_string(length) +
                                                  " exceeds max_record_bytes 268435456"));
  }
}

TEST(TFRecordCorruptionTest, ClaimedLengthBeyondTheFileDoesNotAllocateIt) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("short.tfrecord");
  // Within max_record_bytes, with a valid length CRC, but the file is tiny.
  brook::testing::WriteFileOrDie(path, Header(200u << 20) + "tiny");
  TFRecordReaderOptions options;
  options.buffer_bytes = 4096;
  size_t peak = 0;
  const size_t heap_before = HeapInUse();
  ReadResult result = ReadAll(path, options);
  peak = HeapInUse();
  EXPECT_LT(peak - std::min(peak, heap_before), size_t{1} << 20);
  ASSERT_EQ(absl::StatusCode::kDataLoss, result.status.code());
  EXPECT_THAT(Message(result.status), HasSubstr("truncated record: expected 209715216 bytes"));
  EXPECT_THAT(Message(result.status), HasSubstr("file ends after 16"));
}

TEST(TFRecordCorruptionTest, SmallerMaxRecordBytesIsHonoured) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("f");
  brook::testing::WriteFileOrDie(path,
                                 Encode({"ok", std::string(1000, 'x')}, Compression::kNone, dir));
  TFRecordReaderOptions options;
  options.max_record_bytes = 999;
  ReadResult result = ReadAll(path, options);
  ASSERT_EQ(1u, result.records.size());
  EXPECT_THAT(Message(result.status), HasSubstr("record length 1000 exceeds max_record_bytes 999"));
  EXPECT_THAT(Message(result.status), HasSubstr("offset 18"));
}

TEST(TFRecordCorruptionTest, TextFileIsAClearError) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("notes.txt");
  brook::testing::WriteFileOrDie(path, "This is a plain text file, not a TFRecord file.\n");
  ReadResult result = ReadAll(path, Compression::kNone);
  ASSERT_EQ(absl::StatusCode::kDataLoss, result.status.code());
  EXPECT_THAT(Message(result.status), HasSubstr(path));
  EXPECT_THAT(Message(result.status), HasSubstr("offset 0"));
  EXPECT_THAT(Message(result.status), HasSubstr("length CRC mismatch"));
  EXPECT_THAT(Message(result.status), HasSubstr("is this a TFRecord file?"));

  brook::testing::WriteFileOrDie(path, "short\n");
  result = ReadAll(path, Compression::kNone);
  EXPECT_THAT(Message(result.status), HasSubstr("truncated length header"));

  // Skipping over a file with no frame at all ends cleanly with no records.
  result = ReadAll(path, Compression::kNone, /*skip_corrupt=*/true);
  EXPECT_TRUE(result.status.ok());
  EXPECT_TRUE(result.records.empty());
  EXPECT_EQ(1u, result.stats.skipped_regions);
  EXPECT_EQ(6u, result.stats.skipped_bytes);
}

TEST(TFRecordCorruptionTest, CompressedFileReadAsUncompressedSaysWhatItLooksLike) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("f");
  brook::testing::WriteFileOrDie(path, Encode(SmallRecords(), Compression::kGzip, dir));
  EXPECT_THAT(Message(ReadAll(path, Compression::kNone).status), HasSubstr("compression GZIP"));
  brook::testing::WriteFileOrDie(path, Encode(SmallRecords(), Compression::kZlib, dir));
  EXPECT_THAT(Message(ReadAll(path, Compression::kNone).status), HasSubstr("compression ZLIB"));
}

TEST(TFRecordCorruptionTest, WrongDeclaredCompressionIsAClearError) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("f");
  brook::testing::WriteFileOrDie(path, Encode(SmallRecords(), Compression::kNone, dir));
  ReadResult result = ReadAll(path, Compression::kGzip);
  ASSERT_EQ(absl::StatusCode::kDataLoss, result.status.code());
  EXPECT_THAT(Message(result.status), HasSubstr(path));
  EXPECT_THAT(Message(result.status), HasSubstr("corrupt GZIP stream"));
  EXPECT_THAT(Message(result.status), HasSubstr("offset 0"));

  brook::testing::WriteFileOrDie(path, "plain text, certainly not gzip\n");
  EXPECT_THAT(Message(ReadAll(path, Compression::kGzip).status), HasSubstr("corrupt GZIP stream"));
  EXPECT_THAT(Message(ReadAll(path, Compression::kZlib).status), HasSubstr("corrupt ZLIB stream"));

  brook::testing::WriteFileOrDie(path, Encode(SmallRecords(), Compression::kGzip, dir));
  result = ReadAll(path, Compression::kZlib);
  ASSERT_EQ(absl::StatusCode::kDataLoss, result.status.code());
  EXPECT_THAT(Message(result.status), HasSubstr("corrupt ZLIB stream"));
  brook::testing::WriteFileOrDie(path, Encode(SmallRecords(), Compression::kZlib, dir));
  result = ReadAll(path, Compression::kGzip);
  ASSERT_EQ(absl::StatusCode::kDataLoss, result.status.code());
}

class CompressedCorruptionTest : public ::testing::TestWithParam<Compression> {};

TEST_P(CompressedCorruptionTest, EveryTruncationOfTheCompressedStreamIsAnError) {
  brook::testing::TempDir dir;
  std::vector<std::string> records = SmallRecords();
  records.push_back(std::string(3000, 'r'));
  const std::string good = Encode(records, GetParam(), dir);
  const std::string path = dir.Join("truncated");
  for (size_t size = 1; size < good.size(); ++size) {
    SCOPED_TRACE(::testing::Message() << "truncated to " << size);
    brook::testing::WriteFileOrDie(path, good.substr(0, size));
    ReadResult result = ReadAll(path, GetParam());
    ASSERT_EQ(absl::StatusCode::kDataLoss, result.status.code()) << result.status;
    EXPECT_THAT(Message(result.status), HasSubstr(path));
    EXPECT_THAT(Message(result.status), HasSubstr("offset"));
    // Records before the cut come back (all of them when only the trailer is
    // cut), each intact, and then the error: never a clean, short end.
    ASSERT_LE(result.records.size(), records.size());
    for (size_t i = 0; i < result.records.size(); ++i) EXPECT_EQ(records[i], result.records[i]);
    // Skipping corrupt frames cannot repair a broken compressed stream.
    EXPECT_FALSE(ReadAll(path, GetParam(), /*skip_corrupt=*/true).status.ok());
  }
}

TEST_P(CompressedCorruptionTest, TruncatedStreamSaysSo) {
  brook::testing::TempDir dir;
  const std::string good = Encode({std::string(100000, 'a')}, GetParam(), dir);
  const std::string path = dir.Join("truncated");
  brook::testing::WriteFileOrDie(path, good.substr(0, good.size() / 2));
  ReadResult result = ReadAll(path, GetParam());
  EXPECT_THAT(Message(result.status), HasSubstr("truncated"));
  EXPECT_THAT(Message(result.status), HasSubstr("compressed offset"));
}

// A flipped byte in a compressed file must never yield different records: it
// is an error, or (in gzip header fields nothing checks, like the mtime) the
// records come back unchanged.
TEST_P(CompressedCorruptionTest, FlippedBytesNeverYieldWrongRecords) {
  brook::testing::TempDir dir;
  const std::string good = Encode(SmallRecords(), GetParam(), dir);
  const std::string path = dir.Join("flipped");
  size_t detected = 0, cases = 0;
  for (size_t at = 0; at < good.size(); ++at) {
    for (unsigned char mask : {0x01, 0xff}) {
      SCOPED_TRACE(::testing::Message() << "byte " << at << " xor " << int{mask});
      std::string bad = good;
      bad[at] = static_cast<char>(bad[at] ^ mask);
      brook::testing::WriteFileOrDie(path, bad);
      ReadResult result = ReadAll(path, GetParam());
      ++cases;
      if (result.status.ok()) {
        EXPECT_EQ(SmallRecords(), result.records);
        continue;
      }
      ++detected;
      EXPECT_EQ(absl::StatusCode::kDataLoss, result.status.code()) << result.status;
      EXPECT_THAT(Message(result.status), HasSubstr(path));
      EXPECT_THAT(Message(result.status), HasSubstr("offset"));
      for (size_t i = 0; i < result.records.size(); ++i) {
        EXPECT_EQ(SmallRecords()[i], result.records[i]);
      }
    }
  }
  // Only a handful of gzip header bytes (mtime, flags hint, OS) go unchecked.
  EXPECT_GE(detected + 16, cases);
}

TEST_P(CompressedCorruptionTest, TrailingGarbageAfterTheStreamIsAnError) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("f");
  brook::testing::WriteFileOrDie(path, Encode(SmallRecords(), GetParam(), dir) + "garbage!");
  ReadResult result = ReadAll(path, GetParam());
  EXPECT_EQ(absl::StatusCode::kDataLoss, result.status.code());
}

INSTANTIATE_TEST_SUITE_P(GzipAndZlib, CompressedCorruptionTest,
                         ::testing::Values(Compression::kGzip, Compression::kZlib),
                         [](const auto& info) { return std::string(CompressionName(info.param)); });

TEST(TFRecordSkipCorruptTest, SkipsACorruptMiddleRecord) {
  brook::testing::TempDir dir;
  std::vector<std::string> records = {"zero", "one one", "two two two", "three", "four four"};
  std::string bytes = Encode(records, Compression::kNone, dir);
  const size_t middle_start = (4 + 16) + (7 + 16);
  const size_t middle_bytes = 11 + 16;
  bytes[middle_start + 12 + 3] ^= 0x20;  // a data byte of "two two two"
  const std::string path = dir.Join("f");
  brook::testing::WriteFileOrDie(path, bytes);

  ReadResult strict = ReadAll(path, Compression::kNone);
  EXPECT_THAT(Message(strict.status), HasSubstr("data CRC mismatch"));
  EXPECT_THAT(Message(strict.status), HasSubstr("offset " + std::to_string(middle_start)));
  EXPECT_THAT(Message(strict.status), HasSubstr("record index 2"));

  TFRecordReaderOptions options;
  options.skip_corrupt = true;
  auto reader = TFRecordReader::Open(path, options);
  ASSERT_TRUE(reader.ok());
  std::vector<std::string> got;
  std::string_view record;
  while (true) {
    auto more = (*reader)->Next(&record);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    got.emplace_back(record);
  }
  EXPECT_EQ((std::vector<std::string>{"zero", "one one", "three", "four four"}), got);
  EXPECT_EQ(4u, (*reader)->record_index());
  EXPECT_EQ(4u, (*reader)->stats().records);
  EXPECT_EQ(1u, (*reader)->stats().skipped_regions);
  EXPECT_EQ(middle_bytes, (*reader)->stats().skipped_bytes);
  EXPECT_EQ(bytes.size(), (*reader)->stats().bytes);
  EXPECT_EQ(bytes.size(), (*reader)->offset());
}

TEST(TFRecordSkipCorruptTest, SkipsGarbageBetweenAndAroundFrames) {
  brook::testing::TempDir dir;
  std::vector<std::string> records = {"alpha", "beta", "gamma"};
  std::string frames[3];
  for (int i = 0; i < 3; ++i) frames[i] = Encode({records[i]}, Compression::kNone, dir);
  std::mt19937 rng(5);
  std::string garbage(1000, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  const std::string bytes = garbage.substr(0, 7) + frames[0] + frames[1] + garbage.substr(7, 500) +
                            frames[2] + garbage.substr(507, 3);
  const std::string path = dir.Join("f");
  brook::testing::WriteFileOrDie(path, bytes);
  ReadResult result = ReadAll(path, Compression::kNone, /*skip_corrupt=*/true);
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(records, result.records);
  EXPECT_EQ(3u, result.stats.skipped_regions);
  EXPECT_EQ(510u, result.stats.skipped_bytes);
  EXPECT_EQ(bytes.size(), result.stats.bytes);
}

// Scanning is linear: a megabyte of garbage, crossing many buffer refills,
// costs one pass, and the window does not grow with it.
TEST(TFRecordSkipCorruptTest, ScansALargeGarbageRegionInOnePass) {
  brook::testing::TempDir dir;
  std::mt19937 rng(6);
  std::string garbage(1 << 20, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  const std::string bytes = Encode({"before"}, Compression::kNone, dir) + garbage +
                            Encode({"after"}, Compression::kNone, dir);
  const std::string path = dir.Join("f");
  brook::testing::WriteFileOrDie(path, bytes);
  TFRecordReaderOptions options;
  options.skip_corrupt = true;
  options.buffer_bytes = 4096;
  const size_t heap_before = HeapInUse();
  ReadResult result = ReadAll(path, options);
  EXPECT_LT(HeapInUse() - std::min(HeapInUse(), heap_before), size_t{256} << 10);
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ((std::vector<std::string>{"before", "after"}), result.records);
  EXPECT_EQ(1u, result.stats.skipped_regions);
  EXPECT_EQ(garbage.size(), result.stats.skipped_bytes);
}

TEST(TFRecordSkipCorruptTest, ResyncsInsideCompressedStreams) {
  brook::testing::TempDir dir;
  // Corruption inside the decompressed bytes (written that way), not the
  // compressed stream: a CRC-bad frame in a valid GZIP file.
  std::vector<std::string> records = {"zero", "one one", "two two two", "three"};
  std::string plain = Encode(records, Compression::kNone, dir);
  plain[(4 + 16) + 2] ^= 0x04;  // the length of "one one"
  // Compress the damaged bytes as they are, with the stream layer itself.
  auto file = OpenLocalOutput(dir.Join("f.gz"));
  ASSERT_TRUE(file.ok());
  auto gzip = internal::NewZlibOutputStream(std::move(*file), internal::ZlibFormat::kGzip, 6);
  ASSERT_TRUE(gzip.ok());
  ASSERT_TRUE((*gzip)->Append(plain).ok());
  ASSERT_TRUE((*gzip)->Close().ok());
  ReadResult strict = ReadAll(dir.Join("f.gz"), Compression::kGzip);
  EXPECT_THAT(Message(strict.status), HasSubstr("length CRC mismatch"));
  EXPECT_THAT(Message(strict.status), HasSubstr("offset 20 in the decompressed stream"));
  ReadResult skipping = ReadAll(dir.Join("f.gz"), Compression::kGzip, /*skip_corrupt=*/true);
  ASSERT_TRUE(skipping.status.ok()) << skipping.status;
  EXPECT_EQ((std::vector<std::string>{"zero", "two two two", "three"}), skipping.records);
  EXPECT_EQ(1u, skipping.stats.skipped_regions);
  EXPECT_EQ(7u + 16, skipping.stats.skipped_bytes);
}

// Random damage (flips, inserts, deletes, cuts) in every mode: the reader
// always ends, and whatever it returns is one of the records written, since
// a frame that verifies by chance would need two 32-bit CRCs to match.
TEST(TFRecordFuzzTest, RandomDamageNeverYieldsForeignRecords) {
  brook::testing::TempDir dir;
  std::mt19937 rng(11);
  std::vector<std::string> records;
  for (int i = 0; i < 12; ++i) {
    std::string r(rng() % 300, '\0');
    for (char& c : r) c = static_cast<char>('a' + rng() % 26);
    records.push_back(r);
  }
  const std::string path = dir.Join("damaged");
  for (Compression compression : {Compression::kNone, Compression::kGzip, Compression::kZlib}) {
    const std::string good = Encode(records, compression, dir);
    for (int iteration = 0; iteration < 150; ++iteration) {
      std::string bad = good;
      for (int damage = 1 + static_cast<int>(rng() % 3); damage > 0 && !bad.empty(); --damage) {
        size_t at = rng() % bad.size();
        switch (rng() % 4) {
          case 0:
            bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
            break;
          case 1:
            bad.insert(at, std::string(1 + rng() % 20, static_cast<char>(rng())));
            break;
          case 2:
            bad.erase(at, 1 + rng() % 20);
            break;
          default:
            bad.resize(at);
        }
      }
      brook::testing::WriteFileOrDie(path, bad);
      TFRecordReaderOptions options;
      options.compression = compression;
      options.skip_corrupt = rng() % 2 == 0;
      options.buffer_bytes = 1 + rng() % 512;
      ReadResult result = ReadAll(path, options);
      SCOPED_TRACE(::testing::Message() << CompressionName(compression) << " iteration "
                                        << iteration << " skip " << options.skip_corrupt);
      if (!result.status.ok()) {
        EXPECT_EQ(absl::StatusCode::kDataLoss, result.status.code()) << result.status;
        EXPECT_THAT(Message(result.status), HasSubstr(path));
        EXPECT_THAT(Message(result.status), HasSubstr("offset"));
      }
      for (const std::string& r : result.records) {
        EXPECT_NE(records.end(), std::find(records.begin(), records.end(), r));
      }
    }
  }
}

TEST(TFRecordReaderOptionsTest, DataCrcCheckCanBeTurnedOffButLengthCrcCannot) {
  brook::testing::TempDir dir;
  std::string bytes = Encode({"abc", "def"}, Compression::kNone, dir);
  bytes[12] = 'X';  // the first record's data
  const std::string path = dir.Join("f");
  brook::testing::WriteFileOrDie(path, bytes);
  TFRecordReaderOptions options;
  options.verify_data_crc = false;
  ReadResult result = ReadAll(path, options);
  ASSERT_TRUE(result.status.ok());
  EXPECT_EQ((std::vector<std::string>{"Xbc", "def"}), result.records);

  bytes[3] ^= 1;  // the first length
  brook::testing::WriteFileOrDie(path, bytes);
  result = ReadAll(path, options);
  EXPECT_THAT(Message(result.status), HasSubstr("length CRC mismatch"));
}

}  // namespace
}  // namespace brook::storage
