// The write-ahead log: round trips, LSN continuity across reopen and segments,
// torn tails at every offset, corruption, group commit under 8 threads, and
// records acknowledged by Sync surviving a SIGKILL of the writing process.
#include "storage/wal.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"
#include "tests/testing/tmpfs.h"

namespace brook::storage {
namespace {

using ::brook::testing::ReadFileOrDie;
using ::brook::testing::TempDir;
using ::brook::testing::WriteFileOrDie;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Varied sizes: empty every 7th, 70 KB every 50th, otherwise 1..300 bytes.
std::string Payload(uint64_t i) {
  if (i % 7 == 0) return "";
  size_t size = i % 50 == 0 ? 70000 : (i * 37) % 300 + 1;
  std::string s = absl::StrCat("record ", i, " ");
  s.resize(size, static_cast<char>('a' + i % 26));
  return s;
}

struct Replayed {
  absl::Status status;
  WalReplayStats stats;
  std::vector<uint64_t> lsns;
  std::vector<std::string> records;
};

Replayed ReplayAll(const std::string& dir, uint64_t from_lsn = 0) {
  Replayed r;
  auto stats = ReplayWal(dir, from_lsn, [&](uint64_t lsn, std::string_view record) {
    r.lsns.push_back(lsn);
    r.records.emplace_back(record);
    return absl::OkStatus();
  });
  if (stats.ok()) {
    r.stats = *stats;
  } else {
    r.status = stats.status();
  }
  return r;
}

std::unique_ptr<WalWriter> OpenOrDie(const std::string& dir, WalOptions options = {}) {
  auto writer = WalWriter::Open(dir, options);
  EXPECT_TRUE(writer.ok()) << writer.status();
  return writer.ok() ? std::move(*writer) : nullptr;
}

// Segment file names in `dir`, sorted.
std::vector<std::string> Segments(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

TEST(WalTest, SegmentNameIsZeroPaddedFirstLsn) {
  EXPECT_EQ("wal-00000000000000000001.log", WalSegmentName(1));
  EXPECT_EQ("wal-18446744073709551615.log", WalSegmentName(~uint64_t{0}));
}

TEST(WalTest, RoundTripsVariedRecordsWithConsecutiveLsns) {
  TempDir dir;
  constexpr uint64_t kRecords = 500;
  uint64_t payload_bytes = 0;
  {
    auto writer = OpenOrDie(dir.path());
    ASSERT_NE(nullptr, writer);
    for (uint64_t i = 1; i <= kRecords; ++i) {
      ASSERT_EQ(i, writer->Add(Payload(i)));
      payload_bytes += Payload(i).size();
      if (i % 97 == 0) {
        ASSERT_TRUE(writer->Sync(i).ok());
      }
    }
    ASSERT_TRUE(writer->Sync(kRecords).ok());
    WalStats stats = writer->stats();
    EXPECT_EQ(kRecords, stats.records);
    EXPECT_EQ(kRecords, stats.last_lsn);
    EXPECT_EQ(payload_bytes + kRecords * kWalHeaderBytes, stats.bytes);
    EXPECT_EQ(kRecords / 97 + 1, stats.group_writes);
    EXPECT_EQ(0u, stats.syncs);  // kNone
    EXPECT_EQ(1u, stats.segments);
  }
  Replayed all = ReplayAll(dir.path());
  ASSERT_TRUE(all.status.ok()) << all.status;
  ASSERT_EQ(kRecords, all.records.size());
  for (uint64_t i = 1; i <= kRecords; ++i) {
    EXPECT_EQ(i, all.lsns[i - 1]);
    EXPECT_EQ(Payload(i), all.records[i - 1]) << "LSN " << i;
  }
  EXPECT_EQ(kRecords, all.stats.records);
  EXPECT_EQ(payload_bytes, all.stats.bytes);
  EXPECT_EQ(1u, all.stats.first_lsn);
  EXPECT_EQ(kRecords, all.stats.last_lsn);
  EXPECT_EQ(0u, all.stats.torn_tail_bytes);

  Replayed tail = ReplayAll(dir.path(), 250);
  ASSERT_TRUE(tail.status.ok()) << tail.status;
  ASSERT_EQ(kRecords - 249, tail.records.size());
  EXPECT_EQ(250u, tail.stats.first_lsn);
  EXPECT_EQ(kRecords, tail.stats.last_lsn);
  for (size_t k = 0; k < tail.records.size(); ++k) {
    EXPECT_EQ(250 + k, tail.lsns[k]);
    EXPECT_EQ(Payload(250 + k), tail.records[k]);
  }
  EXPECT_TRUE(ReplayAll(dir.path(), kRecords + 1).records.empty());
}

TEST(WalTest, EmptyOrMissingDirectoryReplaysNothing) {
  TempDir dir;
  Replayed missing = ReplayAll(dir.Join("absent"));
  EXPECT_TRUE(missing.status.ok()) << missing.status;
  EXPECT_EQ(0u, missing.stats.records);
  Replayed empty = ReplayAll(dir.path());
  EXPECT_TRUE(empty.status.ok()) << empty.status;
  EXPECT_TRUE(empty.records.empty());

  // A freshly opened log has one empty segment and replays nothing either.
  std::string wal = dir.Join("a/b/wal");  // created with its parents
  ASSERT_NE(nullptr, OpenOrDie(wal));
  EXPECT_THAT(Segments(wal), ElementsAre(WalSegmentName(1)));
  Replayed fresh = ReplayAll(wal);
  EXPECT_TRUE(fresh.status.ok()) << fresh.status;
  EXPECT_TRUE(fresh.records.empty());
}

TEST(WalTest, AddDoesNoIoAndOneSyncWritesEverythingPendingAsOneGroup) {
  TempDir dir;
  WalOptions options;
  options.early_write_bytes = 0;  // EarlyWriter* below: what it changes
  auto writer = OpenOrDie(dir.path(), options);
  ASSERT_NE(nullptr, writer);
  const std::string segment = dir.Join(WalSegmentName(1));
  EXPECT_TRUE(writer->Sync(0).ok());  // nothing to do
  for (uint64_t i = 1; i <= 100; ++i) writer->Add(Payload(i));
  EXPECT_EQ(0u, std::filesystem::file_size(segment));
  EXPECT_EQ(0u, writer->stats().group_writes);

  ASSERT_TRUE(writer->Sync(50).ok());
  WalStats stats = writer->stats();
  EXPECT_EQ(1u, stats.group_writes);
  EXPECT_EQ(100u, stats.records);  // the group took all that was pending, not just up to 50
  EXPECT_EQ(stats.bytes, std::filesystem::file_size(segment));
  ASSERT_TRUE(writer->Sync(100).ok());
  EXPECT_EQ(1u, writer->stats().group_writes);  // already written: no I/O

  // An LSN past the last Add means everything so far.
  writer->Add("one more");
  ASSERT_TRUE(writer->Sync(~uint64_t{0}).ok());
  EXPECT_EQ(101u, writer->stats().records);
  EXPECT_EQ(2u, writer->stats().group_writes);
}

TEST(WalTest, ReopenContinuesLsnsAndTheDestructorWritesPending) {
  TempDir dir;
  {
    auto writer = OpenOrDie(dir.path());
    ASSERT_NE(nullptr, writer);
    for (uint64_t i = 1; i <= 10; ++i) writer->Add(Payload(i));
    // No Sync: the destructor writes them.
  }
  {
    auto writer = OpenOrDie(dir.path());
    ASSERT_NE(nullptr, writer);
    EXPECT_EQ(10u, writer->stats().last_lsn);
    EXPECT_EQ(0u, writer->stats().records);  // counters are since Open
    for (uint64_t i = 11; i <= 20; ++i) EXPECT_EQ(i, writer->Add(Payload(i)));
    ASSERT_TRUE(writer->Sync(20).ok());
  }
  {
    auto writer = OpenOrDie(dir.path());  // opened and closed with nothing added
    ASSERT_NE(nullptr, writer);
    EXPECT_EQ(20u, writer->stats().last_lsn);
  }
  EXPECT_THAT(Segments(dir.path()), ElementsAre(WalSegmentName(1)));
  Replayed r = ReplayAll(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(20u, r.records.size());
  for (uint64_t i = 1; i <= 20; ++i) EXPECT_EQ(Payload(i), r.records[i - 1]);
}

// 100-byte payloads make 116-byte frames; with a Sync after each Add every
// group is one record and a 1000-byte segment closes after 9 records, so
// segments start at LSNs 1, 10, 19, ...
constexpr uint64_t kSmallSegmentBytes = 1000;
constexpr uint64_t kRecordsPerSmallSegment = 9;

std::string FixedPayload(uint64_t i) {
  std::string s = absl::StrCat("fixed ", i, " ");
  s.resize(100, '.');
  return s;
}

void WriteFixed(WalWriter& writer, uint64_t first, uint64_t last) {
  for (uint64_t i = first; i <= last; ++i) {
    ASSERT_EQ(i, writer.Add(FixedPayload(i)));
    ASSERT_TRUE(writer.Sync(i).ok());
  }
}

std::vector<std::string> SegmentNamesFrom(uint64_t first_lsn, uint64_t last_lsn) {
  std::vector<std::string> names;
  for (uint64_t lsn = first_lsn; lsn <= last_lsn; lsn += kRecordsPerSmallSegment) {
    names.push_back(WalSegmentName(lsn));
  }
  return names;
}

TEST(WalTest, SegmentsRotateAndReplayCrossesThem) {
  TempDir dir;
  WalOptions options;
  options.segment_bytes = kSmallSegmentBytes;
  {
    auto writer = OpenOrDie(dir.path(), options);
    ASSERT_NE(nullptr, writer);
    WriteFixed(*writer, 1, 40);
    EXPECT_EQ(5u, writer->stats().segments);
  }
  EXPECT_EQ(SegmentNamesFrom(1, 40), Segments(dir.path()));  // 1, 10, 19, 28, 37
  {
    // Reopen appends to the last segment and keeps rotating.
    auto writer = OpenOrDie(dir.path(), options);
    ASSERT_NE(nullptr, writer);
    EXPECT_EQ(5u, writer->stats().segments);
    WriteFixed(*writer, 41, 60);
    EXPECT_EQ(7u, writer->stats().segments);
  }
  EXPECT_EQ(SegmentNamesFrom(1, 60), Segments(dir.path()));  // ... 46, 55
  for (const std::string& name : Segments(dir.path())) {
    if (name == WalSegmentName(55)) continue;
    EXPECT_EQ(kRecordsPerSmallSegment * 116, std::filesystem::file_size(dir.Join(name))) << name;
  }

  Replayed r = ReplayAll(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(60u, r.records.size());
  for (uint64_t i = 1; i <= 60; ++i) EXPECT_EQ(FixedPayload(i), r.records[i - 1]);
  Replayed from = ReplayAll(dir.path(), 23);  // the middle of the third segment
  ASSERT_TRUE(from.status.ok()) << from.status;
  EXPECT_EQ(23u, from.stats.first_lsn);
  EXPECT_EQ(38u, from.records.size());
}

TEST(WalTest, DropBeforeDeletesExactlyTheFullyCoveredSegments) {
  TempDir dir;
  WalOptions options;
  options.segment_bytes = kSmallSegmentBytes;
  auto writer = OpenOrDie(dir.path(), options);
  ASSERT_NE(nullptr, writer);
  WriteFixed(*writer, 1, 60);  // segments 1, 10, 19, 28, 37, 46, 55

  ASSERT_TRUE(writer->DropBefore(9).ok());  // LSN 9 is in the first segment
  EXPECT_EQ(SegmentNamesFrom(1, 60), Segments(dir.path()));
  ASSERT_TRUE(writer->DropBefore(10).ok());  // 1..9 all below 10
  EXPECT_EQ(SegmentNamesFrom(10, 60), Segments(dir.path()));
  ASSERT_TRUE(writer->DropBefore(27).ok());  // 10..18 go; 19..27 holds 27
  EXPECT_EQ(SegmentNamesFrom(19, 60), Segments(dir.path()));
  EXPECT_EQ(5u, writer->stats().segments);

  Replayed r = ReplayAll(dir.path(), 27);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(27u, r.stats.first_lsn);
  EXPECT_EQ(60u, r.stats.last_lsn);

  // Far past the end: everything but the segment being written.
  ASSERT_TRUE(writer->DropBefore(1000).ok());
  EXPECT_THAT(Segments(dir.path()), ElementsAre(WalSegmentName(55)));
  EXPECT_EQ(1u, writer->stats().segments);
  WriteFixed(*writer, 61, 62);  // still writable
  writer.reset();

  Replayed rest = ReplayAll(dir.path(), 0);  // 0 or 1: from wherever the log starts
  ASSERT_TRUE(rest.status.ok()) << rest.status;
  EXPECT_EQ(55u, rest.stats.first_lsn);
  EXPECT_EQ(62u, rest.stats.last_lsn);
  // Asking for records the log no longer has is DATA_LOSS, not silence.
  Replayed gone = ReplayAll(dir.path(), 40);
  EXPECT_EQ(absl::StatusCode::kDataLoss, gone.status.code());
  EXPECT_THAT(Message(gone.status), HasSubstr("starts at LSN 55"));

  auto reopened = OpenOrDie(dir.path(), options);
  ASSERT_NE(nullptr, reopened);
  EXPECT_EQ(63u, reopened->Add("after"));
}

TEST(WalTest, TornTailAtEveryOffsetOfTheLastRecordIsTruncatedOnReopen) {
  TempDir dir;
  constexpr uint64_t kRecords = 12;
  const std::string last_payload = "the last record, cut short by a crash";
  {
    auto writer = OpenOrDie(dir.Join("original"));
    ASSERT_NE(nullptr, writer);
    for (uint64_t i = 1; i < kRecords; ++i) writer->Add(Payload(i));
    writer->Add(last_payload);
    ASSERT_TRUE(writer->Sync(kRecords).ok());
  }
  const std::string bytes = ReadFileOrDie(dir.Join("original/" + WalSegmentName(1)));
  const size_t last_start = bytes.size() - kWalHeaderBytes - last_payload.size();

  for (size_t cut = last_start; cut < bytes.size(); ++cut) {
    SCOPED_TRACE(absl::StrCat("cut at ", cut));
    const std::string wal = dir.Join(absl::StrCat("cut", cut));
    std::filesystem::create_directory(wal);
    const std::string segment = wal + "/" + WalSegmentName(1);
    WriteFileOrDie(segment, bytes.substr(0, cut));

    Replayed before = ReplayAll(wal);
    ASSERT_TRUE(before.status.ok()) << before.status;
    ASSERT_EQ(kRecords - 1, before.records.size());
    EXPECT_EQ(cut - last_start, before.stats.torn_tail_bytes);
    {
      auto writer = OpenOrDie(wal);
      ASSERT_NE(nullptr, writer);
      EXPECT_EQ(kRecords - 1, writer->stats().last_lsn);
      EXPECT_EQ(last_start, std::filesystem::file_size(segment));  // tail truncated
      EXPECT_EQ(kRecords, writer->Add("written after the crash"));
      ASSERT_TRUE(writer->Sync(kRecords).ok());
    }
    Replayed after = ReplayAll(wal);
    ASSERT_TRUE(after.status.ok()) << after.status;
    ASSERT_EQ(kRecords, after.records.size());
    EXPECT_EQ(0u, after.stats.torn_tail_bytes);
    for (uint64_t i = 1; i < kRecords; ++i) EXPECT_EQ(Payload(i), after.records[i - 1]);
    EXPECT_EQ("written after the crash", after.records.back());
    std::filesystem::remove_all(wal);
  }
}

TEST(WalTest, BadCrcInTheLastRecordIsATornTail) {
  TempDir dir;
  {
    auto writer = OpenOrDie(dir.path());
    ASSERT_NE(nullptr, writer);
    for (uint64_t i = 1; i <= 5; ++i) writer->Add(FixedPayload(i));
    ASSERT_TRUE(writer->Sync(5).ok());
  }
  const std::string segment = dir.Join(WalSegmentName(1));
  std::string bytes = ReadFileOrDie(segment);
  bytes.back() ^= 0x40;  // inside the last payload: a torn page at the very end
  WriteFileOrDie(segment, bytes);

  Replayed r = ReplayAll(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(4u, r.records.size());
  EXPECT_EQ(116u, r.stats.torn_tail_bytes);
  auto writer = OpenOrDie(dir.path());
  ASSERT_NE(nullptr, writer);
  EXPECT_EQ(5u, writer->Add("replaces the torn one"));
}

TEST(WalTest, CorruptMiddleRecordIsDataLossNamingFileAndOffset) {
  TempDir dir;
  constexpr uint64_t kRecords = 20, kVictim = 10;
  {
    auto writer = OpenOrDie(dir.Join("original"));
    ASSERT_NE(nullptr, writer);
    for (uint64_t i = 1; i <= kRecords; ++i) writer->Add(Payload(i));
    ASSERT_TRUE(writer->Sync(kRecords).ok());
  }
  const std::string bytes = ReadFileOrDie(dir.Join("original/" + WalSegmentName(1)));
  size_t victim_offset = 0;
  for (uint64_t i = 1; i < kVictim; ++i) victim_offset += kWalHeaderBytes + Payload(i).size();
  ASSERT_GE(Payload(kVictim).size(), 3u);

  struct Damage {
    const char* what;
    size_t byte;  // within the victim's frame
    char mask;
    const char* problem;
  };
  const Damage damages[] = {
      {"payload", kWalHeaderBytes + 2, 0x01, "CRC mismatch"},
      {"crc", 5, 0x10, "CRC mismatch"},
      {"lsn", 8, 0x01, "CRC mismatch"},
      {"length low bit", 0, 0x01, ""},
      {"length past the end", 3, 0x01, "truncated payload"},
      {"absurd length", 3, static_cast<char>(0x80), "exceeds the limit"},
  };
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.what);
    const std::string wal = dir.Join(damage.what);
    std::filesystem::create_directory(wal);
    const std::string segment = wal + "/" + WalSegmentName(1);
    std::string damaged = bytes;
    damaged[victim_offset + damage.byte] ^= damage.mask;
    WriteFileOrDie(segment, damaged);

    Replayed r = ReplayAll(wal);
    EXPECT_EQ(absl::StatusCode::kDataLoss, r.status.code()) << r.status;
    EXPECT_THAT(Message(r.status), HasSubstr(segment));
    EXPECT_THAT(Message(r.status), HasSubstr(absl::StrCat("offset ", victim_offset, ":")));
    EXPECT_THAT(Message(r.status), HasSubstr(damage.problem));
    EXPECT_EQ(kVictim - 1, r.records.size());  // what came before was replayed

    auto writer = WalWriter::Open(wal, {});
    ASSERT_FALSE(writer.ok());
    EXPECT_EQ(absl::StatusCode::kDataLoss, writer.status().code());
    EXPECT_THAT(Message(writer.status()), HasSubstr(segment));
    EXPECT_EQ(damaged, ReadFileOrDie(segment));  // nothing truncated
  }
}

TEST(WalTest, TruncatedNonLastSegmentIsDataLoss) {
  TempDir dir;
  WalOptions options;
  options.segment_bytes = kSmallSegmentBytes;
  {
    auto writer = OpenOrDie(dir.path(), options);
    ASSERT_NE(nullptr, writer);
    WriteFixed(*writer, 1, 30);  // segments 1, 10, 19, 28
  }
  const std::string first = dir.Join(WalSegmentName(1));
  std::string bytes = ReadFileOrDie(first);
  bytes.pop_back();
  WriteFileOrDie(first, bytes);

  Replayed r = ReplayAll(dir.path());
  EXPECT_EQ(absl::StatusCode::kDataLoss, r.status.code()) << r.status;
  EXPECT_THAT(Message(r.status), HasSubstr(first));
  EXPECT_THAT(Message(r.status), HasSubstr(absl::StrCat("offset ", 8 * 116, ":")));
  auto writer = WalWriter::Open(dir.path(), options);
  EXPECT_EQ(absl::StatusCode::kDataLoss, writer.status().code());

  // Replay past the damaged segment does not need it.
  Replayed later = ReplayAll(dir.path(), 10);
  EXPECT_TRUE(later.status.ok()) << later.status;
  EXPECT_EQ(21u, later.records.size());
}

TEST(WalTest, MissingMiddleSegmentIsAnLsnGap) {
  TempDir dir;
  WalOptions options;
  options.segment_bytes = kSmallSegmentBytes;
  {
    auto writer = OpenOrDie(dir.path(), options);
    ASSERT_NE(nullptr, writer);
    WriteFixed(*writer, 1, 30);
  }
  std::filesystem::remove(dir.Join(WalSegmentName(10)));
  Replayed r = ReplayAll(dir.path());
  EXPECT_EQ(absl::StatusCode::kDataLoss, r.status.code()) << r.status;
  EXPECT_THAT(Message(r.status), HasSubstr(dir.Join(WalSegmentName(19))));
  EXPECT_THAT(Message(r.status), HasSubstr("previous one ends at LSN 9"));
  EXPECT_EQ(absl::StatusCode::kDataLoss, WalWriter::Open(dir.path(), options).status().code());
}

TEST(WalTest, ReplayStopsAtTheCallbacksError) {
  TempDir dir;
  {
    auto writer = OpenOrDie(dir.path());
    ASSERT_NE(nullptr, writer);
    for (uint64_t i = 1; i <= 20; ++i) writer->Add(Payload(i));
  }
  int calls = 0;
  auto stats = ReplayWal(dir.path(), 0, [&](uint64_t lsn, std::string_view) {
    ++calls;
    return lsn == 5 ? absl::CancelledError("stop at 5") : absl::OkStatus();
  });
  EXPECT_EQ(absl::StatusCode::kCancelled, stats.status().code());
  EXPECT_EQ(5, calls);
}

TEST(WalTest, AddInPlaceLogsWhatFillWrites) {
  TempDir dir;
  std::vector<std::string> added;
  {
    auto writer = OpenOrDie(dir.path());
    ASSERT_NE(nullptr, writer);
    for (uint64_t i = 1; i <= 200; ++i) {
      added.push_back(Payload(i));
      const std::string& record = added.back();
      ASSERT_EQ(added.size(), writer->AddInPlace(record.size(), [&](char* dst) {
        std::copy(record.begin(), record.end(), dst);
      }));
      if (i % 3 == 0) writer->Add(added.emplace_back(absl::StrCat("plain ", i)));
    }
    ASSERT_TRUE(writer->Sync(~uint64_t{0}).ok());
  }
  Replayed r = ReplayAll(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.records, added);
}

TEST(WalTest, AddInPlaceRefusesAnOversizedRecordWithoutFillingIt) {
  TempDir dir;
  auto writer = OpenOrDie(dir.path());
  ASSERT_NE(nullptr, writer);
  ASSERT_TRUE(writer->Sync(writer->Add("before")).ok());
  bool filled = false;
  const uint64_t lsn = writer->AddInPlace(kWalMaxRecordBytes + 1, [&](char*) { filled = true; });
  EXPECT_EQ(lsn, 2u);
  EXPECT_FALSE(filled);
  const absl::Status refused = writer->Sync(lsn);
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  // Sticky: nothing after it is filled or written either.
  writer->AddInPlace(10, [&](char*) { filled = true; });
  EXPECT_FALSE(filled);
  EXPECT_EQ(writer->Sync(~uint64_t{0}), refused);
}

// Under kNone, records past early_write_bytes reach the file with no Sync
// (the early writer thread), and Sync then writes only what is left.
TEST(WalTest, EarlyWriterWritesPendingRecordsBeforeAnySync) {
  TempDir dir;
  WalOptions options;
  options.early_write_bytes = 4096;
  std::vector<std::string> added;
  {
    auto writer = OpenOrDie(dir.path(), options);
    ASSERT_NE(nullptr, writer);
    for (int i = 0; i < 10; ++i) added.push_back(std::string(1000, static_cast<char>('a' + i)));
    for (const std::string& record : added) writer->Add(record);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (writer->stats().records < 4 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const WalStats early = writer->stats();
    EXPECT_GE(early.records, 4u) << "no early write within 20 s";
    EXPECT_GE(early.group_writes, 1u);
    EXPECT_EQ(early.bytes, std::filesystem::file_size(dir.Join(WalSegmentName(1))));
    added.push_back("last");
    ASSERT_TRUE(writer->Sync(writer->Add(added.back())).ok());
    EXPECT_EQ(writer->stats().records, 11u);
  }
  Replayed r = ReplayAll(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.records, added);
}

// Under kData each group write costs an fdatasync: only Sync writes.
TEST(WalTest, NoEarlyWritesUnderDataSync) {
  TempDir dir;
  WalOptions options;
  options.sync = WalOptions::Sync::kData;
  options.early_write_bytes = 1;
  auto writer = OpenOrDie(dir.path(), options);
  ASSERT_NE(nullptr, writer);
  for (uint64_t i = 1; i <= 100; ++i) writer->Add(Payload(i));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(0u, writer->stats().group_writes);
  EXPECT_EQ(0u, std::filesystem::file_size(dir.Join(WalSegmentName(1))));
  ASSERT_TRUE(writer->Sync(100).ok());
  EXPECT_EQ(1u, writer->stats().syncs);
}

// 8 threads Add and Sync; with early_write_bytes 1 the early writer also
// writes whatever is pending whenever it can, racing the Syncs for it.
void CheckConcurrentWritersGroupCommitEveryRecordExactlyOnce(uint64_t early_write_bytes) {
  TempDir dir;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  WalOptions options;
  options.early_write_bytes = early_write_bytes;
  options.segment_bytes = 64 << 10;  // rotate under concurrency too
  auto writer = OpenOrDie(dir.path(), options);
  ASSERT_NE(nullptr, writer);

  std::vector<std::vector<uint64_t>> lsns(kThreads);
  std::atomic<int> failures{0};
  std::atomic<int> ready{0};  // a start line, so that the threads overlap
  std::atomic<bool> done{false};
  std::thread observer([&] {
    while (!done.load()) {
      if (writer->stats().records > writer->stats().last_lsn) failures.fetch_add(1);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int c = 0; c < kPerThread; ++c) {
        uint64_t lsn = writer->Add(absl::StrCat(t, ":", c));
        lsns[t].push_back(lsn);
        if (!writer->Sync(lsn).ok()) failures.fetch_add(1);
        // The log started empty, so "records written" is the written prefix.
        if (writer->stats().records < lsn) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  done = true;
  observer.join();
  EXPECT_EQ(0, failures.load());

  WalStats stats = writer->stats();
  EXPECT_EQ(uint64_t{kThreads * kPerThread}, stats.records);
  EXPECT_EQ(uint64_t{kThreads * kPerThread}, stats.last_lsn);
  // How much grouping happens here depends on scheduling (none at all when
  // the two cores are busy elsewhere); SyncsArrivingTogetherShareOneWrite
  // checks grouping deterministically.
  EXPECT_LE(stats.group_writes, stats.records);
  EXPECT_GT(stats.segments, 1u);
  writer.reset();

  Replayed r = ReplayAll(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(size_t{kThreads * kPerThread}, r.records.size());
  // Every record exactly once, at the LSN Add returned, so each thread's
  // records appear in its counter order.
  for (int t = 0; t < kThreads; ++t) {
    for (int c = 0; c < kPerThread; ++c) {
      ASSERT_EQ(absl::StrCat(t, ":", c), r.records[lsns[t][c] - 1]) << "thread " << t;
      if (c > 0) {
        ASSERT_LT(lsns[t][c - 1], lsns[t][c]);
      }
    }
  }
  std::printf("group commit: %llu records in %llu writes\n",
              static_cast<unsigned long long>(stats.records),
              static_cast<unsigned long long>(stats.group_writes));
}

TEST(WalTest, ConcurrentWritersGroupCommitEveryRecordExactlyOnce) {
  CheckConcurrentWritersGroupCommitEveryRecordExactlyOnce(0);
}

TEST(WalTest, ConcurrentWritersAndTheEarlyWriterLogEveryRecordExactlyOnce) {
  CheckConcurrentWritersGroupCommitEveryRecordExactlyOnce(1);
}

// In each round all threads Add, meet, then Sync: whichever Sync comes first
// finds every thread's record pending and writes them in one group; the
// others wait for it or find their LSN written. So a round costs at most one
// write (fewer when a round's Sync also takes the next round's early Adds),
// whatever the scheduling.
TEST(WalTest, SyncsArrivingTogetherShareOneWrite) {
  for (WalOptions::Sync mode : {WalOptions::Sync::kNone, WalOptions::Sync::kData}) {
    SCOPED_TRACE(mode == WalOptions::Sync::kData ? "kData" : "kNone");
    TempDir dir;
    constexpr int kThreads = 8;
    constexpr int kRounds = 30;
    WalOptions options;
    options.sync = mode;
    auto writer = OpenOrDie(dir.path(), options);
    ASSERT_NE(nullptr, writer);
    std::barrier added(kThreads);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int round = 0; round < kRounds; ++round) {
          uint64_t lsn = writer->Add(absl::StrCat(t, ":", round));
          added.arrive_and_wait();
          if (!writer->Sync(lsn).ok()) failures.fetch_add(1);
          if (writer->stats().records < lsn) failures.fetch_add(1);  // returned before written
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(0, failures.load());
    WalStats stats = writer->stats();
    EXPECT_EQ(uint64_t{kThreads * kRounds}, stats.records);
    EXPECT_GE(stats.group_writes, 1u);
    EXPECT_LE(stats.group_writes, uint64_t{kRounds});
    EXPECT_EQ(mode == WalOptions::Sync::kData ? stats.group_writes : 0u, stats.syncs);
    writer.reset();
    Replayed r = ReplayAll(dir.path());
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(size_t{kThreads * kRounds}, r.records.size());
  }
}

TEST(WalTest, DataSyncModeSyncsEveryGroup) {
  TempDir dir;
  WalOptions options;
  options.sync = WalOptions::Sync::kData;
  options.segment_bytes = kSmallSegmentBytes;
  {
    auto writer = OpenOrDie(dir.path(), options);
    ASSERT_NE(nullptr, writer);
    WriteFixed(*writer, 1, 20);
    WalStats stats = writer->stats();
    EXPECT_EQ(20u, stats.group_writes);
    EXPECT_EQ(20u, stats.syncs);
    EXPECT_EQ(3u, stats.segments);
  }
  Replayed r = ReplayAll(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(20u, r.records.size());
}

TEST(WalTest, WriteErrorIsStickyForEveryLaterSync) {
  TempDir dir;
  // A file size limit makes write() fail with EFBIG. It is process-wide, so
  // the writer runs in a child; the exit code says which check failed.
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {4096, 4096};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(10);
    auto writer = WalWriter::Open(dir.path(), {});
    if (!writer.ok()) _exit(11);
    if (!(*writer)->Sync((*writer)->Add(std::string(1000, 'a'))).ok()) _exit(12);
    absl::Status failed = (*writer)->Sync((*writer)->Add(std::string(10000, 'b')));
    if (failed.ok() || Message(failed).find(WalSegmentName(1)) == std::string::npos) _exit(13);
    if ((*writer)->Sync((*writer)->Add("c")) != failed) _exit(14);
    if ((*writer)->Sync(1) != failed) _exit(15);  // even for an LSN written before
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(0, WEXITSTATUS(status));

  // The failed group left a torn tail; the record before it survives.
  Replayed r = ReplayAll(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(1u, r.records.size());
  EXPECT_EQ(std::string(1000, 'a'), r.records[0]);
  EXPECT_EQ(4096u - 1016u, r.stats.torn_tail_bytes);
}

// A real full disk (a small tmpfs): the failing write is undone and retried,
// not sticky; records added while full wait in memory; once space returns one
// Sync writes them all, and replay sees every record once, in LSN order.
TEST(WalTest, OutOfSpaceIsRetriedWhenSpaceReturnsAndLosesNothing) {
  TempDir dir;
  std::string why;
  auto fs = testing::ScopedTmpfs::Mount(dir.Join("wal"), 64 << 10, &why);
  if (fs == nullptr) GTEST_SKIP() << "SKIPPED: " << why;
  auto writer = OpenOrDie(fs->path());
  ASSERT_NE(writer, nullptr);
  std::vector<std::string> added;
  absl::Status full;
  for (int i = 0; i < 1000 && full.ok(); ++i) {
    added.push_back(absl::StrCat("record ", i, " ", std::string(1000, 'x')));
    full = writer->Sync(writer->Add(added.back()));
  }
  ASSERT_FALSE(full.ok()) << "64 KiB never filled up";
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_THAT(Message(full), HasSubstr("No space left on device"));
  EXPECT_THAT(Message(full), HasSubstr(fs->path()));
  EXPECT_TRUE(writer->failing());
  EXPECT_EQ(writer->stats().write_errors, 1u);

  // Still full: more records wait, every Sync on them fails, nothing sticks.
  for (int i = 0; i < 3; ++i) {
    added.push_back(absl::StrCat("late ", i));
    EXPECT_TRUE(absl::IsResourceExhausted(writer->Sync(writer->Add(added.back()))));
  }
  EXPECT_TRUE(writer->failing());

  ASSERT_TRUE(fs->Resize(1 << 20, &why)) << why;
  const absl::Status synced = writer->Sync(added.size());
  ASSERT_TRUE(synced.ok()) << synced;
  EXPECT_FALSE(writer->failing());
  EXPECT_GE(writer->stats().write_errors, 4u);
  writer.reset();

  Replayed r = ReplayAll(fs->path());
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.records, added);
  for (size_t i = 0; i < r.lsns.size(); ++i) EXPECT_EQ(r.lsns[i], i + 1);
  EXPECT_EQ(r.stats.torn_tail_bytes, 0u);
}

TEST(WalTest, RecordsAcknowledgedBySyncSurviveSigkill) {
  TempDir dir;
  const std::string wal = dir.Join("wal");
  int fds[2];
  ASSERT_EQ(0, pipe(fds));
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child only writes the log and reports each acknowledged LSN.
    close(fds[0]);
    auto writer = WalWriter::Open(wal, {});
    if (!writer.ok()) _exit(2);
    for (uint64_t i = 1; i <= 1000000; ++i) {
      uint64_t lsn = (*writer)->Add(Payload(i));
      if (lsn != i || !(*writer)->Sync(lsn).ok()) _exit(3);
      if (write(fds[1], &lsn, sizeof(lsn)) != sizeof(lsn)) _exit(4);
    }
    _exit(0);
  }
  close(fds[1]);
  uint64_t acked = 0, got = 0;
  while (acked < 300 && read(fds[0], &got, sizeof(got)) == sizeof(got)) acked = got;
  kill(pid, SIGKILL);
  while (read(fds[0], &got, sizeof(got)) == sizeof(got)) acked = got;  // sent before it died
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  ASSERT_GE(acked, 300u);

  Replayed r = ReplayAll(wal);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_GE(r.records.size(), acked);
  for (uint64_t i = 1; i <= r.records.size(); ++i) ASSERT_EQ(Payload(i), r.records[i - 1]);

  auto writer = OpenOrDie(wal);
  ASSERT_NE(nullptr, writer);
  EXPECT_EQ(r.records.size() + 1, writer->Add("after the kill"));
}

}  // namespace
}  // namespace brook::storage
