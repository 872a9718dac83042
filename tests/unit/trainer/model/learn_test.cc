// End to end without a parameter server: rows and dense variables live in
// plain maps in the test, which applies SGD / Adagrad itself, exactly as a PS
// would to the pushed gradients. LR and DeepFM must learn a synthetic
// dataset whose labels are drawn from sigmoid(sum of per-id weights + a
// dense term), reaching a test AUC close to the Bayes-optimal one.
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "features/feature_spec.h"
#include "gtest/gtest.h"
#include "trainer/backend/cpu_backend.h"
#include "trainer/input/columnar_batch.h"
#include "trainer/model/model.h"
#include "trainer/model/model_batch.h"
#include "trainer/model/quality_metrics.h"

namespace brook::trainer {
namespace {

constexpr char kFeatures[] = R"(label: clicked
features:
  - {name: user, type: int64, kind: varlen}
  - {name: item, type: int64, length: 1}
  - {name: price, type: float, length: 1}
)";

constexpr int kUsers = 300, kItems = 50;

struct Dataset {
  std::vector<input::ColumnarBatch> batches;
  std::vector<float> true_logits;  // per example, in batch order
  std::vector<float> labels;
};

// label ~ Bernoulli(sigmoid(sum of w_user over the 1-3 user ids + w_item +
// 0.8 * price - 0.3)), weights ~ N(0, 1.5^2).
Dataset Generate(int examples, int batch_size, uint32_t seed) {
  std::mt19937 truth_rng(1);  // the same ground truth for train and test
  std::normal_distribution<float> w(0.0f, 1.5f);
  std::vector<float> w_user(kUsers), w_item(kItems);
  for (float& x : w_user) x = w(truth_rng);
  for (float& x : w_item) x = w(truth_rng);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> user(0, kUsers - 1), item(0, kItems - 1), count(1, 3);
  std::normal_distribution<float> price(0.0f, 1.0f);
  std::uniform_real_distribution<float> coin(0.0f, 1.0f);
  Dataset d;
  for (int start = 0; start < examples; start += batch_size) {
    input::ColumnarBatch b;
    b.columns.resize(3);
    for (int i = start; i < std::min(examples, start + batch_size); ++i) {
      float z = -0.3f;
      for (int k = count(rng); k > 0; --k) {
        const int u = user(rng);
        b.columns[0].ids.push_back(static_cast<uint64_t>(u));
        z += w_user[u];
      }
      b.columns[0].row_splits.push_back(static_cast<uint32_t>(b.columns[0].ids.size()));
      const int it = item(rng);
      b.columns[1].int64s.push_back(it);
      z += w_item[it];
      const float p = price(rng);
      b.columns[2].floats.push_back(p);
      z += 0.8f * p;
      const float label = coin(rng) < 1.0f / (1.0f + std::exp(-z)) ? 1.0f : 0.0f;
      b.labels.push_back(label);
      d.labels.push_back(label);
      d.true_logits.push_back(z);
      ++b.num_rows;
    }
    d.batches.push_back(std::move(b));
  }
  return d;
}

// What a PS would hold: rows per table (created on first pull) and dense
// variables, with the optimizer applied to pushed gradients.
class LocalParameters {
 public:
  enum class Optimizer { kSgd, kAdagrad };
  LocalParameters(const Model& model, Optimizer opt, float lr, float row_init)
      : opt_(opt), lr_(lr), row_init_(row_init) {
    std::mt19937 rng(17);
    for (const DenseVariableSpec& v : model.dense_variables()) {
      std::vector<float> x(v.num_floats(), 0.0f);
      if (v.init.kind == ps::InitializerKind::kUniform) {
        std::uniform_real_distribution<float> u(v.init.low, v.init.high);
        for (float& e : x) e = u(rng);
      }
      dense_.push_back(std::move(x));
      dense_acc_.emplace_back(dense_.back().size(), kInitialAccumulator);
    }
    tables_.resize(model.layout().tables.size());
  }

  // Pulls rows of every table of the batch into *rows (key order).
  void Pull(const ModelBatch& mb, std::vector<std::vector<float>>* rows) {
    rows->resize(mb.tables.size());
    for (size_t t = 0; t < mb.tables.size(); ++t) {
      const int dim = mb.tables[t].dim;
      (*rows)[t].clear();
      for (uint64_t key : mb.tables[t].unique_keys) {
        Row& r = Get(t, key, dim);
        (*rows)[t].insert((*rows)[t].end(), r.w.begin(), r.w.end());
      }
    }
  }

  void Push(const ModelBatch& mb, const StepResult& r) {
    for (size_t t = 0; t < mb.tables.size(); ++t) {
      const int dim = mb.tables[t].dim;
      for (size_t k = 0; k < mb.tables[t].unique_keys.size(); ++k) {
        Row& row = Get(t, mb.tables[t].unique_keys[k], dim);
        for (int d = 0; d < dim; ++d) Apply(&row.w[d], &row.acc[d], r.table_grads[t][k * dim + d]);
      }
    }
    for (size_t v = 0; v < dense_.size(); ++v) {
      for (size_t i = 0; i < dense_[v].size(); ++i) {
        Apply(&dense_[v][i], &dense_acc_[v][i], r.dense_grads[v][i]);
      }
    }
  }

  std::vector<absl::Span<const float>> Params() const {
    return std::vector<absl::Span<const float>>(dense_.begin(), dense_.end());
  }

 private:
  static constexpr float kInitialAccumulator = 1e-6f;
  struct Row {
    std::vector<float> w, acc;
  };

  Row& Get(size_t table, uint64_t key, int dim) {
    auto [it, inserted] = tables_[table].try_emplace(key);
    if (inserted) {
      // Deterministic per (table, key), as the PS initializer is.
      std::mt19937 rng(static_cast<uint32_t>(key * 7919 + table));
      std::uniform_real_distribution<float> u(-row_init_, row_init_);
      it->second.w.resize(dim);
      for (float& x : it->second.w) x = dim == 1 ? 0.0f : u(rng);
      it->second.acc.assign(dim, kInitialAccumulator);
    }
    return it->second;
  }

  void Apply(float* w, float* acc, float g) {
    if (opt_ == Optimizer::kSgd) {
      *w -= lr_ * g;
    } else {
      *acc += g * g;
      *w -= lr_ * g / std::sqrt(*acc);
    }
  }

  Optimizer opt_;
  float lr_, row_init_;
  std::vector<std::unordered_map<uint64_t, Row>> tables_;
  std::vector<std::vector<float>> dense_, dense_acc_;
};

struct LearnResult {
  double initial_auc = 0, auc = 0, bayes_auc = 0, logloss = 0;
};

LearnResult Learn(const std::string& model_yaml, LocalParameters::Optimizer opt, float lr,
                  int epochs) {
  const input::FeatureSpec features = input::FeatureSpec::FromYaml(kFeatures).value();
  const ModelSpec spec = ModelSpec::FromYaml(model_yaml, features).value();
  auto backend = CreateCpuBackend(CpuBackendOptions{2}).value();
  auto model = Model::Create(spec, backend.get()).value();
  auto builder = ModelBatchBuilder::Create(spec, features).value();
  LocalParameters params(*model, opt, lr, 0.05f);
  const Dataset train = Generate(12000, 100, 2), test = Generate(4000, 500, 3);

  auto evaluate = [&]() {
    std::vector<float> predictions;
    std::vector<std::vector<float>> rows;
    ModelBatch mb;
    for (const input::ColumnarBatch& b : test.batches) {
      EXPECT_TRUE(builder.Build(b, &mb).ok());
      params.Pull(mb, &rows);
      StepResult r;
      const std::vector<absl::Span<const float>> spans(rows.begin(), rows.end());
      EXPECT_TRUE(model->Step(mb, spans, params.Params(), /*train=*/false, &r).ok());
      predictions.insert(predictions.end(), r.predictions.begin(), r.predictions.end());
    }
    return predictions;
  };

  LearnResult out;
  out.initial_auc = Auc(evaluate(), test.labels);
  std::vector<std::vector<float>> rows;
  ModelBatch mb;
  uint64_t step = 0;
  for (int e = 0; e < epochs; ++e) {
    for (const input::ColumnarBatch& b : train.batches) {
      EXPECT_TRUE(builder.Build(b, &mb).ok());
      mb.step = step++;
      params.Pull(mb, &rows);
      StepResult r;
      const std::vector<absl::Span<const float>> spans(rows.begin(), rows.end());
      absl::Status s = model->Step(mb, spans, params.Params(), /*train=*/true, &r);
      EXPECT_TRUE(s.ok()) << s;
      params.Push(mb, r);
    }
  }
  const std::vector<float> predictions = evaluate();
  out.auc = Auc(predictions, test.labels);
  out.logloss = LogLoss(predictions, test.labels);
  out.bayes_auc = Auc(test.true_logits, test.labels);
  return out;
}

constexpr char kInputs[] = R"(
sparse:
  - {feature: user, combiner: sum}
  - {feature: item}
dense:
  - {feature: price}
)";

TEST(LearnTest, LogisticRegressionWithSgdReachesNearBayesAuc) {
  // SGD on the mean-loss gradient; lr is per batch of 100.
  const LearnResult r =
      Learn(std::string("model: {type: lr}") + kInputs, LocalParameters::Optimizer::kSgd, 20.0f, 4);
  RecordProperty("auc", std::to_string(r.auc));
  RecordProperty("bayes_auc", std::to_string(r.bayes_auc));
  EXPECT_NEAR(r.initial_auc, 0.5, 0.05);  // all-zero weights: a constant prediction
  EXPECT_GT(r.auc, 0.85);
  EXPECT_GT(r.auc, r.bayes_auc - 0.03) << "bayes " << r.bayes_auc;
  EXPECT_LT(r.logloss, 0.5);
}

TEST(LearnTest, DeepFmWithAdagradReachesNearBayesAuc) {
  const LearnResult r =
      Learn(std::string("model: {type: deepfm, embedding_dim: 8, hidden: [16], activation: relu}") +
                kInputs,
            LocalParameters::Optimizer::kAdagrad, 0.05f, 4);
  RecordProperty("auc", std::to_string(r.auc));
  RecordProperty("initial_auc", std::to_string(r.initial_auc));
  EXPECT_LT(r.initial_auc, 0.7);
  EXPECT_GT(r.auc, 0.85);
  EXPECT_GT(r.auc, r.bayes_auc - 0.03) << "bayes " << r.bayes_auc;
}

}  // namespace
}  // namespace brook::trainer
