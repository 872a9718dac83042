// The input pipeline end to end: exactly-once per epoch, order, batching,
// epochs, cache, work units, errors, the TensorFlow-written file, stats,
// autotuning and cancellation. Parts: pipeline_parts_test.cc; UnitProgress:
// progress_test.cc.
#include "trainer/input/pipeline.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"
#include "tests/unit/trainer/input/pipeline_test_util.h"

namespace brook::input {
namespace {

using ::testing::HasSubstr;
using namespace ::brook::input::testing;  // NOLINT: test helpers

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::unique_ptr<Pipeline> MustCreate(const PipelineOptions& options,
                                     const FeatureSpec& spec = IdSpec()) {
  absl::StatusOr<std::unique_ptr<Pipeline>> p = Pipeline::Create(spec, options);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

// Files of 50, 37, 64 and 1 records: uneven, so interleaving and batch
// boundaries fall everywhere.
class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int f = 0; f < static_cast<int>(kSizes.size()); ++f) {
      files_.push_back(dir_.Join("part-" + std::to_string(f) + ".tfrecord"));
      WriteIdFile(files_.back(), f, kSizes[f]);
    }
  }
  std::vector<int64_t> AllIdsInFileOrder() const {
    std::vector<int64_t> ids;
    for (int f = 0; f < static_cast<int>(kSizes.size()); ++f) {
      for (int i = 0; i < kSizes[f]; ++i) ids.push_back(f * kIdsPerFile + i);
    }
    return ids;
  }
  PipelineOptions Options() const {
    PipelineOptions o;
    o.files = files_;
    o.batch_size = 16;
    return o;
  }

  const std::vector<int> kSizes = {50, 37, 64, 1};
  const int kTotal = 152;
  brook::testing::TempDir dir_;
  std::vector<std::string> files_;
};

// The record ids a batch's provenance covers, as ids (file * 1000 + index);
// files are units with id = position.
std::vector<int64_t> ProvenanceIds(const BatchProvenance& p) {
  std::vector<int64_t> ids;
  for (const RecordRange& r : p.ranges) {
    for (uint64_t i = r.begin; i < r.end; ++i) ids.push_back(r.unit_id * kIdsPerFile + i);
  }
  return ids;
}

// ---- Exactly once per epoch, across shuffle / cycle_length / parse threads.

class ExactlyOnceTest : public PipelineTest,
                        public ::testing::WithParamInterface<std::tuple<size_t, int, int>> {};

TEST_P(ExactlyOnceTest, EveryRecordAppearsExactlyOncePerEpoch) {
  const auto [shuffle, cycle, threads] = GetParam();
  PipelineOptions o = Options();
  o.shuffle_buffer = shuffle;
  o.cycle_length = cycle;
  o.parse_threads = threads;
  o.epochs = 2;
  auto p = MustCreate(o);
  ASSERT_NE(p, nullptr);
  Drained d = Drain(p.get());
  ASSERT_TRUE(d.status.ok()) << d.status;

  std::vector<int64_t> want = AllIdsInFileOrder();
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> got = EpochIds(d.batches, epoch);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << "epoch " << epoch;
  }
  // 152 = 9 * 16 + 8 per epoch, remainder kept; sequences dense.
  ASSERT_EQ(d.batches.size(), 20u);
  for (size_t i = 0; i < d.batches.size(); ++i) {
    const Batch& b = d.batches[i];
    EXPECT_EQ(b.provenance.sequence, i);
    EXPECT_EQ(b.epoch(), i < 10 ? 0 : 1);
    EXPECT_EQ(b.data.num_rows, i % 10 == 9 ? 8u : 16u);
    ExpectRowsConsistent(b);
    // Provenance covers exactly the rows (nothing is discarded here).
    std::vector<int64_t> rows = Ids(b);
    std::sort(rows.begin(), rows.end());
    EXPECT_EQ(ProvenanceIds(b.provenance), rows);
    EXPECT_EQ(b.provenance.discarded, 0u);
  }
  const PipelineStats s = p->stats();
  EXPECT_EQ(s.examples_parsed, 2u * kTotal);
  EXPECT_EQ(s.rows_returned, 2u * kTotal);
  EXPECT_EQ(s.epochs_completed, 2);
  EXPECT_EQ(s.files_opened, 8u);
}

INSTANTIATE_TEST_SUITE_P(ShuffleCycleThreads, ExactlyOnceTest,
                         ::testing::Combine(::testing::Values(size_t{0}, size_t{37}),
                                            ::testing::Values(1, 3), ::testing::Values(1, 4)));

// ---- Order.

TEST_F(PipelineTest, WithoutShuffleAndOneFileAtATimeTheOrderIsTheFileOrder) {
  PipelineOptions o = Options();
  o.cycle_length = 1;
  o.parse_threads = 4;
  auto p = MustCreate(o);
  Drained d = Drain(p.get());
  ASSERT_TRUE(d.status.ok()) << d.status;
  EXPECT_EQ(EpochIds(d.batches, 0), AllIdsInFileOrder());
  // One file per batch mostly: provenance is a few whole ranges.
  EXPECT_EQ(d.batches[0].provenance.ranges, (std::vector<RecordRange>{{0, 0, 16}}));
  EXPECT_EQ(d.batches[3].provenance.ranges, (std::vector<RecordRange>{{0, 48, 50}, {1, 0, 14}}));
}

TEST_F(PipelineTest, InterleavesBlocksRoundRobinLikeTfData) {
  std::vector<std::string> files = {dir_.Join("a"), dir_.Join("b"), dir_.Join("c")};
  WriteIdFile(files[0], 0, 5);
  WriteIdFile(files[1], 1, 3);
  WriteIdFile(files[2], 2, 4);
  PipelineOptions o;
  o.files = files;
  o.cycle_length = 2;
  o.block_length = 2;
  o.batch_size = 100;
  auto p = MustCreate(o);
  Drained d = Drain(p.get());
  ASSERT_TRUE(d.status.ok()) << d.status;
  // tf.data interleave(cycle_length=2, block_length=2): a finished file's
  // slot takes the next file when its turn comes back.
  EXPECT_EQ(EpochIds(d.batches, 0),
            (std::vector<int64_t>{0, 1, 1000, 1001, 2, 3, 1002, 4, 2000, 2001, 2002, 2003}));
}

TEST_F(PipelineTest, ShuffleIsDeterministicPerSeedAndDiffersBetweenEpochs) {
  auto run = [&](uint64_t seed, int threads) {
    PipelineOptions o = Options();
    o.shuffle_buffer = 64;
    o.seed = seed;
    o.epochs = 2;
    o.parse_threads = threads;
    auto p = MustCreate(o);
    Drained d = Drain(p.get());
    EXPECT_TRUE(d.status.ok()) << d.status;
    return std::make_pair(EpochIds(d.batches, 0), EpochIds(d.batches, 1));
  };
  const auto a = run(7, 1);
  EXPECT_EQ(run(7, 4), a) << "thread count must not change the order";
  EXPECT_EQ(run(7, 1), a);
  EXPECT_NE(a.first, a.second) << "each epoch is reshuffled";
  EXPECT_NE(run(8, 1).first, a.first);
  EXPECT_NE(a.first, AllIdsInFileOrder());
  // A shuffle buffer of 64 moves records far from their file position.
  std::vector<int64_t> file_order = AllIdsInFileOrder();
  size_t moved = 0;
  for (size_t i = 0; i < file_order.size(); ++i) moved += a.first[i] != file_order[i];
  EXPECT_GT(moved, file_order.size() / 2);
}

TEST_F(PipelineTest, ShuffledUnitOrderChangesPerEpoch) {
  PipelineOptions o = Options();
  o.shuffle_buffer = 1;  // a buffer of one record keeps records in order
  o.shuffle_units = true;
  o.cycle_length = 1;
  o.epochs = 4;
  o.seed = 3;
  auto p = MustCreate(o);
  Drained d = Drain(p.get());
  ASSERT_TRUE(d.status.ok()) << d.status;
  std::set<std::vector<int64_t>> first_ids_of_epochs;
  for (int e = 0; e < 4; ++e) {
    std::vector<int64_t> ids = EpochIds(d.batches, e);
    std::vector<int64_t> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, AllIdsInFileOrder());
    // Records of one file stay contiguous and in order.
    std::vector<int64_t> files;
    for (int64_t id : ids) {
      if (files.empty() || files.back() != id / kIdsPerFile) files.push_back(id / kIdsPerFile);
    }
    EXPECT_EQ(files.size(), 4u);
    first_ids_of_epochs.insert(files);
  }
  EXPECT_GT(first_ids_of_epochs.size(), 1u);
}

// ---- Batching and epochs.

TEST_F(PipelineTest, RemainderIsKeptOrDroppedWithItsRecordsInProvenance) {
  for (bool drop : {false, true}) {
    PipelineOptions o = Options();
    o.batch_size = 32;  // 152 = 4 * 32 + 24
    o.drop_remainder = drop;
    o.epochs = 2;
    auto p = MustCreate(o);
    Drained d = Drain(p.get());
    ASSERT_TRUE(d.status.ok()) << d.status;
    std::vector<size_t> sizes;
    uint64_t covered = 0;
    for (const Batch& b : d.batches) {
      sizes.push_back(b.data.num_rows);
      covered += b.provenance.num_records();
    }
    if (drop) {
      EXPECT_EQ(sizes, (std::vector<size_t>{32, 32, 32, 32, 32, 32, 32, 32}));
      // The dropped 24 ride on each epoch's last batch as discarded records.
      EXPECT_EQ(d.batches[3].provenance.discarded, 24u);
      EXPECT_EQ(d.batches[3].provenance.num_records(), 56u);
      EXPECT_EQ(p->stats().remainder_dropped, 48u);
    } else {
      EXPECT_EQ(sizes, (std::vector<size_t>{32, 32, 32, 32, 24, 32, 32, 32, 32, 24}));
      EXPECT_EQ(p->stats().remainder_dropped, 0u);
    }
    EXPECT_EQ(covered, 2u * kTotal) << "every record is settled by some batch";
    EXPECT_EQ(p->stats().epochs_completed, 2);
  }
}

TEST_F(PipelineTest, UnitEndsRideOnBatchesAndAnExactMultipleNeedsNoEmptyBatch) {
  PipelineOptions o;
  o.files = {files_[0]};  // 50 records
  o.batch_size = 25;
  auto p = MustCreate(o);
  Drained d = Drain(p.get());
  ASSERT_TRUE(d.status.ok()) << d.status;
  ASSERT_EQ(d.batches.size(), 2u);
  EXPECT_TRUE(d.batches[0].provenance.unit_ends.empty());
  EXPECT_EQ(d.batches[1].provenance.unit_ends, (std::vector<UnitEnd>{{0, 50}}));
}

TEST_F(PipelineTest, RepeatsForeverUntilCancelled) {
  PipelineOptions o = Options();
  o.epochs = 0;
  o.shuffle_buffer = 10;
  auto p = MustCreate(o);
  Drained d = Drain(p.get(), 55);  // 10 batches per epoch: into the 6th epoch
  ASSERT_TRUE(d.status.ok()) << d.status;
  ASSERT_EQ(d.batches.size(), 55u);
  EXPECT_EQ(d.batches.back().epoch(), 5);
  for (int e = 0; e < 5; ++e) {
    std::vector<int64_t> ids = EpochIds(d.batches, e);
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, AllIdsInFileOrder());
  }
  p->Cancel();
  absl::StatusOr<std::optional<Batch>> next = p->Next();
  EXPECT_EQ(next.status().code(), absl::StatusCode::kCancelled);
}

// ---- Cache.

TEST_F(PipelineTest, CacheServesLaterEpochsFromMemory) {
  for (size_t shuffle : {size_t{0}, size_t{20}}) {
    PipelineOptions o = Options();
    o.shuffle_buffer = shuffle;
    o.cache = true;
    o.epochs = 3;
    auto p = MustCreate(o);
    Drained d = Drain(p.get());
    ASSERT_TRUE(d.status.ok()) << d.status;
    for (int e = 0; e < 3; ++e) {
      std::vector<int64_t> ids = EpochIds(d.batches, e);
      if (shuffle == 0) {
        EXPECT_EQ(ids, EpochIds(d.batches, 0)) << "epoch " << e << ": same order every epoch";
      } else {
        EXPECT_NE(ids, EpochIds(d.batches, (e + 1) % 3)) << "epoch " << e;
      }
      std::sort(ids.begin(), ids.end());
      EXPECT_EQ(ids, AllIdsInFileOrder()) << "epoch " << e;
    }
    for (const Batch& b : d.batches) {
      ExpectRowsConsistent(b);
      std::vector<int64_t> rows = Ids(b);
      std::sort(rows.begin(), rows.end());
      EXPECT_EQ(ProvenanceIds(b.provenance), rows);
    }
    const PipelineStats s = p->stats();
    EXPECT_EQ(s.files_opened, 4u) << "epochs 2 and 3 open no file";
    EXPECT_EQ(s.read.items, static_cast<uint64_t>(kTotal)) << "and read no record";
    EXPECT_EQ(s.examples_parsed, static_cast<uint64_t>(kTotal)) << "and parse none";
    EXPECT_GT(s.batches_from_cache, 0u);
    EXPECT_GT(s.cache_bytes, static_cast<uint64_t>(kTotal) * 16);
    EXPECT_EQ(s.rows_returned, 3u * kTotal);
  }
}

TEST_F(PipelineTest, WithoutCacheEveryEpochRereadsTheFiles) {
  PipelineOptions o = Options();
  o.epochs = 3;
  auto p = MustCreate(o);
  ASSERT_TRUE(Drain(p.get()).status.ok());
  EXPECT_EQ(p->stats().files_opened, 12u);
  EXPECT_EQ(p->stats().read.items, 3u * kTotal);
  EXPECT_EQ(p->stats().batches_from_cache, 0u);
}

// ---- Work units.

TEST_F(PipelineTest, WorkUnitsReadExactlyTheirRecordRanges) {
  PipelineOptions o;
  o.units = {{.id = 7, .path = files_[0], .begin = 10, .end = 20},
             {.id = 8, .path = files_[0], .begin = 30, .end = 0},  // to end of file (50)
             {.id = 9, .path = files_[2], .begin = 0, .end = 5}};
  o.batch_size = 8;
  o.cycle_length = 2;
  o.shuffle_buffer = 6;
  auto p = MustCreate(o);
  Drained d = Drain(p.get());
  ASSERT_TRUE(d.status.ok()) << d.status;
  std::vector<int64_t> ids = EpochIds(d.batches, 0);
  std::sort(ids.begin(), ids.end());
  std::vector<int64_t> want;
  for (int i = 10; i < 20; ++i) want.push_back(i);
  for (int i = 30; i < 50; ++i) want.push_back(i);
  for (int i = 0; i < 5; ++i) want.push_back(2 * kIdsPerFile + i);
  EXPECT_EQ(ids, want);
  // Provenance speaks in units: unit 7 holds records 10..19 of file 0.
  std::map<uint32_t, std::set<uint64_t>> by_unit;
  std::map<uint32_t, uint64_t> ends;
  for (const Batch& b : d.batches) {
    for (const RecordRange& r : b.provenance.ranges) {
      for (uint64_t i = r.begin; i < r.end; ++i) EXPECT_TRUE(by_unit[r.unit_id].insert(i).second);
    }
    for (const UnitEnd& e : b.provenance.unit_ends) ends[e.unit_id] = e.end;
  }
  EXPECT_EQ(by_unit[7].size(), 10u);
  EXPECT_EQ(*by_unit[7].begin(), 10u);
  EXPECT_EQ(*by_unit[8].rbegin(), 49u);
  EXPECT_EQ(by_unit[9].size(), 5u);
  EXPECT_EQ(ends, (std::map<uint32_t, uint64_t>{{7, 20}, {8, 50}, {9, 5}}));
  EXPECT_EQ(p->units().size(), 3u);
}

TEST_F(PipelineTest, AUnitRangePastItsFileIsOutOfRange) {
  for (auto [begin, end] : {std::pair<uint64_t, uint64_t>{40, 60}, {60, 0}}) {
    PipelineOptions o;
    o.units = {{.id = 3, .path = files_[0], .begin = begin, .end = end}};
    o.batch_size = 4;
    auto p = MustCreate(o);
    Drained d = Drain(p.get());
    EXPECT_EQ(d.status.code(), absl::StatusCode::kOutOfRange) << d.status;
    EXPECT_THAT(d.status.message(), HasSubstr(files_[0]));
    EXPECT_THAT(d.status.message(), HasSubstr("has 50 records"));
    EXPECT_THAT(d.status.message(), HasSubstr("work unit 3"));
  }
}

// ---- Errors.

TEST_F(PipelineTest, CorruptDataIsAnErrorNamingFileAndOffsetAfterTheBatchesBeforeIt) {
  const std::string path = dir_.Join("corrupt.tfrecord");
  const std::vector<std::string> records = IdRecords(5, 20);
  WriteRecords(path, records);
  size_t offset = 0;  // of record 10's frame: 8 length + 4 CRC + data + 4 CRC each
  for (int i = 0; i < 10; ++i) offset += 16 + records[i].size();
  std::string bytes = brook::testing::ReadFileOrDie(path);
  bytes[offset + 12 + 3] ^= 0x40;  // a data byte of record 10
  brook::testing::WriteFileOrDie(path, bytes);

  PipelineOptions o;
  o.files = {path};
  o.batch_size = 4;
  o.parse_threads = 2;
  auto p = MustCreate(o);
  Drained d = Drain(p.get());
  EXPECT_EQ(d.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(d.status.message(), HasSubstr(path));
  EXPECT_THAT(d.status.message(), HasSubstr("offset " + std::to_string(offset)));
  EXPECT_EQ(d.batches.size(), 2u) << "complete batches before the corruption come first";
  // Sticky.
  EXPECT_EQ(p->Next().status().code(), absl::StatusCode::kDataLoss);

  o.skip_corrupt_records = true;
  p = MustCreate(o);
  d = Drain(p.get());
  ASSERT_TRUE(d.status.ok()) << d.status;
  std::vector<int64_t> ids = EpochIds(d.batches, 0);
  EXPECT_EQ(ids.size(), 19u);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 5 * kIdsPerFile + 10), 0);
  EXPECT_EQ(p->stats().corrupt_regions, 1u);
}

TEST_F(PipelineTest, ABadExampleIsAnErrorNamingFileAndRecordIndexOrIsSkippedAndCounted) {
  const std::string path = dir_.Join("bad.tfrecord");
  std::vector<std::string> records = IdRecords(6, 20);
  records[7] = "\x0a\x05garbage";  // framing fine, the Example is not
  records[13] = "";                // an empty Example: label missing
  WriteRecords(path, records);

  PipelineOptions o;
  o.files = {path};
  o.batch_size = 4;
  auto p = MustCreate(o);
  Drained d = Drain(p.get());
  EXPECT_FALSE(d.status.ok());
  EXPECT_THAT(d.status.message(), HasSubstr(path));
  EXPECT_THAT(d.status.message(), HasSubstr("record index 7"));
  EXPECT_EQ(d.batches.size(), 1u);

  o.skip_bad_examples = true;
  p = MustCreate(o);
  d = Drain(p.get());
  ASSERT_TRUE(d.status.ok()) << d.status;
  std::vector<size_t> sizes;
  uint64_t discarded = 0, covered = 0;
  for (const Batch& b : d.batches) {
    sizes.push_back(b.data.num_rows);
    discarded += b.provenance.discarded;
    covered += b.provenance.num_records();
    ExpectRowsConsistent(b);
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 4, 4, 4, 2})) << "batches stay full";
  EXPECT_EQ(discarded, 2u);
  EXPECT_EQ(covered, 20u);
  std::vector<int64_t> ids = EpochIds(d.batches, 0);
  EXPECT_EQ(ids.size(), 18u);
  EXPECT_EQ(p->stats().bad_examples, 2u);
  EXPECT_EQ(p->stats().parse_policy.rejected, 2u);
}

TEST(PipelineCreateTest, RejectsBadOptionsAndMissingSources) {
  brook::testing::TempDir dir;
  const FeatureSpec spec = IdSpec();
  PipelineOptions o;
  EXPECT_EQ(Pipeline::Create(spec, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.glob = dir.Join("*.tfrecord");
  absl::Status s = Pipeline::Create(spec, o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(o.glob));
  o.glob.clear();
  o.files = {dir.Join("missing.tfrecord")};
  s = Pipeline::Create(spec, o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("missing.tfrecord"));
  WriteIdFile(dir.Join("x.tfrecord"), 0, 1);
  o.files = {dir.Join("x.tfrecord")};
  o.batch_size = 0;
  EXPECT_EQ(Pipeline::Create(spec, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.batch_size = 1;
  o.parse_threads = 9;  // above max_parse_threads
  EXPECT_EQ(Pipeline::Create(spec, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.parse_threads = 1;
  o.units = {{.id = 1, .path = o.files[0]}};
  EXPECT_EQ(Pipeline::Create(spec, o).status().code(), absl::StatusCode::kInvalidArgument)
      << "two sources";
}

TEST(PipelineGlobTest, ExpandsAndSortsAGlobAndReadsCompressedFiles) {
  brook::testing::TempDir dir;
  WriteIdFile(dir.Join("b.tfrecord.gz"), 1, 3, storage::Compression::kGzip);
  WriteIdFile(dir.Join("a.tfrecord.gz"), 0, 2, storage::Compression::kGzip);
  WriteIdFile(dir.Join("c.tfrecord.gz"), 2, 1, storage::Compression::kGzip);
  brook::testing::WriteFileOrDie(dir.Join("other.txt"), "not matched");
  PipelineOptions o;
  o.glob = dir.Join("*.tfrecord.gz");
  o.cycle_length = 1;
  auto p = MustCreate(o);
  ASSERT_EQ(p->units().size(), 3u);
  EXPECT_THAT(p->units()[0].path, HasSubstr("a.tfrecord.gz"));
  Drained d = Drain(p.get());
  ASSERT_TRUE(d.status.ok()) << d.status;
  EXPECT_EQ(EpochIds(d.batches, 0), (std::vector<int64_t>{0, 1, 1000, 1001, 1002, 2000}));
}

// ---- The file TensorFlow wrote.

TEST(PipelineCriteoTest, TheCriteoSampleWrittenByTensorFlowStreamsThrough) {
  FeatureSpec spec;
  spec.label_name = "label";
  spec.on_missing = MissingPolicy::kError;
  for (int i = 1; i <= 13; ++i) {
    spec.features.push_back({.name = "I" + std::to_string(i), .type = FeatureType::kFloat});
  }
  for (int i = 1; i <= 26; ++i) {
    spec.features.push_back({.name = "C" + std::to_string(i),
                             .type = FeatureType::kInt64,
                             .kind = FeatureKind::kVarLen});
  }
  PipelineOptions o;
  o.files = {brook::testing::SharedDataDir() + "/tfrecord/criteo_sample.te.tfrecords"};
  o.batch_size = 16;
  o.parse_threads = 2;
  o.epochs = 2;
  auto p = MustCreate(o, spec);
  ASSERT_NE(p, nullptr);
  Drained d = Drain(p.get());
  ASSERT_TRUE(d.status.ok()) << d.status;
  std::vector<size_t> sizes;
  for (const Batch& b : d.batches) sizes.push_back(b.data.num_rows);
  EXPECT_EQ(sizes, (std::vector<size_t>{16, 16, 8, 16, 16, 8}));
  const ColumnarBatch& first = d.batches[0].data;
  EXPECT_EQ(first.labels[0], 0.0f);
  EXPECT_EQ(first.columns[13].ids[0], 7u);           // C1 of the first record
  EXPECT_EQ(first.columns[14].ids[0], 31u);          // C2
  EXPECT_EQ(first.columns[10].floats[0], 0.03125f);  // I11
  EXPECT_EQ(d.batches[2].provenance.ranges, (std::vector<RecordRange>{{0, 32, 40}}));
  EXPECT_EQ(d.batches[2].provenance.unit_ends, (std::vector<UnitEnd>{{0, 40}}));
  EXPECT_EQ(p->stats().examples_parsed, 80u);
  EXPECT_EQ(p->stats().parse_policy.rejected, 0u);
}

// ---- Stats.

TEST_F(PipelineTest, StatsCountItemsExactlyAndSplitTime) {
  PipelineOptions o = Options();
  o.batch_size = 32;  // 152 records: chunks 32,32,32,32,24
  o.parse_threads = 2;
  o.TEST_before_parse = [] { std::this_thread::sleep_for(std::chrono::milliseconds(10)); };
  auto p = MustCreate(o);
  Drained d = Drain(p.get());
  ASSERT_TRUE(d.status.ok()) << d.status;
  const PipelineStats s = p->stats();
  EXPECT_EQ(s.read.items, static_cast<uint64_t>(kTotal));
  EXPECT_EQ(s.parse.items, 5u);
  EXPECT_EQ(s.consumer.items, 5u);
  EXPECT_EQ(s.examples_parsed, static_cast<uint64_t>(kTotal));
  EXPECT_EQ(s.rows_returned, static_cast<uint64_t>(kTotal));
  EXPECT_EQ(s.files_opened, 4u);
  EXPECT_GT(s.bytes_read, static_cast<uint64_t>(kTotal) * 16);
  EXPECT_EQ(s.parse_threads, 2);
  EXPECT_EQ(s.parse.threads, 2);
  // Parsing takes >= 10 ms a batch (the hook): 5 batches >= 50 ms busy, and
  // the consumer, with two workers, waits about half of that at least.
  EXPECT_GE(s.parse.busy_seconds, 0.05);
  EXPECT_GT(s.consumer.wait_input_seconds, 0.02);
  EXPECT_GT(s.read.busy_seconds, 0.0);
  EXPECT_EQ(s.parse_policy.examples, static_cast<uint64_t>(kTotal));
}

TEST_F(PipelineTest, ASlowConsumerShowsAsBackPressure) {
  PipelineOptions o = Options();
  o.batch_size = 8;
  o.prefetch = 1;
  o.parse_threads = 1;
  o.read_queue_depth = 1;
  auto p = MustCreate(o);
  Drained d;
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    d.batches.push_back(*p->Next().value());
  }
  const PipelineStats s = p->stats();
  EXPECT_GT(s.parse.wait_output_seconds, 0.05);
  EXPECT_GT(s.read.wait_output_seconds, 0.05);
  EXPECT_LT(s.consumer.wait_input_seconds, s.parse.wait_output_seconds);
  // Bounded: read queue 1 + window 1 + a chunk in each of reader and worker.
  EXPECT_LE(s.read.items, 8u * (6 + 1 + 1 + 2 + 1));
}

// ---- Autotuning.

TEST_F(PipelineTest, AutotuneAddsParseWorkersWhileParsingIsTheBottleneck) {
  PipelineOptions o = Options();
  o.batch_size = 2;  // 76 batches
  o.cycle_length = 1;
  o.parse_threads = 0;
  o.max_parse_threads = 4;
  o.TEST_before_parse = [] { std::this_thread::sleep_for(std::chrono::milliseconds(3)); };
  auto p = MustCreate(o);
  EXPECT_EQ(p->stats().parse_threads, 1);
  Drained d = Drain(p.get());
  ASSERT_TRUE(d.status.ok()) << d.status;
  const PipelineStats s = p->stats();
  // One worker per decision while the consumer waits, up to the max and the
  // core count.
  const int cap = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 4);
  EXPECT_EQ(s.parse_threads, cap);
  EXPECT_EQ(s.autotune_steps, cap - 1);
  std::vector<int64_t> ids = EpochIds(d.batches, 0);
  EXPECT_EQ(ids, AllIdsInFileOrder()) << "more workers, same order";
}

TEST_F(PipelineTest, FixedParallelismIsNotTuned) {
  PipelineOptions o = Options();
  o.batch_size = 2;
  o.parse_threads = 2;
  o.TEST_before_parse = [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
  auto p = MustCreate(o);
  ASSERT_TRUE(Drain(p.get()).status.ok());
  EXPECT_EQ(p->stats().parse_threads, 2);
  EXPECT_EQ(p->stats().prefetch, 4);
  EXPECT_EQ(p->stats().autotune_steps, 0);
}

// ---- Shutdown.

TEST_F(PipelineTest, DestroyingWithFullQueuesAndNoConsumerReturnsPromptly) {
  PipelineOptions o = Options();
  o.epochs = 0;  // endless: every stage fills up and blocks
  o.batch_size = 4;
  o.parse_threads = 4;
  auto p = MustCreate(o);
  ASSERT_TRUE(p->Next().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const PipelineStats s = p->stats();
  EXPECT_GT(s.read.wait_output_seconds, 0.05) << "the reader is blocked on a full queue";
  EXPECT_GT(s.parse.wait_output_seconds, 0.05) << "and the workers on the full window";
  // Memory bound, in batches of 4 records: 1 returned + 1 held by Next, 4 in
  // the window, 4 in workers, 8 queued (max_parse_threads), 1 in the reader.
  EXPECT_LE(s.read.items, 4u * (2 + 4 + 4 + 8 + 1));
  const Clock::time_point start = Clock::now();
  p.reset();
  EXPECT_LT(SecondsSince(start), 2.0);
}

TEST_F(PipelineTest, CancelFromAnotherThreadWakesABlockedNext) {
  PipelineOptions o = Options();
  o.parse_threads = 1;
  std::atomic<bool> release{false};
  o.TEST_before_parse = [&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  auto p = MustCreate(o);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    p->Cancel();
  });
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::optional<Batch>> b = p->Next();
  EXPECT_EQ(b.status().code(), absl::StatusCode::kCancelled);
  EXPECT_LT(SecondsSince(start), 2.0);
  canceller.join();
  release.store(true);  // the worker finishes its batch and sees the cancel
  const Clock::time_point destroy = Clock::now();
  p.reset();
  EXPECT_LT(SecondsSince(destroy), 2.0);
}

TEST_F(PipelineTest, DestroyingBeforeAnyNextJoinsEveryThread) {
  for (int i = 0; i < 20; ++i) {
    PipelineOptions o = Options();
    o.cache = true;
    o.epochs = 3;
    o.shuffle_buffer = 8;
    auto p = MustCreate(o);
    if (i % 2 == 1) {
      ASSERT_TRUE(p->Next().ok());
    }
  }
}

}  // namespace
}  // namespace brook::input
