// Trainer over in-process PS shards (LocalPsClient) and a real pipeline over
// TFRecord files written here: it learns a planted signal, counts what it
// did, acknowledges every record to UnitProgress only after its pushes, is
// exactly reproducible at staleness 0, and surfaces PS errors.
#include "trainer/trainer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "datatools/example_builder.h"
#include "ps/client/local_ps_client.h"
#include "ps/parameter_server.h"
#include "storage/tfrecord.h"
#include "tests/testing/test_util.h"
#include "trainer/backend/cpu_backend.h"
#include "trainer/model/metrics.h"

namespace brook::trainer {
namespace {

constexpr int kFiles = 2;
constexpr int kPerFile = 3000;

// Label = 1 with probability sigmoid(w[id] + 0.8 x), w[id] fixed per id:
// learnable, not separable.
// Returns the Bayes-optimal AUC (the true probabilities as predictions).
double WriteData(const std::string& dir) {
  std::vector<float> truth, labels;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> w(50);
  for (float& v : w) v = normal(rng) * 1.5f;
  datatools::ExampleBuilder b;
  for (int f = 0; f < kFiles; ++f) {
    auto writer = storage::TFRecordWriter::Open(dir + "/part-" + std::to_string(f) + ".tfrecord", {});
    EXPECT_TRUE(writer.ok()) << writer.status();
    for (int i = 0; i < kPerFile; ++i) {
      const int64_t id = static_cast<int64_t>(rng() % w.size());
      const float x = normal(rng);
      const float p = 1.0f / (1.0f + std::exp(-(w[id] + 0.8f * x)));
      const float label = std::uniform_real_distribution<float>(0, 1)(rng) < p ? 1.0f : 0.0f;
      b.Clear();
      b.AddFloats("label", std::span<const float>(&label, 1));
      b.AddInt64s("c", std::span<const int64_t>(&id, 1));
      b.AddFloats("x", std::span<const float>(&x, 1));
      EXPECT_TRUE((*writer)->Write(b.Serialize()).ok());
      truth.push_back(p);
      labels.push_back(label);
    }
    EXPECT_TRUE((*writer)->Close().ok());
  }
  return Auc(truth, labels);
}

input::FeatureSpec Features() {
  auto spec = input::FeatureSpec::FromYaml(R"(label: {name: label, type: float}
features:
  - {name: c, type: int64, kind: varlen}
  - {name: x, type: float, length: 1}
)");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

ModelSpec Model(const input::FeatureSpec& features, const std::string& type) {
  const std::string model = type == "lr" ? "model: {type: lr}"
                                          : "model: {type: " + type + ", embedding_dim: 4, hidden: [8]}";
  auto spec = ModelSpec::FromYaml(model + R"(
sparse:
  - {feature: c}
dense:
  - {feature: x}
)",
                                  features);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

struct Cluster {
  std::vector<std::unique_ptr<ps::ParameterServer>> shards;
  std::unique_ptr<ps::LocalPsClient> client;
  explicit Cluster(int n) {
    std::vector<ps::ParameterServer*> raw;
    for (int i = 0; i < n; ++i) {
      ps::ParameterServerOptions o;
      o.shard_index = i;
      o.num_shards = n;
      shards.push_back(std::make_unique<ps::ParameterServer>(o));
      raw.push_back(shards.back().get());
    }
    client = std::make_unique<ps::LocalPsClient>(raw);
  }
};

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bayes_auc_ = WriteData(dir_.path());
    features_ = Features();
    auto backend = CreateCpuBackend({.num_threads = 1});
    ASSERT_TRUE(backend.ok());
    backend_ = std::move(*backend);
  }
  std::unique_ptr<input::Pipeline> Pipeline(int epochs, size_t shuffle) {
    input::PipelineOptions o;
    o.glob = dir_.path() + "/part-*.tfrecord";
    o.batch_size = 64;
    o.epochs = epochs;
    o.shuffle_buffer = shuffle;
    o.parse_threads = 1;
    auto p = input::Pipeline::Create(features_, o);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? std::move(*p) : nullptr;
  }
  std::unique_ptr<Trainer> MakeTrainer(Cluster& c, const std::string& type, int staleness) {
    TrainerOptions o;
    o.staleness = staleness;
    o.embedding_optimizer.learning_rate = 0.1f;
    o.dense_optimizer.learning_rate = 0.01f;
    auto t = Trainer::Create(c.client.get(), Model(features_, type), features_, o, backend_.get());
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return nullptr;
    EXPECT_TRUE((*t)->Setup().ok());
    return std::move(*t);
  }

  testing::TempDir dir_;
  double bayes_auc_ = 0;
  input::FeatureSpec features_;
  std::unique_ptr<Backend> backend_;
};

TEST_F(TrainerTest, LearnsThePlantedSignalAndCountsItsWork) {
  for (const char* type : {"lr", "wide_deep"}) {
    SCOPED_TRACE(type);
    Cluster cluster(2);
    auto t = MakeTrainer(cluster, type, /*staleness=*/2);
    ASSERT_NE(t, nullptr);
    auto before = t->Evaluate(Pipeline(1, 0).get());
    ASSERT_TRUE(before.ok()) << before.status();
    auto train = Pipeline(6, 500);
    absl::Status st = t->Train(train.get());
    ASSERT_TRUE(st.ok()) << st;
    const TrainerStats s = t->stats();
    EXPECT_EQ(s.examples, 6 * kFiles * kPerFile);
    EXPECT_EQ(s.steps, (kFiles * kPerFile + 63) / 64 * 6);
    EXPECT_GT(s.compute_seconds, 0);
    EXPECT_GE(s.wall_seconds, s.compute_seconds);
    auto after = t->Evaluate(Pipeline(1, 0).get());
    ASSERT_TRUE(after.ok()) << after.status();
    EXPECT_EQ(after->examples, kFiles * kPerFile);
    EXPECT_LT(before->auc, 0.6);
    EXPECT_GT(after->auc, bayes_auc_ - 0.03) << "Bayes-optimal " << bayes_auc_;
    EXPECT_LT(after->logloss, before->logloss);
  }
}

TEST_F(TrainerTest, UnitOffsetsAdvanceOnlyWithAcknowledgedPushes) {
  Cluster cluster(2);
  auto t = MakeTrainer(cluster, "lr", 3);
  ASSERT_NE(t, nullptr);
  auto train = Pipeline(1, 200);  // shuffled: batches settle records out of order
  input::UnitProgress progress(train->units());
  ASSERT_TRUE(t->Train(train.get(), &progress).ok());
  for (const input::UnitOffset& u : progress.Offsets()) {
    EXPECT_EQ(u.committed, static_cast<uint64_t>(kPerFile)) << "unit " << u.unit_id;
    EXPECT_TRUE(u.complete) << "unit " << u.unit_id;
  }
  EXPECT_EQ(progress.pending_batches(), 0u);
  // A second epoch needs its own UnitProgress: mixing epochs is refused.
  auto two = Pipeline(2, 0);
  input::UnitProgress epoch0(two->units());
  EXPECT_EQ(t->Train(two.get(), &epoch0).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TrainerTest, StalenessZeroIsReproducible) {
  double auc[2];
  for (int run = 0; run < 2; ++run) {
    Cluster cluster(2);
    auto t = MakeTrainer(cluster, "wide_deep", /*staleness=*/0);
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->Train(Pipeline(1, 300).get()).ok());
    auto r = t->Evaluate(Pipeline(1, 0).get());
    ASSERT_TRUE(r.ok());
    auc[run] = r->auc;
  }
  EXPECT_EQ(auc[0], auc[1]);
}

TEST_F(TrainerTest, APsErrorStopsTrainingWithThatError) {
  Cluster cluster(1);
  auto t = MakeTrainer(cluster, "lr", 2);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(cluster.shards[0]->DropTable("c").ok());
  absl::Status st = t->Train(Pipeline(1, 0).get());
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
}

}  // namespace
}  // namespace brook::trainer
