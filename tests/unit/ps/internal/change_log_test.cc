#include "ps/internal/change_log.h"

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace brook::ps::internal {
namespace {

using Keys = std::vector<uint64_t>;
using TableKeys = std::vector<std::pair<std::string, Keys>>;

void AddTable(ChangeLog& log, std::string_view name, const Keys& keys) {
  log.Append(ChangePart{.name = name, .keys = keys});
}

Changes SinceOrDie(const ChangeLog& log, std::string_view prefix, uint64_t since,
                   uint64_t max_keys = 1u << 20) {
  absl::StatusOr<Changes> c = log.Since(prefix, since, max_keys);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : Changes{};
}

TEST(ChangeLogTest, MergesKeysPerTableSortedAndDistinct) {
  ChangeLog log(1 << 20);
  EXPECT_EQ(log.head(), 1u);
  AddTable(log, "b", {5, 3});
  AddTable(log, "a", {9});
  AddTable(log, "b", {3, 1});
  log.Append(ChangePart{.name = "w", .dense = true});
  EXPECT_EQ(log.head(), 5u);
  const Changes c = SinceOrDie(log, "", 0);
  EXPECT_EQ(c.tables, (TableKeys{{"a", {9}}, {"b", {1, 3, 5}}}));
  EXPECT_EQ(c.dense, std::vector<std::string>{"w"});
  EXPECT_EQ(c.next, 5u);
  EXPECT_FALSE(c.more);
  // From the third record on.
  const Changes later = SinceOrDie(log, "", 3);
  EXPECT_EQ(later.tables, (TableKeys{{"b", {1, 3}}}));
  // Caught up: nothing, and the same position.
  const Changes none = SinceOrDie(log, "", 5);
  EXPECT_TRUE(none.tables.empty());
  EXPECT_TRUE(none.dense.empty());
  EXPECT_EQ(none.next, 5u);
}

TEST(ChangeLogTest, OneRecordHoldsEveryPartOfAPushBatch) {
  ChangeLog log(1 << 20);
  const Keys a = {1, 2}, b = {7};
  const std::vector<ChangePart> parts = {{.name = "job/a", .keys = a},
                                         {.name = "job/b", .keys = b},
                                         {.name = "job/empty"},
                                         {.name = "job/w", .dense = true}};
  log.Append(parts);
  EXPECT_EQ(log.head(), 2u);
  const Changes c = SinceOrDie(log, "job/", 1);
  EXPECT_EQ(c.tables, (TableKeys{{"job/a", {1, 2}}, {"job/b", {7}}}));
  EXPECT_EQ(c.dense, std::vector<std::string>{"job/w"});
  // Nothing left once empty parts are left out: no record.
  log.Append(ChangePart{.name = "x"});
  EXPECT_EQ(log.head(), 2u);
}

TEST(ChangeLogTest, PrefixFiltersButEveryRecordAdvancesTheCursor) {
  ChangeLog log(1 << 20);
  AddTable(log, "job1/t", {1});
  AddTable(log, "job2/t", {2});
  log.Append(ChangePart{.name = "job2/w", .dense = true});
  const Changes c = SinceOrDie(log, "job1/", 1);
  EXPECT_EQ(c.tables, (TableKeys{{"job1/t", {1}}}));
  EXPECT_TRUE(c.dense.empty());
  EXPECT_EQ(c.next, 4u);
  const Changes c2 = SinceOrDie(log, "job2/", 1);
  EXPECT_EQ(c2.tables, (TableKeys{{"job2/t", {2}}}));
  EXPECT_EQ(c2.dense, std::vector<std::string>{"job2/w"});
}

TEST(ChangeLogTest, MaxKeysStopsAtWholeRecordsAndSaysMore) {
  ChangeLog log(1 << 20);
  AddTable(log, "t", {1, 2, 3});  // 1
  AddTable(log, "t", {4, 5});     // 2
  AddTable(log, "t", {6});        // 3
  Changes c = SinceOrDie(log, "", 1, /*max_keys=*/4);
  EXPECT_EQ(c.tables, (TableKeys{{"t", {1, 2, 3}}}));
  EXPECT_TRUE(c.more);
  EXPECT_EQ(c.next, 2u);
  c = SinceOrDie(log, "", c.next, 4);
  EXPECT_EQ(c.tables, (TableKeys{{"t", {4, 5, 6}}}));
  EXPECT_FALSE(c.more);
  EXPECT_EQ(c.next, 4u);
  // A first record larger than max_keys is still taken whole: progress.
  c = SinceOrDie(log, "", 1, 2);
  EXPECT_EQ(c.tables, (TableKeys{{"t", {1, 2, 3}}}));
  EXPECT_TRUE(c.more);
  EXPECT_EQ(c.next, 2u);
  // max_keys 0: no keys, and the cursor stays where the first keys are.
  c = SinceOrDie(log, "", 1, 0);
  EXPECT_TRUE(c.tables.empty());
  EXPECT_TRUE(c.more);
  EXPECT_EQ(c.next, 1u);
}

TEST(ChangeLogTest, EvictsOldestPastTheBudgetAndOlderPositionsAreOutOfRange) {
  ChangeLog log(4096);
  const Keys keys(64, 7);  // ~600 bytes a record
  for (int i = 0; i < 50; ++i) AddTable(log, "t", keys);
  const ChangeLogStats s = log.Stats();
  EXPECT_LE(s.bytes, 4096u);
  EXPECT_GT(s.records, 0u);
  EXPECT_LT(s.records, 50u);
  EXPECT_EQ(s.next_sequence, 51u);
  EXPECT_EQ(s.oldest_sequence, s.next_sequence - s.records);
  EXPECT_EQ(log.Since("", 0, 100).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(log.Since("", s.oldest_sequence - 1, 100).status().code(),
            absl::StatusCode::kOutOfRange);
  const Changes c = SinceOrDie(log, "", s.oldest_sequence);
  EXPECT_EQ(c.tables, (TableKeys{{"t", {7}}}));
  EXPECT_EQ(c.next, 51u);
}

TEST(ChangeLogTest, ARecordLargerThanTheBudgetDropsEverything) {
  ChangeLog log(1024);
  AddTable(log, "t", {1});
  AddTable(log, "t", Keys(1000, 2));
  const ChangeLogStats s = log.Stats();
  EXPECT_EQ(s.records, 0u);
  EXPECT_EQ(s.bytes, 0u);  // the name went with its last record
  EXPECT_EQ(s.oldest_sequence, 3u);
  EXPECT_EQ(log.Since("", 2, 100).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(SinceOrDie(log, "", 3).tables.empty());
}

TEST(ChangeLogTest, ResetMakesEveryEarlierPositionOutOfRangeEvenTheHead) {
  ChangeLog log(1 << 20);
  AddTable(log, "t", {1});
  const uint64_t head = log.head();
  log.Reset();
  EXPECT_EQ(log.Since("", head, 100).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(log.Since("", 1, 100).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(log.Stats().bytes, 0u);
  AddTable(log, "t", {2});
  const Changes c = SinceOrDie(log, "", head + 1);
  EXPECT_EQ(c.tables, (TableKeys{{"t", {2}}}));
}

TEST(ChangeLogTest, APositionPastTheHeadIsOutOfRange) {
  ChangeLog log(1 << 20);
  AddTable(log, "t", {1});
  EXPECT_EQ(log.Since("", 3, 100).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(ChangeLogTest, OffRecordsNothingAndRefusesReads) {
  ChangeLog log(0);
  EXPECT_FALSE(log.enabled());
  AddTable(log, "t", {1});
  EXPECT_EQ(log.head(), 1u);
  const absl::Status s = log.Since("", 1, 100).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("--change-log-mib"), std::string::npos) << s;
}

TEST(ChangeLogTest, ATableAndADenseVariableMayShareAName) {
  ChangeLog log(1 << 20);
  AddTable(log, "x", {4});
  log.Append(ChangePart{.name = "x", .dense = true});
  const Changes c = SinceOrDie(log, "", 1);
  EXPECT_EQ(c.tables, (TableKeys{{"x", {4}}}));
  EXPECT_EQ(c.dense, std::vector<std::string>{"x"});
}

TEST(ChangeLogTest, ConcurrentAppendsGetDistinctSequencesAndNoKeyIsLost) {
  ChangeLog log(64 << 20);
  constexpr int kThreads = 4, kPerThread = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&log, t] {
      for (int i = 0; i < kPerThread; ++i) {
        AddTable(log, "t", {static_cast<uint64_t>(t * kPerThread + i)});
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(log.head(), uint64_t{kThreads * kPerThread + 1});
  const Changes c = SinceOrDie(log, "", 1);
  ASSERT_EQ(c.tables.size(), 1u);
  EXPECT_EQ(c.tables[0].second.size(), size_t{kThreads * kPerThread});
}

}  // namespace
}  // namespace brook::ps::internal
