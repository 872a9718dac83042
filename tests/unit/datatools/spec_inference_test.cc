#include "datatools/spec_inference.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "datatools/data_stats.h"
#include "datatools/example_builder.h"
#include "features/feature_spec.h"
#include "tests/testing/test_util.h"

namespace brook::datatools {
namespace {

using ::testing::HasSubstr;

DatasetStats InferenceStatsOf(const std::vector<std::string>& records) {
  StatsAccumulator acc;
  for (const std::string& r : records) EXPECT_TRUE(acc.AddSerializedExample(r).ok());
  DatasetStats s = acc.Finish();
  s.files = {"mem"};
  return s;
}

TEST(SpecInferenceTest, TensorFlowCriteoSampleGivesASpecTheParserReads) {
  auto stats =
      ComputeStats({testing::SharedDataDir() + "/tfrecord/criteo_sample.te.tfrecords"}, {});
  ASSERT_TRUE(stats.ok()) << stats.status();
  auto inferred = InferFeatureSpec(*stats, {});
  ASSERT_TRUE(inferred.ok()) << inferred.status();
  EXPECT_TRUE(inferred->label_guessed);
  EXPECT_THAT(inferred->label_reason, HasSubstr("named like a label"));

  const std::string yaml = InferredSpecYaml(*inferred, *stats);
  EXPECT_THAT(yaml, HasSubstr("CONFIRM THE LABEL"));
  auto spec = input::FeatureSpec::FromYaml(yaml);
  ASSERT_TRUE(spec.ok()) << spec.status() << "\n" << yaml;
  EXPECT_EQ(spec->label_name, "label");
  EXPECT_EQ(spec->label_type, input::FeatureType::kFloat);
  ASSERT_EQ(spec->features.size(), 39u);
  // Natural order: C1..C26, then I1..I13.
  EXPECT_EQ(spec->features[0].name, "C1");
  EXPECT_EQ(spec->features[1].name, "C2");
  EXPECT_EQ(spec->features[25].name, "C26");
  EXPECT_EQ(spec->features[26].name, "I1");
  EXPECT_EQ(spec->features[38].name, "I13");
  const auto& c1 = spec->features[0];
  EXPECT_EQ(c1.type, input::FeatureType::kInt64);
  EXPECT_EQ(c1.kind, input::FeatureKind::kVarLen);
  const auto& i1 = spec->features[26];
  EXPECT_EQ(i1.type, input::FeatureType::kFloat);
  EXPECT_EQ(i1.kind, input::FeatureKind::kFixed);
  EXPECT_EQ(i1.length, 1);
  EXPECT_EQ(spec->on_type_mismatch, input::MismatchPolicy::kError);
}

TEST(SpecInferenceTest, ZeroOneFeatureIsTheLabelWhenNoneIsNamedLikeOne) {
  ::brook::datatools::ExampleBuilder b;  // qualified: a unity batch has a test-local one
  std::vector<std::string> records;
  for (int i = 0; i < 20; ++i) {
    b.Clear();
    const int64_t converted = i % 3 == 0 ? 1 : 0;
    const float price = 1.5f * static_cast<float>(i);
    const float emb[3] = {0.1f, 0.2f, static_cast<float>(i)};
    std::string_view tags[2] = {"a", "b"};
    b.AddInt64s("bought", std::span<const int64_t>(&converted, 1));
    b.AddFloats("price", std::span<const float>(&price, 1));
    b.AddFloats("vec", std::span<const float>(emb, 3));
    b.AddBytes("tags", std::span<const std::string_view>(tags, static_cast<size_t>(1 + i % 2)));
    // Floats in lists of varying length cannot be read; left out.
    b.AddFloats("ragged", std::span<const float>(emb, static_cast<size_t>(1 + i % 3)));
    records.emplace_back(b.Serialize());
  }
  const DatasetStats stats = InferenceStatsOf(records);
  auto inferred = InferFeatureSpec(stats, {});
  ASSERT_TRUE(inferred.ok()) << inferred.status();
  EXPECT_EQ(inferred->spec.label_name, "bought");
  EXPECT_EQ(inferred->spec.label_type, input::FeatureType::kInt64);
  EXPECT_THAT(inferred->label_reason, HasSubstr("only 0 and 1"));
  auto spec = input::FeatureSpec::FromYaml(InferredSpecYaml(*inferred, stats));
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->features.size(), 3u);
  EXPECT_EQ(spec->IndexOf("ragged"), -1);
  EXPECT_EQ(spec->features[spec->IndexOf("vec")].length, 3);
  EXPECT_EQ(spec->features[spec->IndexOf("tags")].kind, input::FeatureKind::kVarLen);
  ASSERT_FALSE(inferred->notes.empty());
  EXPECT_THAT(inferred->notes[0], HasSubstr("left out ragged"));

  // --label picks another one-value number.
  auto chosen = InferFeatureSpec(stats, {.label = "price"});
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_FALSE(chosen->label_guessed);
  EXPECT_EQ(chosen->spec.label_name, "price");
  EXPECT_GE(chosen->spec.IndexOf("bought"), 0);
  EXPECT_THAT(InferredSpecYaml(*chosen, stats), ::testing::Not(HasSubstr("CONFIRM")));
}

TEST(SpecInferenceTest, BadLabelsAreErrorsThatSayWhatToDo) {
  ::brook::datatools::ExampleBuilder b;  // qualified: a unity batch has a test-local one
  std::vector<std::string> records;
  for (int i = 0; i < 5; ++i) {
    b.Clear();
    const float v[2] = {1.0f * i, 2.0f};
    b.AddFloats("score", std::span<const float>(v, 1));
    b.AddFloats("pair", std::span<const float>(v, 2));
    records.emplace_back(b.Serialize());
  }
  const DatasetStats stats = InferenceStatsOf(records);
  auto none = InferFeatureSpec(stats, {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("cannot guess the label"));
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("--label NAME"));

  auto two = InferFeatureSpec(stats, {.label = "pair"});
  ASSERT_FALSE(two.ok());
  EXPECT_THAT(std::string(two.status().message()), HasSubstr("--label pair"));
  EXPECT_THAT(std::string(two.status().message()), HasSubstr("2-2 per example"));

  auto absent = InferFeatureSpec(stats, {.label = "nope"});
  ASSERT_FALSE(absent.ok());
  EXPECT_THAT(std::string(absent.status().message()),
              HasSubstr("--label nope: no such feature in the data; it has 2 features: pair, "
                        "score"));

  EXPECT_FALSE(InferFeatureSpec(InferenceStatsOf({}), {}).ok());
}

TEST(SpecInferenceTest, AnAbsentLabelListsTheFeaturesInNaturalOrder) {
  ::brook::datatools::ExampleBuilder b;  // qualified: a unity batch has a test-local one
  b.AddFloats("x10", std::vector<float>{1});
  b.AddFloats("x2", std::vector<float>{1});
  b.AddFloats("click", std::vector<float>{1});
  b.AddFloats("x1", std::vector<float>{1});
  const DatasetStats stats = InferenceStatsOf({std::string(b.Serialize())});
  auto absent = InferFeatureSpec(stats, {.label = "nosuch"});
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(absent.status().message(),
            "--label nosuch: no such feature in the data; it has 4 features: click, x1, x2, x10");
}

}  // namespace
}  // namespace brook::datatools
