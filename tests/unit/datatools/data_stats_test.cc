#include "datatools/data_stats.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/hash.h"
#include "datatools/data_schema.h"
#include "datatools/hyperloglog.h"
#include "datatools/space_saving.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/test_util.h"

namespace brook::datatools {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// --- HyperLogLog ----------------------------------------------------------

TEST(HyperLogLogTest, ExactWhileSmall) {
  HyperLogLog h;
  for (int rep = 0; rep < 3; ++rep) {
    for (int i = 0; i < 500; ++i) h.AddHash(Hash64(std::to_string(i)));
  }
  EXPECT_EQ(h.Estimate(), 500.0);
}

TEST(HyperLogLogTest, WithinThreePercentAtHundredThousandDistinct) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    HyperLogLog h;
    for (int rep = 0; rep < 2; ++rep) {  // duplicates must not count
      for (int i = 0; i < 100000; ++i) h.AddHash(Hash64(std::to_string(i), seed));
    }
    EXPECT_NEAR(h.Estimate(), 100000.0, 3000.0) << "seed " << seed;
  }
}

TEST(HyperLogLogTest, AccurateAcrossTheSmallToLargeTransition) {
  for (int n : {2000, 20000, 50000, 300000}) {
    HyperLogLog h;
    for (int i = 0; i < n; ++i) h.AddHash(Mix64(7, static_cast<uint64_t>(i)));
    EXPECT_NEAR(h.Estimate(), n, 0.03 * n) << n;
  }
}

TEST(HyperLogLogTest, MergeEqualsUnion) {
  HyperLogLog a, b, all;
  for (int i = 0; i < 60000; ++i) {
    const uint64_t h = Mix64(3, static_cast<uint64_t>(i));
    (i % 2 ? a : b).AddHash(h);
    if (i < 40000) a.AddHash(h);
    all.AddHash(h);
  }
  a.Merge(b);
  EXPECT_DOUBLE_EQ(a.Estimate(), all.Estimate());
}

// --- Space-Saving -----------------------------------------------------------

TEST(SpaceSavingTest, ExactWithFewDistinctValues) {
  SpaceSaving s(10);
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j <= i; ++j) s.Add(std::string(1, static_cast<char>('a' + i)));
  }
  auto top = s.Top(3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].value, "e");
  EXPECT_EQ(top[0].count, 5u);
  EXPECT_EQ(top[0].error, 0u);
  EXPECT_EQ(top[2].value, "c");
  EXPECT_EQ(s.total(), 15u);
}

TEST(SpaceSavingTest, FindsTheHeavyHittersOfSkewedData) {
  // Zipf(1.1) over 50,000 values: the head is far above N / capacity.
  std::mt19937_64 rng(42);
  const int kValues = 50000;
  std::vector<double> cdf(kValues);
  double sum = 0;
  for (int i = 0; i < kValues; ++i) cdf[i] = (sum += 1.0 / std::pow(i + 1, 1.1));
  std::uniform_real_distribution<double> u(0, sum);
  std::vector<uint64_t> truth(kValues, 0);
  SpaceSaving s(200);
  for (int n = 0; n < 300000; ++n) {
    const int v = static_cast<int>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin());
    ++truth[v];
    s.Add(std::to_string(v));
  }
  auto top = s.Top(10);
  ASSERT_EQ(top.size(), 10u);
  for (int rank = 0; rank < 10; ++rank) {
    EXPECT_EQ(top[rank].value, std::to_string(rank)) << "rank " << rank;
    const uint64_t t = truth[rank];
    EXPECT_GE(top[rank].count, t);                    // an upper bound
    EXPECT_LE(top[rank].count - top[rank].error, t);  // count - error a lower bound
  }
}

// --- statistics -------------------------------------------------------------

struct ExampleBuilder {
  ExampleBuilder& Float(const std::string& name, std::vector<float> v) {
    auto* f = (*ex.mutable_features()->mutable_feature())[name].mutable_float_list();
    for (float x : v) f->add_value(x);
    return *this;
  }
  ExampleBuilder& Int(const std::string& name, std::vector<int64_t> v) {
    auto* f = (*ex.mutable_features()->mutable_feature())[name].mutable_int64_list();
    for (int64_t x : v) f->add_value(x);
    return *this;
  }
  ExampleBuilder& Bytes(const std::string& name, std::vector<std::string> v) {
    auto* f = (*ex.mutable_features()->mutable_feature())[name].mutable_bytes_list();
    for (auto& x : v) f->add_value(x);
    return *this;
  }
  std::string Serialize() const { return ex.SerializeAsString(); }
  tf::Example ex;
};

// age: float, always present; city: bytes, missing in 1 of 4; ids: int64 list.
std::vector<std::string> SmallDataset() {
  return {
      ExampleBuilder().Float("age", {30}).Bytes("city", {"Paris"}).Int("ids", {1, 2}).Serialize(),
      ExampleBuilder().Float("age", {40}).Bytes("city", {"Oslo"}).Int("ids", {2}).Serialize(),
      ExampleBuilder()
          .Float("age", {50})
          .Bytes("city", {"Paris"})
          .Int("ids", {2, 3, 4})
          .Serialize(),
      ExampleBuilder().Float("age", {0.1f}).Int("ids", {-5}).Serialize(),
  };
}

DatasetStats StatsOf(const std::vector<std::string>& records) {
  StatsAccumulator acc;
  for (const auto& r : records) EXPECT_TRUE(acc.AddSerializedExample(r).ok());
  return acc.Finish();
}

TEST(StatsAccumulatorTest, CountsPresenceValuesRangesAndTopValues) {
  DatasetStats s = StatsOf(SmallDataset());
  EXPECT_EQ(s.examples, 4);
  ASSERT_EQ(s.features.size(), 3u);
  EXPECT_EQ(s.features[0].name, "age");  // sorted by name

  const FeatureStats* age = s.Find("age");
  ASSERT_NE(age, nullptr);
  EXPECT_EQ(age->main_kind(), ValueKind::kFloat);
  EXPECT_EQ(age->present, 4);
  EXPECT_EQ(age->missing, 0);
  EXPECT_DOUBLE_EQ(*age->float_min, static_cast<double>(0.1f));
  EXPECT_DOUBLE_EQ(*age->float_max, 50);
  EXPECT_NEAR(age->mean, (30 + 40 + 50 + 0.1) / 4, 1e-6);
  EXPECT_EQ(age->distinct, 4);
  EXPECT_TRUE(age->top.empty());  // no top values for floats

  const FeatureStats* city = s.Find("city");
  ASSERT_NE(city, nullptr);
  EXPECT_EQ(city->main_kind(), ValueKind::kBytes);
  EXPECT_EQ(city->present, 3);
  EXPECT_EQ(city->missing, 1);
  EXPECT_EQ(city->distinct, 2);
  ASSERT_EQ(city->top.size(), 2u);
  EXPECT_EQ(city->top[0].value, "Paris");
  EXPECT_EQ(city->top[0].count, 2u);

  const FeatureStats* ids = s.Find("ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->main_kind(), ValueKind::kInt64);
  EXPECT_EQ(ids->min_values, 1);
  EXPECT_EQ(ids->max_values, 3);
  EXPECT_EQ(ids->total_values, 7);
  EXPECT_EQ(*ids->int_min, -5);
  EXPECT_EQ(*ids->int_max, 4);
  EXPECT_EQ(ids->distinct, 5);
  EXPECT_EQ(ids->top[0].value, "2");
  EXPECT_EQ(ids->top[0].count, 3u);

  EXPECT_FALSE(StatsAccumulator().AddSerializedExample("\xff\xff garbage").ok());
}

TEST(StatsTest, ComputesFromFilesAndFormats) {
  testing::TempDir dir;
  const std::string path = dir.Join("small.tfrecord.gz");
  {
    auto w = storage::TFRecordWriter::Open(path, {.compression = storage::Compression::kGzip});
    ASSERT_TRUE(w.ok()) << w.status();
    for (const auto& r : SmallDataset()) ASSERT_TRUE((*w)->Write(r).ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto s = ComputeStats({path}, {});  // compression from the suffix
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->examples, 4);
  EXPECT_THAT(s->files, ElementsAre(path));
  const std::string table = FormatStatsTable(*s);
  EXPECT_THAT(table, HasSubstr("4 examples, 3 features"));
  EXPECT_THAT(table, HasSubstr("Paris (2)"));
  EXPECT_THAT(table, HasSubstr("75.00%"));
  const nlohmann::json j = StatsToJson(*s);
  EXPECT_EQ(j["examples"], 4);
  EXPECT_EQ(j["features"][1]["name"], "city");
  EXPECT_EQ(j["features"][1]["missing"], 1);
  EXPECT_EQ(j["features"][2]["numeric"]["int64_min"], -5);

  auto limited = ComputeStats({path}, {.max_examples = 2});
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->examples, 2);
  EXPECT_EQ(ComputeStats({dir.Join("absent.tfrecord")}, {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(StatsTest, PrintableValueEscapesBinary) {
  EXPECT_TRUE(IsPrintableText("Zürich"));
  EXPECT_FALSE(IsPrintableText("a\x01"));
  EXPECT_FALSE(IsPrintableText("\xc3"));
  EXPECT_FALSE(IsPrintableText("\xed\xa0\x80"));  // a UTF-16 surrogate
  EXPECT_EQ(PrintableValue("a\x01"), "a\\x01");
  EXPECT_EQ(PrintableValue("abcdef", 3), "abc...");
}

// --- schema inference and checks -------------------------------------------

bool HasAnomaly(const std::vector<Anomaly>& v, AnomalyKind kind, const std::string& feature) {
  for (const Anomaly& a : v) {
    if (a.kind == kind && a.feature == feature) return true;
  }
  return false;
}

std::string Describe(const std::vector<Anomaly>& v) {
  std::string out;
  for (const Anomaly& a : v) {
    out += std::string(AnomalyKindName(a.kind)) + " " + a.feature + ": " + a.message + "\n";
  }
  return out;
}

DataSchema RoundTrippedSchema(const DatasetStats& s) {
  const std::string yaml = InferSchema(s).ToYaml();
  auto parsed = DataSchema::FromYaml(yaml);
  EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << yaml;
  return parsed.ok() ? *parsed : DataSchema{};
}

TEST(DataSchemaTest, InferredSchemaRoundTripsAndPassesItsOwnData) {
  const DatasetStats s = StatsOf(SmallDataset());
  const DataSchema schema = RoundTrippedSchema(s);
  EXPECT_EQ(schema.examples, 4);
  const FeatureSchema* age = schema.Find("age");
  ASSERT_NE(age, nullptr);
  EXPECT_EQ(age->type, ValueKind::kFloat);
  EXPECT_EQ(*age->min_presence, 1.0);
  EXPECT_EQ(static_cast<float>(*age->float_min), 0.1f);  // shortest float text reads back
  const FeatureSchema* city = schema.Find("city");
  ASSERT_NE(city, nullptr);
  EXPECT_EQ(*city->min_presence, 0.75);
  EXPECT_THAT(city->top_values, ElementsAre("Paris", "Oslo"));
  const FeatureSchema* ids = schema.Find("ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(*ids->int_min, -5);
  EXPECT_EQ(*ids->max_values, 3);

  const auto anomalies = CheckStats(s, schema, {});
  EXPECT_TRUE(anomalies.empty()) << Describe(anomalies);
}

TEST(DataSchemaTest, TopValuesWithYamlSpecialCharactersRoundTrip) {
  const DatasetStats s = StatsOf({ExampleBuilder().Bytes("c", {"?"}).Serialize(),
                                  ExampleBuilder().Bytes("c", {"<=50K"}).Serialize(),
                                  ExampleBuilder().Bytes("c", {"a: \"b\", [c]"}).Serialize()});
  const DataSchema schema = RoundTrippedSchema(s);
  ASSERT_NE(schema.Find("c"), nullptr);
  EXPECT_THAT(schema.Find("c")->top_values,
              ::testing::UnorderedElementsAre("?", "<=50K", "a: \"b\", [c]"));
}

TEST(DataSchemaTest, CheckDetectsEachAnomalyKind) {
  const DataSchema schema = RoundTrippedSchema(StatsOf(SmallDataset()));
  // A doctored dataset: age out of range and sometimes a list of two, city
  // gone, ids as floats, a new feature.
  const DatasetStats bad = StatsOf({
      ExampleBuilder().Float("age", {300}).Float("ids", {1}).Int("extra", {1}).Serialize(),
      ExampleBuilder().Float("age", {-1, 5}).Int("ids", {1}).Serialize(),
  });
  const auto a = CheckStats(bad, schema, {});
  EXPECT_TRUE(HasErrors(a));
  EXPECT_TRUE(HasAnomaly(a, AnomalyKind::kOutOfRange, "age")) << Describe(a);
  EXPECT_TRUE(HasAnomaly(a, AnomalyKind::kValueCount, "age")) << Describe(a);
  EXPECT_TRUE(HasAnomaly(a, AnomalyKind::kMissingFeature, "city")) << Describe(a);
  EXPECT_TRUE(HasAnomaly(a, AnomalyKind::kTypeChange, "ids")) << Describe(a);
  EXPECT_TRUE(HasAnomaly(a, AnomalyKind::kNewFeature, "extra")) << Describe(a);
  for (const Anomaly& x : a) {
    EXPECT_EQ(x.warning, x.kind == AnomalyKind::kNewFeature) << Describe({x});
  }
  const nlohmann::json j = AnomaliesToJson(a);
  EXPECT_EQ(j.size(), a.size());

  CheckOptions strict;
  strict.new_features_are_errors = true;
  for (const Anomaly& x : CheckStats(bad, schema, strict)) EXPECT_FALSE(x.warning);

  EXPECT_TRUE(HasAnomaly(CheckStats(DatasetStats{}, schema, {}), AnomalyKind::kNoExamples, ""));
}

TEST(DataSchemaTest, PresenceMarginAndRangeSlack) {
  auto schema = DataSchema::FromYaml(R"(
features:
  - {name: x, type: float, presence: 0.9, range: [0, 10]}
  - {name: n, type: int64, range: [0, 100]}
)");
  ASSERT_TRUE(schema.ok()) << schema.status();
  std::vector<std::string> rows;
  for (int i = 0; i < 100; ++i) {
    ExampleBuilder b;
    b.Int("n", {i == 0 ? 105 : 50});
    if (i < 87) b.Float("x", {i == 0 ? 10.5f : 5.0f});  // presence 0.87
    rows.push_back(b.Serialize());
  }
  const DatasetStats s = StatsOf(rows);
  auto strict = CheckStats(s, *schema, {});
  EXPECT_TRUE(HasAnomaly(strict, AnomalyKind::kLowPresence, "x")) << Describe(strict);
  EXPECT_TRUE(HasAnomaly(strict, AnomalyKind::kOutOfRange, "x")) << Describe(strict);
  EXPECT_TRUE(HasAnomaly(strict, AnomalyKind::kOutOfRange, "n")) << Describe(strict);

  CheckOptions loose;
  loose.presence_margin = 0.05;
  loose.range_slack = 0.1;
  auto relaxed = CheckStats(s, *schema, loose);
  EXPECT_TRUE(relaxed.empty()) << Describe(relaxed);
}

TEST(DataSchemaTest, ParseErrorsNameTheFeature) {
  auto bad_type = DataSchema::FromYaml("features:\n  - {name: age, type: double}\n");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_THAT(std::string(bad_type.status().message()), HasSubstr("\"age\""));
  auto bad_key = DataSchema::FromYaml("features:\n  - {name: age, type: float, rnage: [1, 2]}\n");
  ASSERT_FALSE(bad_key.ok());
  EXPECT_THAT(std::string(bad_key.status().message()), HasSubstr("rnage"));
  auto bad_range = DataSchema::FromYaml("features:\n  - {name: age, type: float, range: [5, 1]}\n");
  ASSERT_FALSE(bad_range.ok());
  EXPECT_THAT(std::string(bad_range.status().message()), HasSubstr("\"age\""));
  auto bad_number =
      DataSchema::FromYaml("features:\n  - {name: age, type: int64, range: [a, 1]}\n");
  EXPECT_EQ(bad_number.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace brook::datatools
