#include "trainer/model/model_spec.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/trainer/model/model_test_util.h"

namespace brook::trainer {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using testing::Features;
using ::testing::HasSubstr;

// The issue's example, except I3's dim: deepfm pairs every embedding with
// every other, so all dims must match (the example's `dim: 8` is an error,
// tested in ErrorsNameTheFieldAndLine).
constexpr char kDocumented[] = R"(model:
  type: deepfm            # lr | wide_deep | deepfm | dlrm
  embedding_dim: 16       # default dim of sparse inputs
  hidden: [256, 128]
  activation: relu        # relu | sigmoid | tanh
  dropout: 0.0
  loss: logloss           # logloss | mse (rating regression)
sparse:
  - {feature: C1, table: C1, dim: 16, combiner: sum}
dense:
  - {feature: I1, transform: log1p}
  - {feature: I2, transform: standardize, mean: 1.5, stddev: 3.0}
  - {feature: I3, transform: bucketize, boundaries: [0, 1, 10, 100], dim: 16}
)";

absl::Status Error(const std::string& yaml) {
  absl::StatusOr<ModelSpec> s = ModelSpec::FromYaml(yaml, Features());
  EXPECT_FALSE(s.ok()) << yaml;
  if (s.ok()) return absl::OkStatus();
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  return s.status();
}

TEST(ModelSpecTest, ParsesTheDocumentedExample) {
  absl::StatusOr<ModelSpec> s = ModelSpec::FromYaml(kDocumented, Features());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->type, ModelType::kDeepFm);
  EXPECT_EQ(s->embedding_dim, 16);
  EXPECT_THAT(s->hidden, ElementsAre(256, 128));
  EXPECT_EQ(s->activation, Activation::kRelu);
  EXPECT_EQ(s->loss, LossKind::kLogLoss);
  ASSERT_EQ(s->sparse.size(), 1u);
  EXPECT_EQ(s->sparse[0].table, "C1");
  EXPECT_EQ(s->sparse[0].line, 9);
  ASSERT_EQ(s->dense.size(), 3u);
  EXPECT_EQ(s->dense[1].transform, DenseTransform::kStandardize);
  EXPECT_TRUE(s->dense[1].has_moments);
  EXPECT_EQ(s->dense[1].mean, 1.5);
  EXPECT_EQ(s->dense[1].stddev, 3.0);
  EXPECT_EQ(s->dense[1].length, 2);  // copied from the feature spec
  EXPECT_THAT(s->dense[2].boundaries, ElementsAre(0, 1, 10, 100));
  const ModelLayout layout = s->Layout();
  EXPECT_EQ(layout.dense_width, 3);  // I1 + I2 (length 2); I3 is bucketized
  ASSERT_EQ(layout.tables.size(), 4u);
  EXPECT_EQ(layout.tables[0].name, "C1");
  EXPECT_EQ(layout.tables[1].name, "I3_bucket");
  EXPECT_EQ(layout.tables[2].name, "C1_wide");
  EXPECT_EQ(layout.tables[2].dim, 1);
  EXPECT_EQ(layout.tables[2].shares_keys_with, 0);
  EXPECT_EQ(layout.tables[3].shares_keys_with, 1);
  ASSERT_EQ(layout.inputs.size(), 2u);
  EXPECT_TRUE(layout.inputs[1].bucketized);
  EXPECT_EQ(layout.inputs[1].wide_table, 3);
}

TEST(ModelSpecTest, DefaultsAndLrTables) {
  absl::StatusOr<ModelSpec> s = ModelSpec::FromYaml(R"(model: {type: lr}
sparse:
  - {feature: C1, table: ids}
  - {feature: C2, table: ids, combiner: mean}
  - {feature: slots}
)",
                                                    Features());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->embedding_dim, 16);
  EXPECT_EQ(s->dropout, 0.0f);
  EXPECT_EQ(s->seed, 0u);
  const ModelLayout layout = s->Layout();
  ASSERT_EQ(layout.tables.size(), 2u);  // ids (shared), slots; no wide twins for lr
  EXPECT_EQ(layout.tables[0].name, "ids");
  EXPECT_EQ(layout.tables[0].dim, 1);
  EXPECT_EQ(layout.inputs[1].table, 0);
  EXPECT_EQ(layout.inputs[1].combiner, Combiner::kMean);
  EXPECT_EQ(layout.inputs[0].wide_table, -1);
}

TEST(ModelSpecTest, DlrmSectionsAndSeed) {
  absl::StatusOr<ModelSpec> s = ModelSpec::FromYaml(R"(model:
  type: dlrm
  embedding_dim: 8
  bottom: [32, 16]
  top: [64]
  seed: 18446744073709551615
sparse: [{feature: C1}, {feature: C2}]
dense: [{feature: I1}]
)",
                                                    Features());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->bottom, ElementsAre(32, 16));
  EXPECT_THAT(s->top, ElementsAre(64));
  EXPECT_EQ(s->seed, 18446744073709551615ull);
}

TEST(ModelSpecTest, OtherSectionsOfAJobSpecAreAllowedWhenNamed) {
  const std::string yaml = "features: whatever\nmodel: {type: lr}\nsparse: [{feature: C1}]\n";
  EXPECT_THAT(Error(yaml).message(),
              AllOf(HasSubstr("line 1"), HasSubstr("unknown key \"features\"")));
  const std::string_view others[] = {"features"};
  EXPECT_TRUE(ModelSpec::FromYaml(yaml, Features(), others).ok());
}

struct ErrorCase {
  std::string yaml;
  std::vector<std::string> expect;  // substrings of the message
};

TEST(ModelSpecTest, ErrorsNameTheFieldAndLine) {
  const std::vector<ErrorCase> cases = {
      {"model:\n  type: lr\n  hiden: [1]\nsparse: [{feature: C1}]\n",
       {"model.hiden (line 3)", "unknown key; allowed here: type"}},
      {"model:\n  type: fm\nsparse: [{feature: C1}]\n",
       {"model.type (line 2)", "unknown model type \"fm\""}},
      {"model:\n  type: dlrm\n  hidden: [4]\nsparse: [{feature: C1}, {feature: C2}]\n",
       {"model.hidden (line 3)", "does not apply to type dlrm"}},
      {"model:\n  type: deepfm\n  top: [4]\nsparse: [{feature: C1}]\n",
       {"model.top (line 3)", "does not apply to type deepfm"}},
      {"model:\n  type: lr\n  dropout: 0.5\nsparse: [{feature: C1}]\n",
       {"model.dropout (line 3)", "lr has no hidden layers"}},
      {"model:\n  type: deepfm\n  dropout: 1.0\nsparse: [{feature: C1}]\n",
       {"model.dropout (line 3)", "[0, 1)"}},
      {"model:\n  type: deepfm\n  hidden: [64, 0]\nsparse: [{feature: C1}]\n",
       {"model.hidden (line 3)", "hidden[1]"}},
      {"model:\n  type: deepfm\n  embedding_dim: -4\nsparse: [{feature: C1}]\n",
       {"model.embedding_dim (line 3)"}},
      {"model:\n  type: deepfm\n  activation: gelu\nsparse: [{feature: C1}]\n",
       {"model.activation (line 3)", "relu, sigmoid, tanh"}},
      {"model:\n  type: deepfm\n  seed: -1\nsparse: [{feature: C1}]\n", {"model.seed (line 3)"}},
      {"model: {embedding_dim: 4}\nsparse: [{feature: C1}]\n",
       {"model.type (line 1)", "missing; one of lr"}},
      {"sparse: [{feature: C1}]\n", {"missing \"model\""}},
      {"model: {type: lr}\nsparse:\n  - {feature: C1, dimm: 4}\n",
       {"sparse input \"C1\" (line 3)", "unknown key \"dimm\""}},
      {"model: {type: lr}\nsparse:\n  - {feature: C1}\n  - {table: x}\n",
       {"sparse input #2 (line 4)", "missing \"feature\""}},
      {"model: {type: lr}\nsparse:\n  - {feature: nope}\n",
       {"sparse input \"nope\" (line 3)", "not in the feature spec"}},
      {"model: {type: lr}\nsparse:\n  - {feature: I1}\n",
       {"sparse input \"I1\" (line 3)", "fixed float"}},
      {"model: {type: lr}\nsparse:\n  - {feature: C1, dim: 4}\n",
       {"sparse input \"C1\" (line 3)", "dim does not apply to type lr"}},
      {"model: {type: deepfm}\nsparse:\n  - {feature: C1, combiner: max}\n",
       {"sparse input \"C1\" (line 3)", "unknown combiner \"max\""}},
      {"model: {type: lr}\nsparse:\n  - {feature: C1}\n  - {feature: C1}\n",
       {"sparse input \"C1\" (line 4)", "listed twice", "line 3"}},
      {"model: {type: deepfm}\nsparse:\n  - {feature: C1, table: t, dim: 8}\n"
       "  - {feature: C2, table: t, dim: 4}\n",
       {"sparse input \"C2\" (line 4)", "table \"t\" has dim 4", "dim 8", "(line 3)"}},
      {"model: {type: deepfm}\nsparse:\n  - {feature: C1, dim: 8}\n  - {feature: C2, dim: 4}\n",
       {"sparse input \"C2\" (line 4)", "dim 4 differs from dim 8", "(line 3)"}},
      {"model: {type: wide_deep}\nsparse:\n  - {feature: C1}\n  - {feature: C2, table: C1_wide}\n",
       {"(line 4)", "table \"C1_wide\" collides with the wide table"}},
      {"model: {type: wide_deep}\nsparse:\n  - {feature: C1, table: I3_bucket}\n"
       "dense:\n  - {feature: I3, transform: bucketize, boundaries: [1]}\n",
       {"dense input \"I3\" (line 5)", "collides"}},
      {"model: {type: lr}\ndense:\n  - {feature: C1}\n", {"dense input \"C1\" (line 3)", "varlen"}},
      {"model: {type: lr}\ndense:\n  - {feature: I2, transform: bucketize, boundaries: [1]}\n",
       {"dense input \"I2\" (line 3)", "length-1 feature", "length 2"}},
      {"model: {type: lr}\ndense:\n  - {feature: I1, transform: bucketize, boundaries: [1, 1]}\n",
       {"dense input \"I1\" (line 3)", "strictly increasing"}},
      {"model: {type: lr}\ndense:\n  - {feature: I1, transform: bucketize}\n",
       {"dense input \"I1\" (line 3)", "needs \"boundaries\""}},
      {"model: {type: lr}\ndense:\n  - {feature: I1, transform: standardize,\n     mean: 1}\n",
       {"dense input \"I1\" (line 4)", "mean and stddev together"}},
      {"model: {type: lr}\ndense:\n  - {feature: I1, transform: log1p, mean: 1}\n",
       {"dense input \"I1\" (line 3)", "\"mean\" applies only to transform: standardize"}},
      {"model: {type: lr}\ndense:\n  - {feature: I1, transform: standardize, mean: 1,"
       " stddev: 0}\n",
       {"dense input \"I1\" (line 3)", "stddev must be a finite number > 0"}},
      {"model: {type: lr}\ndense:\n  - {feature: I1, transform: sqrt}\n",
       {"dense input \"I1\" (line 3)", "unknown transform \"sqrt\""}},
      {"model: {type: lr}\ndense:\n  - {feature: I1}\n  - {feature: I1}\n",
       {"dense input \"I1\" (line 4)", "listed twice"}},
      {"model: {type: dlrm}\nsparse:\n  - {feature: C1}\n", {"nothing to interact"}},
      {"model: {type: deepfm, embedding_dim: 16}\nsparse:\n  - {feature: C1}\ndense:\n"
       "  - {feature: I3, transform: bucketize, boundaries: [0, 1, 10, 100], dim: 8}\n",
       {"dense input \"I3\" (line 5): dim 8 differs from dim 16 of sparse input \"C1\" (line 3)"}},
      {"model: {type: lr}\n", {"no inputs"}},
      {"model: {type: lr}\nsparse: {feature: C1}\n", {"line 2", "sparse must be a list"}},
      {"model: {type: lr\nsparse: [}\n", {"invalid YAML", "line"}},
  };
  for (const ErrorCase& c : cases) {
    const absl::Status s = Error(c.yaml);
    for (const std::string& e : c.expect) {
      EXPECT_THAT(std::string(s.message()), HasSubstr(e)) << c.yaml;
    }
  }
}

input::ColumnarBatch DenseBatch(const input::FeatureSpec& features,
                                const std::vector<float>& i2_values,
                                const std::vector<int64_t>& ages) {
  input::ColumnarBatch b;
  b.num_rows = ages.size();
  b.columns.resize(features.features.size());
  b.columns[features.IndexOf("I2")].floats = i2_values;
  b.columns[features.IndexOf("age")].int64s = ages;
  b.labels.assign(ages.size(), 0);
  return b;
}

TEST(ModelSpecTest, ComputeMomentsMatchesTwoPassOverAllBatches) {
  const input::FeatureSpec features = Features();
  absl::StatusOr<ModelSpec> s = ModelSpec::FromYaml(R"(model: {type: lr}
dense:
  - {feature: I2, transform: standardize}
  - {feature: age, transform: standardize}
  - {feature: I1, transform: standardize, mean: 7, stddev: 2}
)",
                                                    features);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->dense[0].has_moments);
  std::vector<input::ColumnarBatch> batches;
  batches.push_back(DenseBatch(features, {1e6 + 1, 1e6 + 2, 1e6 + 3, 1e6 + 4}, {5, 5}));
  batches.push_back(DenseBatch(features, {1e6 + 10, 1e6 - 1}, {5}));
  batches.push_back(DenseBatch(features, {}, {}));
  // A NaN is skipped.
  batches.push_back(DenseBatch(features, {std::nanf(""), 1e6 + 2.5f}, {5}));
  // The I1 column is empty in these batches; its moments are given, so it is
  // never read.
  ASSERT_TRUE(ComputeMoments(features, batches, &*s).ok());
  const std::vector<double> v = {1e6 + 1, 1e6 + 2, 1e6 + 3, 1e6 + 4, 1e6 + 10, 1e6 - 1, 1e6 + 2.5};
  double mean = 0, var = 0;
  for (double x : v) mean += x / v.size();
  for (double x : v) var += (x - mean) * (x - mean) / v.size();
  EXPECT_TRUE(s->dense[0].has_moments);
  EXPECT_NEAR(s->dense[0].mean, mean, 1e-6);
  EXPECT_NEAR(s->dense[0].stddev, std::sqrt(var), 1e-6);
  // A constant feature gets stddev 1, not 0.
  EXPECT_EQ(s->dense[1].mean, 5);
  EXPECT_EQ(s->dense[1].stddev, 1);
  // Given moments are kept.
  EXPECT_EQ(s->dense[2].mean, 7);
  EXPECT_EQ(s->dense[2].stddev, 2);
}

TEST(ModelSpecTest, ComputeMomentsFailsWithoutDataOrOnMalformedBatches) {
  const input::FeatureSpec features = Features();
  ModelSpec s = testing::Spec("model: {type: lr}\ndense: [{feature: I2, transform: standardize}]\n",
                              features);
  std::vector<input::ColumnarBatch> none;
  absl::Status st = ComputeMoments(features, none, &s);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("\"I2\" saw no finite values"));
  EXPECT_FALSE(s.dense[0].has_moments);
  std::vector<input::ColumnarBatch> ragged = {DenseBatch(features, {1, 2, 3}, {1, 2})};
  st = ComputeMoments(features, ragged, &s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("has 3 values, expected 2 rows x 2"));
}

}  // namespace
}  // namespace brook::trainer
