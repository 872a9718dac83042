// The input pipeline's parts on their own: the bounded hand-offs, the
// autotuner's rule, row copies, record ranges and the interleaving reader.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"
#include "tests/unit/trainer/input/pipeline_test_util.h"
#include "trainer/input/autotune.h"
#include "trainer/input/batch_rows.h"
#include "trainer/input/bounded_queue.h"
#include "trainer/input/example_parser.h"
#include "trainer/input/sources.h"

namespace brook::input::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace ::brook::input::testing;  // NOLINT: test helpers

// ---- BoundedQueue.

TEST(BoundedQueueTest, PushBlocksAtCapacityUntilAPop) {
  BoundedQueue<int> q(2);
  ASSERT_TRUE(q.Push(1));
  ASSERT_TRUE(q.Push(2));
  std::atomic<bool> pushed{false};
  uint64_t waited = 0;
  std::thread producer([&] {
    EXPECT_TRUE(q.Push(3, &waited));
    pushed.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(pushed.load());
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.Pop(), 1);
  producer.join();
  EXPECT_TRUE(pushed.load());
  EXPECT_GE(waited, 40'000'000u);
  EXPECT_EQ(q.Pop(), 2);
  EXPECT_EQ(q.Pop(), 3);
}

TEST(BoundedQueueTest, CloseDrainsThenEnds) {
  BoundedQueue<int> q(4);
  ASSERT_TRUE(q.Push(1));
  q.Close();
  EXPECT_FALSE(q.Push(2));
  EXPECT_EQ(q.Pop(), 1);
  EXPECT_EQ(q.Pop(), std::nullopt);
}

TEST(BoundedQueueTest, CancelWakesBlockedProducersAndConsumers) {
  BoundedQueue<int> full(1), empty(1);
  ASSERT_TRUE(full.Push(1));
  std::thread producer([&] { EXPECT_FALSE(full.Push(2)); });
  std::thread consumer([&] { EXPECT_EQ(empty.Pop(), std::nullopt); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  full.Cancel();
  empty.Cancel();
  producer.join();
  consumer.join();
  EXPECT_EQ(full.Pop(), std::nullopt) << "cancel drops queued items";
}

// ---- OrderedWindow.

TEST(OrderedWindowTest, TakesInOrderWhateverThePutOrder) {
  OrderedWindow<int> w(4);
  ASSERT_TRUE(w.Put(2, 20));
  ASSERT_TRUE(w.Put(0, 0));
  ASSERT_TRUE(w.Put(3, 30));
  ASSERT_TRUE(w.Put(1, 10));
  EXPECT_EQ(w.Take(), 0);
  EXPECT_EQ(w.Take(), 10);
  EXPECT_EQ(w.Take(), 20);
  EXPECT_EQ(w.Take(), 30);
}

TEST(OrderedWindowTest, PutBlocksAtOrBeyondNextPlusCapacity) {
  OrderedWindow<int> w(2);
  ASSERT_TRUE(w.Put(1, 10));  // seq 1 < next 0 + 2: fits out of order
  std::atomic<bool> put{false};
  std::thread late([&] {
    EXPECT_TRUE(w.Put(2, 20));  // 2 >= 0 + 2: waits until 0 is taken
    put.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(put.load());
  std::thread first([&] { EXPECT_TRUE(w.Put(0, 0)); });  // next is never blocked
  first.join();
  EXPECT_EQ(w.Take(), 0);
  late.join();
  EXPECT_TRUE(put.load());
  EXPECT_EQ(w.Take(), 10);
  EXPECT_EQ(w.Take(), 20);
}

TEST(OrderedWindowTest, GrowingTheCapacityReleasesPutters) {
  OrderedWindow<int> w(1);
  std::thread late([&] { EXPECT_TRUE(w.Put(1, 10)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(w.size(), 0u);
  w.SetCapacity(2);
  late.join();
  EXPECT_EQ(w.size(), 1u);
}

TEST(OrderedWindowTest, CancelWakesATakerWaitingForAMissingItem) {
  OrderedWindow<int> w(4);
  ASSERT_TRUE(w.Put(1, 10));
  std::thread taker([&] { EXPECT_EQ(w.Take(), std::nullopt); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  w.Cancel();
  taker.join();
  EXPECT_FALSE(w.Put(0, 0));
}

// ---- The autotuner's rule.

AutotuneSignals Waiting(uint64_t parse_busy, uint64_t parse_blocked) {
  return {.interval_ns = 1000,
          .consumer_wait_ns = 500,
          .parse_busy_ns = parse_busy,
          .parse_wait_output_ns = parse_blocked,
          .parse_threads = 2,
          .tune_parse_threads = true,
          .max_parse_threads = 4,
          .tune_prefetch = true,
          .prefetch = 2,
          .max_prefetch = 8};
}

TEST(AutotuneTest, AddsAParseWorkerWhenTheConsumerWaitsAndWorkersAreBusy) {
  EXPECT_EQ(DecideAutotune(Waiting(1900, 0)), AutotuneAction::kAddParseThread);
  AutotuneSignals at_max = Waiting(1900, 0);
  at_max.parse_threads = 4;
  at_max.parse_busy_ns = 3900;
  EXPECT_EQ(DecideAutotune(at_max), AutotuneAction::kNone);
  AutotuneSignals fixed = Waiting(1900, 0);
  fixed.tune_parse_threads = false;
  EXPECT_EQ(DecideAutotune(fixed), AutotuneAction::kNone) << "not prefetch either: parse-bound";
}

TEST(AutotuneTest, DoesNothingWhileTheConsumerDoesNotWait) {
  AutotuneSignals s = Waiting(2000, 0);
  s.consumer_wait_ns = 50;  // 5% < 10%
  EXPECT_EQ(DecideAutotune(s), AutotuneAction::kNone);
}

TEST(AutotuneTest, GrowsPrefetchWhenWorkersAreBlockedOnTheWindow) {
  EXPECT_EQ(DecideAutotune(Waiting(800, 600)), AutotuneAction::kGrowPrefetch);
  AutotuneSignals at_max = Waiting(800, 600);
  at_max.prefetch = 8;
  EXPECT_EQ(DecideAutotune(at_max), AutotuneAction::kNone);
}

TEST(AutotuneTest, AStarvedParseStageMeansTheReaderIsSlowestAndNothingIsAdded) {
  EXPECT_EQ(DecideAutotune(Waiting(400, 0)), AutotuneAction::kNone);
}

// ---- Rows and ranges.

TEST(BatchRowsTest, AppendRowsCopiesFixedAndRaggedColumnsInOrder) {
  const FeatureSpec spec = IdSpec();
  ExampleParser parser = ExampleParser::Create(spec).value();
  ColumnarBatch src, dst;
  parser.InitBatch(&src);
  parser.InitBatch(&dst);
  datatools::ExampleBuilder b;
  for (int64_t id : {5, 6, 7, 8}) ASSERT_TRUE(parser.Append(IdExample(&b, id), &src, nullptr).ok());
  AppendRows(spec, src, 2, 4, &dst);  // 7, 8
  AppendRows(spec, src, 0, 1, &dst);  // 5
  AppendRows(spec, src, 1, 1, &dst);  // nothing
  EXPECT_EQ(dst.num_rows, 3u);
  EXPECT_THAT(dst.columns[0].int64s, ElementsAre(7, 8, 5));
  EXPECT_THAT(dst.columns[2].row_splits, ElementsAre(0, 3, 3, 4));  // 7%4, 8%4, 5%4 tags
  EXPECT_THAT(dst.columns[2].ids, ElementsAre(70, 71, 72, 50));
  Batch batch;
  batch.data = dst;
  ExpectRowsConsistent(batch);
  EXPECT_GT(BatchBytes(dst), 60u);
}

TEST(RecordRangesTest, MergesRunsPerUnitInAnyOrder) {
  std::vector<RecordId> ids = {{2, 5}, {1, 3}, {1, 1}, {1, 2}, {2, 4}, {1, 7}, {2, 6}};
  std::vector<RecordRange> ranges;
  AppendRanges(&ids, &ranges);
  EXPECT_EQ(ranges, (std::vector<RecordRange>{{1, 1, 4}, {1, 7, 8}, {2, 4, 7}}));
  std::vector<RecordId> more = {{1, 4}, {1, 0}, {3, 9}};
  AppendRanges(&more, &ranges);
  EXPECT_EQ(ranges, (std::vector<RecordRange>{{1, 0, 5}, {1, 7, 8}, {2, 4, 7}, {3, 9, 10}}));
}

// ---- Sources.

TEST(SourcesTest, ExpandGlobSortsAndNamesAPatternWithoutMatch) {
  brook::testing::TempDir dir;
  for (const char* name : {"b-2", "a-10", "a-9"})
    brook::testing::WriteFileOrDie(dir.Join(name), "");
  absl::StatusOr<std::vector<std::string>> paths = ExpandGlob(dir.Join("*-*"));
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_THAT(*paths, ElementsAre(dir.Join("a-10"), dir.Join("a-9"), dir.Join("b-2")));
  absl::Status none = ExpandGlob(dir.Join("zzz*")).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.message(), HasSubstr("zzz*"));
}

TEST(SourcesTest, ResolveUnitsChecksUnits) {
  brook::testing::TempDir dir;
  WriteIdFile(dir.Join("f"), 0, 3);
  using U = sharding::WorkUnit;
  EXPECT_TRUE(ResolveUnits({}, "", {U{1, dir.Join("f"), 0, 2}, U{2, dir.Join("f"), 2, 0}}).ok());
  EXPECT_EQ(
      ResolveUnits({}, "", {U{1, dir.Join("f"), 0, 2}, U{1, dir.Join("f"), 2, 0}}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveUnits({}, "", {U{1, dir.Join("f"), 2, 2}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveUnits({}, "", {U{1, dir.Join("g"), 0, 0}}).status().code(),
            absl::StatusCode::kNotFound);
  auto files = ResolveUnits({dir.Join("f"), dir.Join("f")}, "", {});
  ASSERT_TRUE(files.ok());
  EXPECT_EQ((*files)[1].id, 1u);
}

std::vector<std::pair<uint32_t, uint64_t>> ReadAllIds(InterleavedReader* reader,
                                                      std::vector<UnitEnd>* ends) {
  std::vector<std::pair<uint32_t, uint64_t>> out;
  std::string_view record;
  RecordId id;
  while (true) {
    absl::StatusOr<bool> more = reader->Next(&record, &id);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    out.emplace_back(id.unit_id, id.index);
    reader->TakeFinished(ends);
  }
  reader->TakeFinished(ends);
  return out;
}

TEST(InterleavedReaderTest, BlockLengthTakesRunsAndAnEmptyUnitIsFinishedToo) {
  brook::testing::TempDir dir;
  WriteIdFile(dir.Join("a"), 0, 4);
  WriteRecords(dir.Join("empty"), {});
  WriteIdFile(dir.Join("b"), 1, 3);
  using U = sharding::WorkUnit;
  InterleavedReader reader(
      {U{10, dir.Join("a"), 1, 0}, U{11, dir.Join("empty"), 0, 0}, U{12, dir.Join("b"), 0, 0}},
      {.cycle_length = 2, .block_length = 3});
  std::vector<UnitEnd> ends;
  auto ids = ReadAllIds(&reader, &ends);
  // Slot 0: unit 10 from record 1; slot 1: the empty unit ends at once and
  // unit 12 takes its slot on the next turn.
  EXPECT_EQ(ids, (std::vector<std::pair<uint32_t, uint64_t>>{
                     {10, 1}, {10, 2}, {10, 3}, {12, 0}, {12, 1}, {12, 2}}));
  EXPECT_EQ(ends, (std::vector<UnitEnd>{{11, 0}, {10, 4}, {12, 3}}));
  const ReaderCounters c = reader.counters();
  EXPECT_EQ(c.files_opened, 3u);
  EXPECT_EQ(c.records, 6u);
}

}  // namespace
}  // namespace brook::input::internal
