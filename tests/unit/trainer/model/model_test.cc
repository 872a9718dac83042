// Every model's gradients (dense variables and embedding rows) against
// central finite differences of its own forward pass, the dense variables it
// declares, and Step's contract (eval mode, dropout replay, size checks).
#include "trainer/model/model.h"

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/trainer/model/model_test_util.h"
#include "trainer/backend/cpu_backend.h"
#include "trainer/model/model_batch.h"

namespace brook::trainer {
namespace {

using ::testing::ElementsAre;
using testing::Features;
using ::testing::HasSubstr;
using testing::RandomBatch;
using testing::Spec;

// A model with random parameters on a small random batch.
struct Problem {
  input::FeatureSpec features;
  ModelSpec spec;
  ModelBatch batch;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::vector<std::vector<float>> rows, params;

  std::vector<absl::Span<const float>> RowSpans() const {
    return std::vector<absl::Span<const float>>(rows.begin(), rows.end());
  }
  std::vector<absl::Span<const float>> ParamSpans() const {
    return std::vector<absl::Span<const float>>(params.begin(), params.end());
  }
  StepResult Run(bool train) {
    StepResult r;
    absl::Status s = model->Step(batch, RowSpans(), ParamSpans(), train, &r);
    EXPECT_TRUE(s.ok()) << s;
    return r;
  }
  double MeanLoss(bool train) { return Run(train).loss_sum / batch.batch_size; }
};

std::unique_ptr<Problem> MakeProblem(const std::string& yaml, uint32_t seed, size_t rows = 6,
                                     int threads = 1) {
  auto p = std::make_unique<Problem>();
  p->features = Features();
  p->spec = Spec(yaml, p->features);
  const bool binary = p->spec.loss == LossKind::kLogLoss;
  input::ColumnarBatch cb = RandomBatch(p->features, rows, seed, binary);
  // Give every standardize input moments so that the batch builds.
  for (DenseInputSpec& d : p->spec.dense) {
    if (d.transform == DenseTransform::kStandardize && !d.has_moments) {
      d.mean = 0.5;
      d.stddev = 2.0;
      d.has_moments = true;
    }
  }
  absl::Status s = BuildModelBatch(p->spec, p->features, cb, &p->batch);
  EXPECT_TRUE(s.ok()) << s;
  p->backend = CreateCpuBackend(CpuBackendOptions{threads}).value();
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Create(p->spec, p->backend.get());
  EXPECT_TRUE(m.ok()) << m.status();
  p->model = std::move(m).value();
  std::mt19937 rng(seed * 7 + 1);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (const TableKeys& t : p->batch.tables) {
    p->rows.emplace_back(t.unique_keys.size() * t.dim);
    for (float& v : p->rows.back()) v = u(rng);
  }
  for (const DenseVariableSpec& v : p->model->dense_variables()) {
    p->params.emplace_back(v.num_floats());
    for (float& x : p->params.back()) x = u(rng);
  }
  return p;
}

struct Mismatch {
  std::string where;
  double analytic, numeric;
};

// Compares analytic gradients with central differences of the mean loss,
// |a - n| <= 5e-4 + 2e-2 * max(|a|, |n|). Float forward passes make the
// difference quotient noisy at ~1e-6 / (2 eps) = 5e-5, and the truncation
// error is O(eps^2) ~ 1e-4 for these smooth activations; the tolerance sits
// above both, and well below the gradients themselves (checked non-trivial
// below), so a wrong term in any gradient fails. With dropout the finite
// differences run in training mode, whose mask is fixed by (seed, step).
std::vector<Mismatch> CheckGradients(Problem* p, const StepResult& analytic, bool fd_train,
                                     int* checked) {
  constexpr float kEps = 1e-2f;
  std::vector<Mismatch> bad;
  auto check = [&](std::vector<float>* values, const std::vector<float>& grads,
                   const std::string& name) {
    for (size_t i = 0; i < values->size(); ++i) {
      const float saved = (*values)[i];
      (*values)[i] = saved + kEps;
      const double plus = p->MeanLoss(fd_train);
      (*values)[i] = saved - kEps;
      const double minus = p->MeanLoss(fd_train);
      (*values)[i] = saved;
      const double numeric = (plus - minus) / (2.0 * kEps);
      const double a = grads[i];
      ++*checked;
      if (std::abs(a - numeric) > 5e-4 + 2e-2 * std::max(std::abs(a), std::abs(numeric))) {
        bad.push_back({absl::StrCat(name, "[", i, "]"), a, numeric});
      }
    }
  };
  for (size_t t = 0; t < p->rows.size(); ++t) {
    check(&p->rows[t], analytic.table_grads[t], absl::StrCat("table ", p->batch.tables[t].table));
  }
  for (size_t v = 0; v < p->params.size(); ++v) {
    check(&p->params[v], analytic.dense_grads[v], p->model->dense_variables()[v].name);
  }
  return bad;
}

double SumAbs(const std::vector<std::vector<float>>& g) {
  double s = 0;
  for (const auto& v : g) {
    for (float x : v) s += std::abs(x);
  }
  return s;
}

void ExpectGradientsMatch(const std::string& yaml, uint32_t seed, bool fd_train = false) {
  std::unique_ptr<Problem> p = MakeProblem(yaml, seed);
  ASSERT_TRUE(p->model);
  const StepResult r = p->Run(/*train=*/true);
  ASSERT_EQ(r.table_grads.size(), p->rows.size());
  ASSERT_EQ(r.dense_grads.size(), p->params.size());
  // Non-trivial: every table and every variable receives some gradient.
  for (size_t t = 0; t < r.table_grads.size(); ++t) {
    EXPECT_GT(SumAbs({r.table_grads[t]}), 1e-3) << p->batch.tables[t].table;
  }
  for (size_t v = 0; v < r.dense_grads.size(); ++v) {
    EXPECT_GT(SumAbs({r.dense_grads[v]}), 1e-4) << p->model->dense_variables()[v].name;
  }
  int checked = 0;
  const std::vector<Mismatch> bad = CheckGradients(p.get(), r, fd_train, &checked);
  EXPECT_GT(checked, 20);
  ::testing::Test::RecordProperty("entries_checked", checked);
  for (const Mismatch& m : bad) {
    ADD_FAILURE() << m.where << ": analytic " << m.analytic << " vs numeric " << m.numeric;
  }
}

// Every kind of input: a table shared by C1 and C2 (C2 with the mean
// combiner; example 0 has no ids, so its mean is the zero vector), bytes ids,
// fixed int64 ids, and dense inputs through each transform.
std::string Inputs(const std::string& c2_combiner = "mean") {
  return absl::StrCat(R"(
sparse:
  - {feature: C1, table: ids}
  - {feature: C2, table: ids, combiner: )",
                      c2_combiner, R"(}
  - {feature: country}
  - {feature: slots}
dense:
  - {feature: I1, transform: log1p}
  - {feature: I2, transform: standardize, mean: 0.5, stddev: 2.0}
  - {feature: age}
  - {feature: I3, transform: bucketize, boundaries: [-1, 0, 1.5]}
)");
}

TEST(ModelGradientTest, LogisticRegression) {
  ExpectGradientsMatch("model: {type: lr}" + Inputs(), 1);
}

TEST(ModelGradientTest, LinearRegressionWithMse) {
  ExpectGradientsMatch("model: {type: lr, loss: mse}" + Inputs(), 2);
}

TEST(ModelGradientTest, WideDeep) {
  ExpectGradientsMatch(
      "model: {type: wide_deep, embedding_dim: 3, hidden: [5, 3], activation: tanh}" + Inputs(), 3);
}

TEST(ModelGradientTest, WideDeepWithDropoutAndMse) {
  ExpectGradientsMatch(
      "model: {type: wide_deep, embedding_dim: 2, hidden: [6], activation: sigmoid, "
      "dropout: 0.4, loss: mse, seed: 9}" +
          Inputs("sum"),
      4, /*fd_train=*/true);
}

TEST(ModelGradientTest, DeepFm) {
  ExpectGradientsMatch(
      "model: {type: deepfm, embedding_dim: 3, hidden: [4, 3], activation: sigmoid}" + Inputs(), 5);
}

TEST(ModelGradientTest, DeepFmWithoutHiddenLayers) {
  ExpectGradientsMatch("model: {type: deepfm, embedding_dim: 2, hidden: []}" + Inputs(), 6);
}

TEST(ModelGradientTest, Dlrm) {
  ExpectGradientsMatch(
      "model: {type: dlrm, embedding_dim: 3, bottom: [4], top: [5, 3], activation: tanh}" +
          Inputs(),
      7);
}

TEST(ModelGradientTest, DlrmWithReluAndDropout) {
  ExpectGradientsMatch(
      "model: {type: dlrm, embedding_dim: 2, bottom: [], top: [6], activation: relu, dropout: "
      "0.25}" +
          Inputs(),
      8, /*fd_train=*/true);
}

TEST(ModelGradientTest, DlrmWithoutDenseInputs) {
  ExpectGradientsMatch(R"(model: {type: dlrm, embedding_dim: 3, top: [4], activation: tanh}
sparse:
  - {feature: C1}
  - {feature: C2, combiner: mean}
  - {feature: slots}
)",
                       9);
}

TEST(ModelGradientTest, CheckerCatchesAWrongGradient) {
  // The tolerance has power: a 10% error in one gradient entry is flagged.
  std::unique_ptr<Problem> p = MakeProblem(
      "model: {type: deepfm, embedding_dim: 2, hidden: [3], activation: tanh}" + Inputs(), 10);
  StepResult r = p->Run(true);
  size_t largest = 0;
  for (size_t i = 0; i < r.table_grads[0].size(); ++i) {
    if (std::abs(r.table_grads[0][i]) > std::abs(r.table_grads[0][largest])) largest = i;
  }
  r.table_grads[0][largest] *= 1.1f;
  int checked = 0;
  const std::vector<Mismatch> bad = CheckGradients(p.get(), r, false, &checked);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].where, absl::StrCat("table ids[", largest, "]"));
}

// ---- Dense variables.

std::vector<std::string> Describe(const Model& m) {
  std::vector<std::string> out;
  for (const DenseVariableSpec& v : m.dense_variables()) {
    std::string shape;
    for (int64_t d : v.shape) absl::StrAppend(&shape, shape.empty() ? "" : "x", d);
    const char* init = v.init.kind == ps::InitializerKind::kZeros     ? "zeros"
                       : v.init.kind == ps::InitializerKind::kUniform ? "uniform"
                                                                      : "other";
    out.push_back(absl::StrCat(v.name, " ", shape, " ", init));
  }
  return out;
}

TEST(ModelVariablesTest, ShapesNamesAndInitializersPerModel) {
  // dense width = I1 (1) + I2 (2) + age (1) = 4; I3 is bucketized.
  const std::string inputs = Inputs();
  auto lr = MakeProblem("model: {type: lr}" + inputs, 1);
  EXPECT_THAT(Describe(*lr->model), ElementsAre("wide/dense_w 4x1 zeros", "bias 1 zeros"));

  // Deep input: 4 dense + 5 inputs (C1, C2, country, slots, I3) x dim 3 = 19.
  auto wd = MakeProblem("model: {type: wide_deep, embedding_dim: 3, hidden: [8, 5]}" + inputs, 1);
  EXPECT_THAT(Describe(*wd->model),
              ElementsAre("wide/dense_w 4x1 zeros", "deep/w0 19x8 uniform", "deep/b0 8 zeros",
                          "deep/w1 8x5 uniform", "deep/b1 5 zeros", "deep/w2 5x1 uniform",
                          "deep/b2 1 zeros"));
  const DenseVariableSpec& w0 = wd->model->dense_variables()[1];
  EXPECT_FLOAT_EQ(w0.init.high, std::sqrt(6.0f / (19 + 8)));  // Glorot uniform
  EXPECT_FLOAT_EQ(w0.init.low, -w0.init.high);

  auto fm = MakeProblem("model: {type: deepfm, embedding_dim: 3, hidden: [7]}" + inputs, 1);
  EXPECT_THAT(Describe(*fm->model),
              ElementsAre("wide/dense_w 4x1 zeros", "deep/w0 19x7 uniform", "deep/b0 7 zeros",
                          "deep/w1 7x1 uniform", "deep/b1 1 zeros"));

  // Interactions among z and 5 embeddings: 6 * 5 / 2 = 15 pairs; top input 3 + 15.
  auto dlrm =
      MakeProblem("model: {type: dlrm, embedding_dim: 3, bottom: [6], top: [4]}" + inputs, 1);
  EXPECT_THAT(Describe(*dlrm->model),
              ElementsAre("bottom/w0 4x6 uniform", "bottom/b0 6 zeros", "bottom/w1 6x3 uniform",
                          "bottom/b1 3 zeros", "top/w0 18x4 uniform", "top/b0 4 zeros",
                          "top/w1 4x1 uniform", "top/b1 1 zeros"));
  // Tables: ids, country, slots, I3_bucket and, for wide models, their _wide twins.
  std::vector<std::string> tables;
  for (const TableSpec& t : wd->model->layout().tables) {
    tables.push_back(absl::StrCat(t.name, ":", t.dim));
  }
  EXPECT_THAT(tables, ElementsAre("ids:3", "country:3", "slots:3", "I3_bucket:3", "ids_wide:1",
                                  "country_wide:1", "slots_wide:1", "I3_bucket_wide:1"));
}

// ---- Step's contract.

TEST(ModelStepTest, LrPredictionIsSigmoidOfWeightsAndMeanOfNoIdsIsZero) {
  input::FeatureSpec features = Features();
  ModelSpec spec =
      Spec("model: {type: lr}\nsparse:\n  - {feature: C1, combiner: mean}\n", features);
  input::ColumnarBatch cb;
  cb.num_rows = 3;
  cb.columns.resize(features.features.size());
  for (input::Column& c : cb.columns) c.row_splits.assign(4, 0);  // all varlen empty
  for (size_t i = 0; i < features.features.size(); ++i) {
    const auto& f = features.features[i];
    if (f.kind == input::FeatureKind::kFixed) {
      cb.columns[i].row_splits = {0};
      if (f.type == input::FeatureType::kFloat) cb.columns[i].floats.assign(3 * f.length, 0);
      if (f.type == input::FeatureType::kInt64) cb.columns[i].int64s.assign(3 * f.length, 0);
    }
  }
  input::Column& c1 = cb.columns[features.IndexOf("C1")];
  c1.ids = {10, 20, 10};
  c1.row_splits = {0, 2, 2, 3};  // example 1 has no ids
  cb.labels = {1, 0, 1};
  ModelBatch mb;
  ASSERT_TRUE(BuildModelBatch(spec, features, cb, &mb).ok());
  auto backend = CreateCpuBackend({}).value();
  auto model = Model::Create(spec, backend.get()).value();
  const std::vector<float> rows = {0.5f, -1.5f};  // keys 10, 20
  const std::vector<float> bias = {0.25f};
  std::vector<absl::Span<const float>> r = {rows}, p = {bias};
  StepResult out;
  ASSERT_TRUE(model->Step(mb, r, p, true, &out).ok());
  auto sigmoid = [](double z) { return 1 / (1 + std::exp(-z)); };
  const double p0 = sigmoid(0.25 + (0.5 - 1.5) / 2), p1 = sigmoid(0.25), p2 = sigmoid(0.75);
  EXPECT_THAT(out.predictions,
              ElementsAre(::testing::FloatNear(p0, 1e-6), ::testing::FloatNear(p1, 1e-6),
                          ::testing::FloatNear(p2, 1e-6)));
  EXPECT_NEAR(out.loss_sum, -std::log(p0) - std::log(1 - p1) - std::log(p2), 1e-5);
  // d(mean loss)/d(w_10) = ((p0 - 1) / 2 + (p2 - 1)) / 3; w_20: (p0 - 1) / 2 / 3.
  ASSERT_EQ(out.table_grads.size(), 1u);
  EXPECT_NEAR(out.table_grads[0][0], ((p0 - 1) / 2 + (p2 - 1)) / 3, 1e-6);
  EXPECT_NEAR(out.table_grads[0][1], (p0 - 1) / 2 / 3, 1e-6);
  EXPECT_NEAR(out.dense_grads[0][0], ((p0 - 1) + p1 + (p2 - 1)) / 3, 1e-6);
}

TEST(ModelStepTest, EvalGivesLossAndPredictionsButNoGradients) {
  auto p = MakeProblem("model: {type: deepfm, embedding_dim: 2, hidden: [3]}" + Inputs(), 11);
  const StepResult train = p->Run(true);
  const StepResult eval = p->Run(false);
  EXPECT_TRUE(eval.table_grads.empty());
  EXPECT_TRUE(eval.dense_grads.empty());
  EXPECT_EQ(eval.loss_sum, train.loss_sum);
  EXPECT_EQ(eval.predictions, train.predictions);
  for (float x : eval.predictions) {  // probabilities (1.0f once a logit passes ~17)
    EXPECT_GE(x, 0.0f);
    EXPECT_LE(x, 1.0f);
  }
}

TEST(ModelStepTest, DropoutReplaysPerStepAndIsOffInEval) {
  auto p = MakeProblem(
      "model: {type: wide_deep, embedding_dim: 2, hidden: [16], dropout: 0.5, seed: 3}" + Inputs(),
      12);
  p->batch.step = 41;
  const double a = p->Run(true).loss_sum, a_again = p->Run(true).loss_sum;
  const double e1 = p->Run(false).loss_sum;
  p->batch.step = 42;
  const double b = p->Run(true).loss_sum;
  const double e2 = p->Run(false).loss_sum;
  EXPECT_EQ(a, a_again);
  EXPECT_NE(a, b);
  EXPECT_EQ(e1, e2);
  EXPECT_NE(a, e1);
}

TEST(ModelStepTest, ThreadCountDoesNotChangeResultsBeyondRounding) {
  const std::string yaml =
      "model: {type: dlrm, embedding_dim: 4, bottom: [8], top: [16]}" + Inputs();
  auto one = MakeProblem(yaml, 13, 64, 1);
  auto three = MakeProblem(yaml, 13, 64, 3);
  const StepResult a = one->Run(true), b = three->Run(true);
  EXPECT_NEAR(a.loss_sum, b.loss_sum, 1e-4);
  for (size_t v = 0; v < a.dense_grads.size(); ++v) {
    for (size_t i = 0; i < a.dense_grads[v].size(); ++i) {
      ASSERT_NEAR(a.dense_grads[v][i], b.dense_grads[v][i], 1e-5);
    }
  }
}

TEST(ModelStepTest, RejectsWrongSizesBeforeComputing) {
  auto p = MakeProblem("model: {type: wide_deep, embedding_dim: 2, hidden: [3]}" + Inputs(), 14);
  StepResult out;
  auto rows = p->RowSpans();
  auto params = p->ParamSpans();
  rows[1] = rows[1].subspan(1);
  absl::Status s = p->model->Step(p->batch, rows, params, true, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rows of table \"country\""));
  rows = p->RowSpans();
  params.pop_back();
  s = p->model->Step(p->batch, rows, params, true, &out);
  EXPECT_THAT(s.message(), HasSubstr("params for"));
  params = p->ParamSpans();
  ModelBatch bad = p->batch;
  bad.sparse[0].rows.back() = 1000;
  s = p->model->Step(bad, rows, params, true, &out);
  EXPECT_THAT(s.message(), HasSubstr("row 1000 >="));
  bad = p->batch;
  bad.tables.pop_back();
  s = p->model->Step(bad, rows, params, true, &out);
  EXPECT_THAT(s.message(), HasSubstr("tables"));
}

TEST(ModelStepTest, EmptyBatchGivesZeroGradients) {
  auto p = MakeProblem("model: {type: deepfm, embedding_dim: 2, hidden: [3]}" + Inputs(), 15, 0);
  const StepResult r = p->Run(true);
  EXPECT_EQ(r.loss_sum, 0);
  EXPECT_TRUE(r.predictions.empty());
  ASSERT_EQ(r.dense_grads.size(), p->params.size());
  EXPECT_EQ(SumAbs(r.dense_grads), 0);
}

TEST(ModelCreateTest, RejectsInvalidSpecAndNullBackend) {
  ModelSpec spec;  // no inputs
  auto backend = CreateCpuBackend({}).value();
  EXPECT_EQ(Model::Create(spec, backend.get()).status().code(), absl::StatusCode::kInvalidArgument);
  spec.sparse.push_back({"C1"});
  EXPECT_TRUE(Model::Create(spec, backend.get()).ok());
  EXPECT_EQ(Model::Create(spec, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace brook::trainer
