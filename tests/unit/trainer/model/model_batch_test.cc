#include "trainer/model/model_batch.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/trainer/model/model_test_util.h"

namespace brook::trainer {
namespace {

using ::testing::ElementsAre;
using testing::Features;
using ::testing::HasSubstr;
using testing::Spec;

// An all-default batch of `rows` rows for the test feature spec (varlen
// columns empty, fixed ones zero); tests then fill the columns they use.
input::ColumnarBatch EmptyBatch(const input::FeatureSpec& f, size_t rows) {
  input::ColumnarBatch b;
  b.num_rows = rows;
  b.columns.resize(f.features.size());
  for (size_t i = 0; i < f.features.size(); ++i) {
    const input::FeatureSpecEntry& e = f.features[i];
    input::Column& c = b.columns[i];
    if (e.kind == input::FeatureKind::kVarLen) {
      c.row_splits.assign(rows + 1, 0);
    } else if (e.type == input::FeatureType::kFloat) {
      c.floats.assign(rows * e.length, 0.0f);
    } else {
      c.int64s.assign(rows * e.length, 0);
    }
  }
  b.labels.assign(rows, 0.0f);
  return b;
}

void SetIds(const input::FeatureSpec& f, const std::string& name,
            const std::vector<std::vector<uint64_t>>& rows, input::ColumnarBatch* b) {
  input::Column& c = b->columns[f.IndexOf(name)];
  c.ids.clear();
  c.row_splits.assign(1, 0);
  for (const auto& r : rows) {
    c.ids.insert(c.ids.end(), r.begin(), r.end());
    c.row_splits.push_back(static_cast<uint32_t>(c.ids.size()));
  }
}

TEST(ModelBatchTest, DedupsKeysAcrossInputsSharingATableInFirstSeenOrder) {
  const input::FeatureSpec f = Features();
  const ModelSpec spec = Spec(R"(model: {type: wide_deep, embedding_dim: 4, hidden: [2]}
sparse:
  - {feature: C1, table: ids}
  - {feature: country}
  - {feature: C2, table: ids, combiner: mean}
)",
                              f);
  input::ColumnarBatch b = EmptyBatch(f, 3);
  SetIds(f, "C1", {{5, 7, 5}, {}, {7}}, &b);
  SetIds(f, "C2", {{7, 9}, {5}, {}}, &b);
  SetIds(f, "country", {{42}, {42}, {}}, &b);
  b.labels = {1, 0, 1};
  ModelBatch mb;
  ASSERT_TRUE(BuildModelBatch(spec, f, b, &mb).ok());
  EXPECT_EQ(mb.batch_size, 3);
  EXPECT_THAT(mb.labels, ElementsAre(1, 0, 1));
  ASSERT_EQ(mb.tables.size(), 4u);  // ids, country, ids_wide, country_wide
  EXPECT_EQ(mb.tables[0].table, "ids");
  EXPECT_EQ(mb.tables[0].dim, 4);
  EXPECT_THAT(mb.tables[0].unique_keys, ElementsAre(5, 7, 9));
  EXPECT_THAT(mb.tables[1].unique_keys, ElementsAre(42));
  EXPECT_EQ(mb.tables[2].table, "ids_wide");
  EXPECT_EQ(mb.tables[2].dim, 1);
  EXPECT_THAT(mb.tables[2].unique_keys, ElementsAre(5, 7, 9));  // the deep table's keys
  EXPECT_THAT(mb.tables[3].unique_keys, ElementsAre(42));
  ASSERT_EQ(mb.sparse.size(), 3u);
  // C1: a repeated id within an example keeps both occurrences.
  EXPECT_THAT(mb.sparse[0].offsets, ElementsAre(0, 3, 3, 4));
  EXPECT_THAT(mb.sparse[0].rows, ElementsAre(0, 1, 0, 1));
  EXPECT_EQ(mb.sparse[0].table, 0);
  EXPECT_EQ(mb.sparse[0].wide_table, 2);
  // country
  EXPECT_THAT(mb.sparse[1].offsets, ElementsAre(0, 1, 2, 2));
  EXPECT_THAT(mb.sparse[1].rows, ElementsAre(0, 0));
  // C2 shares "ids": its 7 and 5 map to the rows C1 created.
  EXPECT_THAT(mb.sparse[2].offsets, ElementsAre(0, 2, 3, 3));
  EXPECT_THAT(mb.sparse[2].rows, ElementsAre(1, 2, 0));
  EXPECT_EQ(mb.sparse[2].table, 0);
  EXPECT_EQ(mb.sparse[2].combiner, Combiner::kMean);
  EXPECT_EQ(mb.dense_width, 0);
  EXPECT_TRUE(mb.dense.empty());
}

TEST(ModelBatchTest, DenseTransformsBucketsAndFixedInt64Ids) {
  const input::FeatureSpec f = Features();
  const ModelSpec spec = Spec(R"(model: {type: lr}
sparse:
  - {feature: slots}
  - {feature: age}
dense:
  - {feature: I1, transform: log1p}
  - {feature: I2, transform: standardize, mean: 1.5, stddev: 2}
  - {feature: age}
  - {feature: I3, transform: bucketize, boundaries: [0, 1, 10, 100]}
)",
                              f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  input::ColumnarBatch b = EmptyBatch(f, 6);
  b.columns[f.IndexOf("I1")].floats = {0, 3, -3, 1e6, 0.5, nan};
  b.columns[f.IndexOf("I2")].floats = {1.5, 3.5, -0.5, 0, 1, 2, 0, 0, 0, 0, 0, 0};
  b.columns[f.IndexOf("age")].int64s = {30, -1, 30, 7, 0, 1};
  b.columns[f.IndexOf("I3")].floats = {-5, 0, 0.5, 10, 1000, nan};
  b.columns[f.IndexOf("slots")].int64s = {1, 2, 2, 1, -1, 3, 0, 0, 0, 0, 0, 0};
  ModelBatch mb;
  ASSERT_TRUE(BuildModelBatch(spec, f, b, &mb).ok());
  ASSERT_EQ(mb.dense_width, 4);  // I1, I2 x2, age
  auto row = [&](int r) {
    return std::vector<float>(mb.dense.begin() + r * 4, mb.dense.begin() + (r + 1) * 4);
  };
  EXPECT_THAT(row(0), ElementsAre(0, 0, 1, 30));
  using ::testing::FloatEq;
  const float l3 = static_cast<float>(std::log1p(3.0));
  EXPECT_THAT(row(1), ElementsAre(FloatEq(l3), -1, -0.75f, -1));
  EXPECT_THAT(row(2), ElementsAre(FloatEq(-l3), -0.25f, 0.25f, 30));  // sign(x) log(1 + |x|)
  EXPECT_FLOAT_EQ(row(3)[0], static_cast<float>(std::log1p(1e6)));
  EXPECT_TRUE(std::isnan(row(5)[0]));  // NaN passes through
  // Sparse inputs: slots (2 ids per example), age (1 id), then bucketized I3.
  ASSERT_EQ(mb.sparse.size(), 3u);
  EXPECT_THAT(mb.sparse[0].offsets, ElementsAre(0, 2, 4, 6, 8, 10, 12));
  EXPECT_THAT(mb.tables[0].unique_keys,
              ElementsAre(1, 2, static_cast<uint64_t>(-1), 3, 0));  // int64 -1 as uint64
  EXPECT_THAT(mb.tables[1].unique_keys, ElementsAre(30, static_cast<uint64_t>(-1), 7, 0, 1));
  EXPECT_EQ(mb.tables[2].table, "I3_bucket");
  // Buckets: -5 -> 0, 0 -> 1 (a boundary goes up), 0.5 -> 1, 10 -> 3, 1000 -> 4, NaN -> 0.
  std::vector<uint64_t> buckets;
  for (uint32_t r : mb.sparse[2].rows) buckets.push_back(mb.tables[2].unique_keys[r]);
  EXPECT_THAT(buckets, ElementsAre(0, 1, 1, 3, 4, 0));
}

TEST(ModelBatchTest, EmptyVarlenRowsAndAnEmptyBatch) {
  const input::FeatureSpec f = Features();
  const ModelSpec spec = Spec("model: {type: lr}\nsparse: [{feature: C1, combiner: mean}]\n", f);
  input::ColumnarBatch b = EmptyBatch(f, 4);
  ModelBatch mb;
  ASSERT_TRUE(BuildModelBatch(spec, f, b, &mb).ok());
  EXPECT_THAT(mb.sparse[0].offsets, ElementsAre(0, 0, 0, 0, 0));
  EXPECT_TRUE(mb.sparse[0].rows.empty());
  EXPECT_TRUE(mb.tables[0].unique_keys.empty());
  input::ColumnarBatch none = EmptyBatch(f, 0);
  ASSERT_TRUE(BuildModelBatch(spec, f, none, &mb).ok());
  EXPECT_EQ(mb.batch_size, 0);
  EXPECT_THAT(mb.sparse[0].offsets, ElementsAre(0));
}

TEST(ModelBatchTest, BuilderReuseLeavesNoStaleKeys) {
  const input::FeatureSpec f = Features();
  const ModelSpec spec = Spec("model: {type: lr}\nsparse: [{feature: C1}]\n", f);
  absl::StatusOr<ModelBatchBuilder> builder = ModelBatchBuilder::Create(spec, f);
  ASSERT_TRUE(builder.ok()) << builder.status();
  input::ColumnarBatch b = EmptyBatch(f, 2);
  SetIds(f, "C1", {{1, 2}, {3}}, &b);
  ModelBatch mb;
  ASSERT_TRUE(builder->Build(b, &mb).ok());
  EXPECT_THAT(mb.tables[0].unique_keys, ElementsAre(1, 2, 3));
  SetIds(f, "C1", {{3}, {9}}, &b);
  ASSERT_TRUE(builder->Build(b, &mb).ok());
  EXPECT_THAT(mb.tables[0].unique_keys, ElementsAre(3, 9));
  EXPECT_THAT(mb.sparse[0].rows, ElementsAre(0, 1));
}

TEST(ModelBatchTest, RejectsBatchesThatDoNotFitTheFeatureSpec) {
  const input::FeatureSpec f = Features();
  const ModelSpec spec =
      Spec("model: {type: lr}\nsparse: [{feature: C1}]\ndense: [{feature: I2}]\n", f);
  ModelBatch mb;
  mb.batch_size = 77;  // untouched on error
  input::ColumnarBatch b = EmptyBatch(f, 2);
  b.columns.pop_back();
  absl::Status s = BuildModelBatch(spec, f, b, &mb);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("columns"));
  b = EmptyBatch(f, 2);
  b.columns[f.IndexOf("C1")].row_splits = {0, 2, 1};
  b.columns[f.IndexOf("C1")].ids = {1};
  s = BuildModelBatch(spec, f, b, &mb);
  EXPECT_THAT(s.message(), HasSubstr("feature \"C1\" row splits decrease at row 1"));
  b = EmptyBatch(f, 2);
  b.columns[f.IndexOf("I2")].floats.pop_back();
  s = BuildModelBatch(spec, f, b, &mb);
  EXPECT_THAT(s.message(), HasSubstr("feature \"I2\" has 3 values for 2 rows of length 2"));
  b = EmptyBatch(f, 2);
  b.labels.pop_back();
  s = BuildModelBatch(spec, f, b, &mb);
  EXPECT_THAT(s.message(), HasSubstr("1 labels for 2 rows"));
  EXPECT_EQ(mb.batch_size, 77);
}

TEST(ModelBatchTest, StandardizeWithoutMomentsIsAFailedPrecondition) {
  const input::FeatureSpec f = Features();
  ModelSpec spec = Spec("model: {type: lr}\ndense: [{feature: I1, transform: standardize}]\n", f);
  input::ColumnarBatch b = EmptyBatch(f, 2);
  b.columns[f.IndexOf("I1")].floats = {1, 3};
  ModelBatch mb;
  absl::Status s = BuildModelBatch(spec, f, b, &mb);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("ComputeMoments"));
  std::vector<input::ColumnarBatch> batches = {b};
  ASSERT_TRUE(ComputeMoments(f, batches, &spec).ok());
  ASSERT_TRUE(BuildModelBatch(spec, f, b, &mb).ok());
  EXPECT_THAT(mb.dense, ElementsAre(-1, 1));  // mean 2, stddev 1
}

}  // namespace
}  // namespace brook::trainer
