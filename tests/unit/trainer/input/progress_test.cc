// UnitProgress: the per-unit low-water mark of acknowledged records, on its
// own and driven by a shuffling pipeline with acks in random order.
#include "trainer/input/progress.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"
#include "tests/unit/trainer/input/pipeline_test_util.h"
#include "trainer/input/pipeline.h"

namespace brook::input {
namespace {

using namespace ::brook::input::testing;  // NOLINT: test helpers

BatchProvenance Prov(uint64_t seq, std::vector<RecordRange> ranges,
                     std::vector<UnitEnd> ends = {}) {
  BatchProvenance p;
  p.sequence = seq;
  p.ranges = std::move(ranges);
  p.unit_ends = std::move(ends);
  return p;
}

TEST(UnitProgressTest, TheMarkMovesOnlyOverAContiguousAckedPrefix) {
  const std::vector<sharding::WorkUnit> units = {{.id = 1, .path = "f", .begin = 100, .end = 110}};
  UnitProgress progress(units);
  EXPECT_EQ(progress.Committed(1), 100u);
  ASSERT_TRUE(progress.Track(Prov(0, {{1, 100, 103}})).ok());
  ASSERT_TRUE(progress.Track(Prov(1, {{1, 103, 104}, {1, 107, 110}})).ok());
  ASSERT_TRUE(progress.Track(Prov(2, {{1, 104, 107}})).ok());
  EXPECT_EQ(progress.pending_batches(), 3u);

  ASSERT_TRUE(progress.Ack(1).ok());  // out of order: a hole at 100..103
  EXPECT_EQ(progress.Committed(1), 100u);
  EXPECT_EQ(progress.AckedAboveMark(1), (std::vector<RecordRange>{{1, 103, 104}, {1, 107, 110}}));
  ASSERT_TRUE(progress.Ack(0).ok());
  EXPECT_EQ(progress.Committed(1), 104u);
  EXPECT_FALSE(progress.Complete(1));
  ASSERT_TRUE(progress.Ack(2).ok());  // fills 104..107, joins 107..110
  EXPECT_EQ(progress.Committed(1), 110u);
  EXPECT_TRUE(progress.Complete(1));
  EXPECT_TRUE(progress.AckedAboveMark(1).empty());
  EXPECT_EQ(progress.pending_batches(), 0u);
}

TEST(UnitProgressTest, AStepsBatchesAreAckedTogetherWithItsCount) {
  const std::vector<sharding::WorkUnit> units = {{.id = 1, .path = "f", .begin = 0, .end = 9}};
  UnitProgress progress(units);
  progress.AddSteps(4);  // a resumed unit: the steps its earlier holders committed
  EXPECT_EQ(progress.CommittedSteps(1).steps, 4u);
  for (uint64_t b = 0; b < 3; ++b)
    ASSERT_TRUE(progress.Track(Prov(b, {{1, 3 * b, 3 * b + 3}})).ok());
  // A step naming an untracked batch acks nothing and counts nothing.
  EXPECT_EQ(progress.AckStep(std::vector<uint64_t>{0, 7}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(progress.CommittedSteps(1).committed, 0u);
  EXPECT_EQ(progress.CommittedSteps(1).steps, 4u);
  ASSERT_TRUE(progress.AckStep(std::vector<uint64_t>{0, 1}).ok());
  const UnitProgress::StepMark mark = progress.CommittedSteps(1);
  EXPECT_EQ(mark.committed, 6u);
  EXPECT_EQ(mark.steps, 5u);
  ASSERT_TRUE(progress.AckStep(std::vector<uint64_t>{2}).ok());
  EXPECT_EQ(progress.CommittedSteps(1).committed, 9u);
  EXPECT_EQ(progress.CommittedSteps(1).steps, 6u);
  EXPECT_TRUE(progress.Complete(1));
}

TEST(UnitProgressTest, RefusesUnknownAndDuplicateBatchesAndOtherEpochs) {
  UnitProgress progress({}, /*epoch=*/1);
  EXPECT_EQ(progress.Ack(5).code(), absl::StatusCode::kNotFound);
  BatchProvenance p = Prov(0, {{0, 0, 4}});
  EXPECT_EQ(progress.Track(p).code(), absl::StatusCode::kInvalidArgument);
  p.epoch = 1;
  ASSERT_TRUE(progress.Track(p).ok());
  EXPECT_EQ(progress.Track(p).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(progress.Ack(0).ok());
  EXPECT_EQ(progress.Ack(0).code(), absl::StatusCode::kNotFound);
  // Tracking and acking again is harmless: acks are a set union.
  ASSERT_TRUE(progress.Track(p).ok());
  ASSERT_TRUE(progress.Ack(0).ok());
  EXPECT_EQ(progress.Committed(0), 4u);
}

TEST(UnitProgressTest, UnitsSeenOnlyInBatchesStartAtZeroAndLearnTheirEnd) {
  UnitProgress progress;
  ASSERT_TRUE(progress.Track(Prov(0, {{4, 2, 5}})).ok());
  ASSERT_TRUE(progress.Track(Prov(1, {{4, 0, 2}}, {{4, 5}})).ok());
  ASSERT_TRUE(progress.Ack(0).ok());
  EXPECT_EQ(progress.Committed(4), 0u);
  ASSERT_TRUE(progress.Ack(1).ok());
  const std::vector<UnitOffset> offsets = progress.Offsets();
  ASSERT_EQ(offsets.size(), 1u);
  EXPECT_EQ(offsets[0].unit_id, 4u);
  EXPECT_EQ(offsets[0].committed, 5u);
  EXPECT_EQ(offsets[0].end, 5u);
  EXPECT_TRUE(offsets[0].complete);
}

// The trainer's loop with shuffling, several batches in flight and acks in
// random order: after every ack, each unit's mark is exactly the first record
// not yet acknowledged.
TEST(UnitProgressTest, LowWaterMarkIsExactUnderShufflingAndOutOfOrderAcks) {
  brook::testing::TempDir dir;
  WriteIdFile(dir.Join("a"), 0, 120);
  WriteIdFile(dir.Join("b"), 1, 80);
  PipelineOptions o;
  o.units = {{.id = 0, .path = dir.Join("a"), .begin = 20, .end = 0},
             {.id = 1, .path = dir.Join("b"), .begin = 0, .end = 70}};
  o.shuffle_buffer = 50;
  o.batch_size = 7;
  o.cycle_length = 2;
  o.parse_threads = 3;
  o.seed = 11;
  absl::StatusOr<std::unique_ptr<Pipeline>> p = Pipeline::Create(IdSpec(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  UnitProgress progress((*p)->units());

  std::map<uint32_t, std::set<uint64_t>> unacked;  // ground truth from the rows
  for (uint64_t i = 20; i < 120; ++i) unacked[0].insert(i);
  for (uint64_t i = 0; i < 70; ++i) unacked[1].insert(i);
  const std::map<uint32_t, uint64_t> ends = {{0, 120}, {1, 70}};
  auto check = [&] {
    for (const auto& [unit, pending] : unacked) {
      const uint64_t want = pending.empty() ? ends.at(unit) : *pending.begin();
      ASSERT_EQ(progress.Committed(unit), want) << "unit " << unit;
    }
  };

  std::mt19937 rng(5);
  std::vector<Batch> in_flight;
  bool marks_moved_with_holes = false;
  auto ack_one = [&] {
    const size_t i = std::uniform_int_distribution<size_t>(0, in_flight.size() - 1)(rng);
    const Batch& b = in_flight[i];
    ASSERT_TRUE(progress.Ack(b.provenance.sequence).ok());
    for (int64_t id : Ids(b)) unacked[id / kIdsPerFile].erase(id % kIdsPerFile);
    in_flight.erase(in_flight.begin() + static_cast<ptrdiff_t>(i));
    check();
    for (const auto& [unit, pending] : unacked) {
      if (!progress.AckedAboveMark(unit).empty()) marks_moved_with_holes = true;
    }
  };
  while (true) {
    absl::StatusOr<std::optional<Batch>> b = (*p)->Next();
    ASSERT_TRUE(b.ok()) << b.status();
    if (!b->has_value()) break;
    ASSERT_TRUE(progress.Track((*b)->provenance).ok());
    in_flight.push_back(std::move(**b));
    if (in_flight.size() > 5) ack_one();  // up to 6 batches in flight
  }
  while (!in_flight.empty()) ack_one();
  EXPECT_TRUE(marks_moved_with_holes) << "the test must see out-of-order completion";
  EXPECT_TRUE(progress.Complete(0));
  EXPECT_TRUE(progress.Complete(1));
  EXPECT_EQ(progress.Committed(0), 120u);
}

}  // namespace
}  // namespace brook::input
