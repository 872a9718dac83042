// Trainer over in-process PS shards (LocalPsClient) and a real pipeline over
// TFRecord files written here: it learns a planted signal, counts what it
// did, acknowledges every record to UnitProgress only after its pushes, is
// exactly reproducible at staleness 0, and surfaces PS errors.
#include "trainer/trainer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "datatools/example_builder.h"
#include "ps/client/local_ps_client.h"
#include "ps/parameter_server.h"
#include "storage/tfrecord.h"
#include "tests/testing/test_util.h"
#include "trainer/backend/cpu_backend.h"
#include "trainer/model/quality_metrics.h"

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
    auto writer =
        storage::TFRecordWriter::Open(dir + "/part-" + std::to_string(f) + ".tfrecord", {});
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
  const std::string model = type == "lr"
                                ? "model: {type: lr}"
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

using Cluster = ps::LocalPsCluster;

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bayes_auc_ = WriteData(dir_.path());
    features_ = Features();
    auto backend = CreateCpuBackend({.num_threads = 1});
    ASSERT_TRUE(backend.ok());
    backend_ = std::move(*backend);
  }
  std::unique_ptr<input::Pipeline> Pipeline(int epochs, size_t shuffle, int batch_size = 64) {
    input::PipelineOptions o;
    o.glob = dir_.path() + "/part-*.tfrecord";
    o.batch_size = batch_size;
    o.cycle_length = 1;  // records in file order: batch boundaries are the only difference
    o.epochs = epochs;
    o.shuffle_buffer = shuffle;
    o.parse_threads = 1;
    auto p = input::Pipeline::Create(features_, o);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? std::move(*p) : nullptr;
  }
  // Work unit 0 (part-0's records) from record `begin`, as a lease hands it
  // out; shuffled with a fixed seed, as every holder of the unit shuffles.
  std::unique_ptr<input::Pipeline> UnitPipeline(uint64_t begin, size_t shuffle) {
    input::PipelineOptions o;
    o.units = {
        sharding::WorkUnit{.id = 0, .path = dir_.path() + "/part-0.tfrecord", .begin = begin}};
    o.batch_size = 64;
    o.epochs = 1;
    o.shuffle_buffer = shuffle;
    o.parse_threads = 1;
    o.seed = 17;
    auto p = input::Pipeline::Create(features_, o);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? std::move(*p) : nullptr;
  }
  std::unique_ptr<Trainer> MakeTrainer(Cluster& c, const std::string& type, int staleness,
                                       TrainerOptions o = {}) {
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
    // The progressive training AUC (last 64K-128K of the 36K examples: all
    // of them, early ones predicted by a barely trained model) sits between
    // the untrained and the trained model's; the gauge of the last
    // evaluation is its exact AUC.
    const TrainerStats end = t->stats();
    EXPECT_GT(end.train_auc, before->auc);
    EXPECT_LT(end.train_auc, after->auc + 0.02);
    EXPECT_EQ(end.eval_auc, after->auc);
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

// A trainer dies after pushing steps it never committed; the unit's next
// holder resumes at the commit and trains those steps again, under the
// unit's push stream (as TrainerWorker does with a lease): the PS applies
// each step once, so the model ends exactly (staleness 0: bit for bit)
// where one uninterrupted trainer leaves it. Without the stream the steps
// trained twice count twice. Shuffled, the next holder reads the unit from
// its start and skips the committed steps.
TEST_F(TrainerTest, AUnitResumedByTheNextHolderAppliesEveryStepOnce) {
  constexpr uint64_t kStream = 4242, kCommitted = 10, kDied = 17;
  for (size_t shuffle : {size_t{0}, size_t{500}}) {
    SCOPED_TRACE(absl::StrCat("shuffle buffer ", shuffle));
    Cluster reference(2);
    auto whole = MakeTrainer(reference, "wide_deep", 0);
    ASSERT_NE(whole, nullptr);
    auto unit = UnitPipeline(0, shuffle);
    input::UnitProgress unit_progress(unit->units());
    ASSERT_TRUE(whole->Train(unit.get(), &unit_progress, {.id = kStream}).ok());
    ASSERT_TRUE(unit_progress.Complete(0));
    auto expected = whole->Evaluate(Pipeline(1, 0).get());
    ASSERT_TRUE(expected.ok()) << expected.status();

    for (bool with_stream : {true, false}) {
      SCOPED_TRACE(with_stream ? "with the unit's stream" : "without a stream");
      const uint64_t stream = with_stream ? kStream : 0;
      Cluster c(2);
      // The first holder pushes kDied steps, then dies having committed kCommitted.
      TrainerOptions dies;
      dies.max_steps = kDied;
      auto first = MakeTrainer(c, "wide_deep", 0, dies);
      ASSERT_NE(first, nullptr);
      auto read = UnitPipeline(0, shuffle);
      input::UnitProgress first_progress(read->units());
      ASSERT_TRUE(first->Train(read.get(), &first_progress, {.id = stream}).ok());
      ASSERT_EQ(first->stats().steps, static_cast<int64_t>(kDied));
      // Its commit after kCommitted steps: the mark and the step count.
      auto probe = UnitPipeline(0, shuffle);
      input::UnitProgress probe_progress(probe->units());
      ASSERT_TRUE(SkipSteps(probe.get(), &probe_progress, kCommitted, 1).ok());
      const input::UnitProgress::StepMark mark = probe_progress.CommittedSteps(0);
      ASSERT_EQ(mark.steps, kCommitted);
      ASSERT_GT(mark.committed, 0u);

      // The next holder.
      TrainerOptions resumes;
      resumes.first_step = static_cast<int64_t>(kCommitted);
      auto second = MakeTrainer(c, "wide_deep", 0, resumes);
      ASSERT_NE(second, nullptr);
      std::unique_ptr<input::Pipeline> rest;
      std::unique_ptr<input::UnitProgress> progress;
      if (shuffle == 0) {
        rest = UnitPipeline(mark.committed, 0);
        progress = std::make_unique<input::UnitProgress>(rest->units());
        progress->AddSteps(kCommitted);
      } else {
        rest = UnitPipeline(0, shuffle);
        progress = std::make_unique<input::UnitProgress>(rest->units());
        ASSERT_TRUE(SkipSteps(rest.get(), progress.get(), kCommitted, 1).ok());
        EXPECT_EQ(progress->CommittedSteps(0).committed, mark.committed);
      }
      ASSERT_TRUE(
          second->Train(rest.get(), progress.get(), {.id = stream, .first_step = kCommitted}).ok());
      EXPECT_TRUE(progress->Complete(0));
      EXPECT_EQ(progress->CommittedSteps(0).steps, unit_progress.CommittedSteps(0).steps);
      auto got = second->Evaluate(Pipeline(1, 0).get());
      ASSERT_TRUE(got.ok()) << got.status();
      uint64_t duplicates = 0;
      for (int s = 0; s < 2; ++s) {
        for (const ps::TableStats& t : c.shards[s]->Stats().tables)
          duplicates += t.duplicate_pushes;
      }
      if (with_stream) {
        EXPECT_EQ(got->logloss, expected->logloss);
        EXPECT_EQ(got->auc, expected->auc);
        EXPECT_GT(duplicates, 0u);  // steps kCommitted..kDied-1, pushed twice
      } else {
        EXPECT_NE(got->logloss, expected->logloss);
        EXPECT_EQ(duplicates, 0u);
      }
    }
  }
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

// k micro-batches of n examples accumulated into one push make the update
// one batch of k x n makes: the same weights (up to float summation order)
// after a whole epoch, the last, partial step included (6000 records: 46
// steps of 128 and one of 112 = 32 + 32 + 32 + 16).
TEST_F(TrainerTest, AccumulatedMicroBatchesUpdateLikeOneBigBatch) {
  EvalResult result[2];
  for (int run = 0; run < 2; ++run) {
    Cluster cluster(2);
    TrainerOptions o;
    o.accumulation_steps = run == 0 ? 1 : 4;
    auto t = MakeTrainer(cluster, "wide_deep", /*staleness=*/0, o);
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->Train(Pipeline(1, 0, run == 0 ? 128 : 32).get()).ok());
    EXPECT_EQ(t->stats().steps, 47);
    EXPECT_EQ(t->stats().micro_batches, run == 0 ? 47 : 188);
    EXPECT_EQ(t->stats().examples, kFiles * kPerFile);
    auto r = t->Evaluate(Pipeline(1, 0).get());
    ASSERT_TRUE(r.ok()) << r.status();
    result[run] = *r;
  }
  EXPECT_NEAR(result[1].logloss, result[0].logloss, 1e-5 * result[0].logloss);
  EXPECT_NEAR(result[1].auc, result[0].auc, 1e-4);
}

// The schedule's multiplier reaches the PS's optimizer: with SGD, one step
// at scale 0.5 (step 0 of a 2-step warmup) moves every dense value half as
// far as the same step at scale 1.
TEST_F(TrainerTest, TheLearningRateScheduleScalesTheUpdate) {
  std::vector<std::vector<float>> delta[2];
  for (int run = 0; run < 2; ++run) {
    Cluster cluster(1);
    TrainerOptions o;
    o.lr_schedule.warmup_steps = run == 0 ? 0 : 2;
    o.max_steps = 1;
    auto t = MakeTrainer(cluster, "wide_deep", 0, o);
    ASSERT_NE(t, nullptr);
    for (const DenseVariableSpec& v : t->model().dense_variables()) {
      std::vector<float> before(v.num_floats());
      ASSERT_TRUE(cluster.client->PullDense(v.name, absl::MakeSpan(before)).ok());
      delta[run].push_back(std::move(before));
    }
    ASSERT_TRUE(t->Train(Pipeline(1, 0).get()).ok());
    EXPECT_FLOAT_EQ(t->stats().learning_rate_scale, run == 0 ? 1.0f : 0.5f);
    const auto& vars = t->model().dense_variables();
    for (size_t i = 0; i < vars.size(); ++i) {
      std::vector<float> after(vars[i].num_floats());
      ASSERT_TRUE(cluster.client->PullDense(vars[i].name, absl::MakeSpan(after)).ok());
      for (size_t j = 0; j < after.size(); ++j) delta[run][i][j] = after[j] - delta[run][i][j];
    }
  }
  int moved = 0;
  for (size_t i = 0; i < delta[0].size(); ++i) {
    for (size_t j = 0; j < delta[0][i].size(); ++j) {
      const float full = delta[0][i][j], half = delta[1][i][j];
      if (std::abs(full) < 1e-7f) continue;
      ++moved;
      EXPECT_NEAR(half, 0.5f * full, 1e-3f * std::abs(full) + 1e-9f) << i << "," << j;
    }
  }
  EXPECT_GT(moved, 10);
}

TEST_F(TrainerTest, BadAccumulationOrScheduleIsRefused) {
  Cluster cluster(1);
  TrainerOptions o;
  o.accumulation_steps = 0;
  auto t =
      Trainer::Create(cluster.client.get(), Model(features_, "lr"), features_, o, backend_.get());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  o.accumulation_steps = 1;
  o.lr_schedule.decay = LrDecay::kCosine;  // no decay_steps
  t = Trainer::Create(cluster.client.get(), Model(features_, "lr"), features_, o, backend_.get());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("decay_steps"), std::string::npos) << t.status();
}

// A PS that lost a table (restarted empty, or rolled back to before it
// existed) answers NOT_FOUND: the trainer declares its tables again and
// trains on.
TEST_F(TrainerTest, ATableThePsLostIsDeclaredAgainAndTrainingGoesOn) {
  Cluster cluster(1);
  auto t = MakeTrainer(cluster, "lr", 2);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(cluster.shards[0]->DropTable("c").ok());
  const absl::Status trained = t->Train(Pipeline(1, 0).get());
  ASSERT_TRUE(trained.ok()) << trained;
  EXPECT_EQ(t->stats().tables_redeclared, 1);
  EXPECT_GT(t->stats().steps, 0);
}

// A trainer told to stop does not bring back a table dropped under it (its
// job may have ended and its tables been dropped on purpose): the error
// stands.
TEST_F(TrainerTest, AStoppedTrainerDoesNotDeclareADroppedTableAgain) {
  Cluster cluster(1);
  auto t = MakeTrainer(cluster, "lr", 2);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(cluster.shards[0]->DropTable("c").ok());
  t->Stop();
  absl::Status st = t->Train(Pipeline(1, 0).get());
  EXPECT_EQ(t->stats().tables_redeclared, 0);
  EXPECT_TRUE(st.ok() || absl::IsNotFound(st)) << st;
  EXPECT_EQ(cluster.shards[0]->Stats().tables.size(), 0u);
}

}  // namespace
}  // namespace brook::trainer

namespace brook::trainer {
namespace {

TEST_F(TrainerTest, PerTableOptimizersOverrideTheEmbeddingOptimizer) {
  Cluster cluster(1);
  TrainerOptions o;
  ps::OptimizerOptions ftrl;
  ftrl.kind = ps::OptimizerKind::kFtrl;
  ftrl.learning_rate = 0.05f;
  o.table_optimizers["c_wide"] = ftrl;
  auto t = MakeTrainer(cluster, "wide_deep", 0, o);
  ASSERT_NE(t, nullptr);
  // The tables exist with their own optimizers: re-creating one with the
  // same options is a no-op, with other options a conflict.
  auto table_like = [&](const std::string& name, int dim, const ps::OptimizerOptions& opt) {
    ps::TableOptions table;
    table.name = name;
    table.dim = dim;
    table.seed = o.seed ^ std::hash<std::string>{}(name);
    table.optimizer = opt;
    table.initializer = dim == 1 ? ps::InitializerOptions{} : o.embedding_init;
    if (dim == 1) table.initializer.kind = ps::InitializerKind::kZeros;
    table.memory_budget_bytes = o.table_memory_budget_bytes;
    return cluster.client->CreateTable(table);
  };
  ps::OptimizerOptions deep = o.embedding_optimizer;
  deep.learning_rate = 0.1f;  // MakeTrainer's
  EXPECT_TRUE(table_like("c_wide", 1, ftrl).ok());
  EXPECT_EQ(table_like("c_wide", 1, deep).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(table_like("c", 4, deep).ok());
}

}  // namespace
}  // namespace brook::trainer

namespace brook::trainer {
namespace {

TEST_F(TrainerTest, InFlightStepsStayWithinTheStalenessBoundAndDrainToZero) {
  Cluster cluster(2);
  auto t = MakeTrainer(cluster, "wide_deep", /*staleness=*/3);
  ASSERT_NE(t, nullptr);
  std::atomic<bool> done{false};
  int64_t most = 0;
  std::thread watcher([&] {
    while (!done.load()) {
      most = std::max(most, t->stats().in_flight_steps);
      std::this_thread::yield();
    }
  });
  ASSERT_TRUE(t->Train(Pipeline(2, 0, 16).get()).ok());
  done.store(true);
  watcher.join();
  EXPECT_LE(most, 4);  // staleness + 1
  EXPECT_GE(most, 1);
  EXPECT_EQ(t->stats().in_flight_steps, 0);
}

// Forwards every call to `inner` and records, per PullBatch / PushBatch
// call, the (table, key) pairs it carried.
class RecordingPsClient final : public ps::PsClient {
 public:
  using Keys = std::set<std::pair<std::string, uint64_t>>;
  explicit RecordingPsClient(ps::PsClient* inner)
      : PsClient(inner->num_shards(), inner->client_id()), inner_(inner) {}

  absl::Status CreateTable(const ps::TableOptions& o) override { return inner_->CreateTable(o); }
  absl::Status DropTable(std::string_view t) override { return inner_->DropTable(t); }
  absl::StatusOr<ps::DroppedTables> DropTablesWithPrefix(std::string_view p) override {
    return inner_->DropTablesWithPrefix(p);
  }
  absl::Status Pull(std::string_view t, absl::Span<const uint64_t> k,
                    absl::Span<float> out) override {
    return inner_->Pull(t, k, out);
  }
  absl::Status Push(std::string_view t, absl::Span<const uint64_t> k, absl::Span<const float> g,
                    int64_t step) override {
    return inner_->Push(t, k, g, step);
  }
  absl::Status CreateDense(absl::Span<const ps::DenseOptions> v) override {
    return inner_->CreateDense(v);
  }
  absl::Status PullDense(std::string_view n, absl::Span<float> out) override {
    return inner_->PullDense(n, out);
  }
  absl::Status PushDense(std::string_view n, absl::Span<const float> g, int64_t step) override {
    return inner_->PushDense(n, g, step);
  }
  absl::Status PullBatch(absl::Span<const ps::TablePull> tables,
                         absl::Span<const ps::DensePull> dense) override {
    Keys& keys = pulls.emplace_back();
    for (const ps::TablePull& t : tables) {
      for (uint64_t k : t.keys) keys.insert({std::string(t.table), k});
    }
    return inner_->PullBatch(tables, dense);
  }
  using PsClient::PushBatch;
  absl::Status PushBatch(absl::Span<const ps::TablePush> tables,
                         absl::Span<const ps::DensePush> dense, int64_t step, float scale,
                         const ps::PushStream& stream) override {
    Keys& keys = pushes.emplace_back();
    for (const ps::TablePush& t : tables) {
      for (uint64_t k : t.keys) keys.insert({std::string(t.table), k});
    }
    return inner_->PushBatch(tables, dense, step, scale, stream);
  }
  absl::StatusOr<std::vector<ps::ServerStats>> Stats() override { return inner_->Stats(); }
  absl::StatusOr<std::vector<ps::CheckpointInfo>> Checkpoint(
      const ps::CheckpointOptions& o) override {
    return inner_->Checkpoint(o);
  }
  absl::StatusOr<std::vector<ps::RestoreInfo>> Restore(const std::string& dir) override {
    return inner_->Restore(dir);
  }
  absl::StatusOr<std::vector<ps::ImportInfo>> ImportTables(const ps::ImportOptions& o) override {
    return inner_->ImportTables(o);
  }
  absl::StatusOr<std::vector<ps::StartupInfo>> FenceClients(
      absl::Span<const uint64_t> ids) override {
    return inner_->FenceClients(ids);
  }

  std::vector<Keys> pulls, pushes;  // per call

 private:
  ps::PsClient* const inner_;
};

// A job's row cache (cache: {rows, refresh_steps}): at staleness 0 step i
// pulls (PullBatch call i, the dense variables every step) and pushes
// (PushBatch call i, every key it used): every key a step uses was pulled
// from the PS at most refresh_steps - 1 steps before; most rows come from
// the cache; refresh 1 trains exactly as no cache; refresh 4 costs little.
TEST_F(TrainerTest, TheRowCacheServesNoRowOlderThanItsRefresh) {
  auto train = [&](int64_t refresh, RecordingPsClient** recorded, TrainerStats* stats) {
    Cluster cluster(2);
    auto recorder = std::make_unique<RecordingPsClient>(cluster.client.get());
    TrainerOptions o;
    o.staleness = 0;
    o.embedding_optimizer.learning_rate = 0.1f;
    o.dense_optimizer.learning_rate = 0.01f;
    if (refresh > 0) o.cache = {.rows = 1000, .refresh_steps = refresh};
    auto t = Trainer::Create(recorder.get(), Model(features_, "wide_deep"), features_, o,
                             backend_.get());
    EXPECT_TRUE(t.ok()) << t.status();
    EXPECT_TRUE((*t)->Setup().ok());
    EXPECT_TRUE((*t)->Train(Pipeline(2, 300).get()).ok());
    *stats = (*t)->stats();
    auto r = (*t)->Evaluate(Pipeline(1, 0).get());
    EXPECT_TRUE(r.ok());
    static std::vector<std::unique_ptr<RecordingPsClient>> keep;  // for *recorded
    keep.push_back(std::move(recorder));
    if (recorded != nullptr) *recorded = keep.back().get();
    return r.ok() ? r->auc : 0.0;
  };
  TrainerStats none_stats, one_stats, four_stats;
  RecordingPsClient* four = nullptr;
  const double none = train(0, nullptr, &none_stats);
  const double one = train(1, nullptr, &one_stats);
  const double cached = train(4, &four, &four_stats);
  EXPECT_EQ(none_stats.cache_hits + none_stats.cache_misses, 0);
  EXPECT_EQ(one, none);  // refresh 1: every row pulled every step
  EXPECT_EQ(one_stats.cache_hits, 0);
  EXPECT_NEAR(cached, none, 0.01);

  const int64_t steps = four_stats.steps;
  ASSERT_GT(steps, 50);
  // PullBatch calls: the initial Setup has none; training's one per step,
  // then evaluation's. PushBatch: one per step.
  ASSERT_EQ(static_cast<int64_t>(four->pushes.size()), steps);
  ASSERT_GE(static_cast<int64_t>(four->pulls.size()), steps);
  std::map<std::pair<std::string, uint64_t>, int64_t> pulled_at;
  int64_t used = 0, served = 0;
  for (int64_t i = 0; i < steps; ++i) {
    for (const auto& k : four->pulls[i]) pulled_at[k] = i;
    for (const auto& k : four->pushes[i]) {
      auto it = pulled_at.find(k);
      ASSERT_NE(it, pulled_at.end()) << k.first << " " << k.second << " at step " << i;
      EXPECT_LT(i - it->second, 4) << k.first << " " << k.second << " at step " << i;
      ++used;
      served += four->pulls[i].count(k) == 0;
    }
  }
  EXPECT_EQ(four_stats.cache_hits, served);
  EXPECT_EQ(four_stats.cache_hits + four_stats.cache_misses, used);
  // 50 ids, nearly all in every batch of 64: about 3 of 4 steps hit.
  EXPECT_GT(static_cast<double>(served) / static_cast<double>(used), 0.6);
}

}  // namespace
}  // namespace brook::trainer

namespace brook::trainer {
namespace {

// The wrapped backend, except that the first device_stats() blocks until
// Release() (or 10 s), as a CUDA backend's first one loads NVML.
class SlowFirstDeviceStatsBackend final : public Backend {
 public:
  explicit SlowFirstDeviceStatsBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  // True once the first device_stats() is blocked.
  bool WaitUntilBlocked() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return blocked_; });
  }
  bool still_blocked() const {
    std::lock_guard<std::mutex> lock(mu_);
    return blocked_ && !released_;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

  std::optional<DeviceStats> device_stats() const override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!blocked_) {
      blocked_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, std::chrono::seconds(10), [&] { return released_; });
      released_ = true;
    }
    return DeviceStats{};
  }

  std::string_view name() const override { return inner_->name(); }
  absl::StatusOr<std::unique_ptr<Buffer>> Alloc(DType dtype, size_t n) override {
    return inner_->Alloc(dtype, n);
  }
  absl::Status Upload(absl::Span<const float> src, Buffer* dst, size_t offset) override {
    return inner_->Upload(src, dst, offset);
  }
  absl::Status Upload(absl::Span<const uint32_t> src, Buffer* dst, size_t offset) override {
    return inner_->Upload(src, dst, offset);
  }
  absl::Status Download(const Buffer& src, size_t offset, absl::Span<float> dst) override {
    return inner_->Download(src, offset, dst);
  }
  absl::Status Fill(float value, size_t n, size_t offset, Buffer* x) override {
    return inner_->Fill(value, n, offset, x);
  }
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const Buffer& a, const Buffer& b, float beta, Buffer* c) override {
    return inner_->Gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
  }
  absl::Status Copy2D(int64_t rows, int64_t cols, const Buffer& src, int64_t src_stride,
                      int64_t src_offset, Buffer* dst, int64_t dst_stride, int64_t dst_offset,
                      bool accumulate) override {
    return inner_->Copy2D(rows, cols, src, src_stride, src_offset, dst, dst_stride, dst_offset,
                          accumulate);
  }
  absl::Status BiasActivation(Activation act, int64_t rows, int64_t cols, const Buffer& bias,
                              Buffer* x) override {
    return inner_->BiasActivation(act, rows, cols, bias, x);
  }
  absl::Status ActivationBackward(Activation act, int64_t n, const Buffer& y, Buffer* dy) override {
    return inner_->ActivationBackward(act, n, y, dy);
  }
  absl::Status BiasBackward(int64_t rows, int64_t cols, const Buffer& dx, bool accumulate,
                            Buffer* dbias) override {
    return inner_->BiasBackward(rows, cols, dx, accumulate, dbias);
  }
  absl::Status Dropout(int64_t n, float rate, uint64_t seed, Buffer* x, Buffer* mask) override {
    return inner_->Dropout(n, rate, seed, x, mask);
  }
  absl::Status Mul(int64_t n, const Buffer& x, Buffer* y) override { return inner_->Mul(n, x, y); }
  absl::Status PoolForward(Combiner combiner, int64_t batch, int64_t dim, const Buffer& offsets,
                           const Buffer& indices, const Buffer& table, int64_t num_rows,
                           Buffer* out, int64_t out_stride, int64_t out_offset,
                           bool accumulate) override {
    return inner_->PoolForward(combiner, batch, dim, offsets, indices, table, num_rows, out,
                               out_stride, out_offset, accumulate);
  }
  absl::Status PoolBackward(Combiner combiner, int64_t batch, int64_t dim, const Buffer& offsets,
                            const Buffer& indices, const Buffer& d_out, int64_t out_stride,
                            int64_t out_offset, Buffer* d_table, int64_t num_rows) override {
    return inner_->PoolBackward(combiner, batch, dim, offsets, indices, d_out, out_stride,
                                out_offset, d_table, num_rows);
  }
  absl::Status InteractionForward(int64_t batch, int64_t f, int64_t dim, const Buffer& x,
                                  Buffer* out) override {
    return inner_->InteractionForward(batch, f, dim, x, out);
  }
  absl::Status InteractionBackward(int64_t batch, int64_t f, int64_t dim, const Buffer& x,
                                   const Buffer& d_out, Buffer* dx) override {
    return inner_->InteractionBackward(batch, f, dim, x, d_out, dx);
  }
  absl::Status FmForward(int64_t batch, int64_t f, int64_t dim, const Buffer& x, bool accumulate,
                         Buffer* out) override {
    return inner_->FmForward(batch, f, dim, x, accumulate, out);
  }
  absl::Status FmBackward(int64_t batch, int64_t f, int64_t dim, const Buffer& x,
                          const Buffer& d_out, Buffer* dx) override {
    return inner_->FmBackward(batch, f, dim, x, d_out, dx);
  }
  absl::StatusOr<double> Loss(LossKind kind, int64_t n, const Buffer& logits, const Buffer& labels,
                              float grad_scale, Buffer* predictions, Buffer* d_logits) override {
    return inner_->Loss(kind, n, logits, labels, grad_scale, predictions, d_logits);
  }

 private:
  const std::unique_ptr<Backend> inner_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable bool blocked_ = false, released_ = false;
};

// A metrics scrape stuck in device_stats() (NVML's first load on a GPU) must
// not stall training: the steps record their stats under a lock that
// stats() does not hold while it asks the device.
TEST_F(TrainerTest, ASlowDeviceStatsReadDoesNotStallTheSteps) {
  auto* slow = new SlowFirstDeviceStatsBackend(std::move(backend_));
  backend_.reset(slow);
  Cluster cluster(1);
  auto t = MakeTrainer(cluster, "wide_deep", /*staleness=*/2);
  ASSERT_NE(t, nullptr);
  std::thread scrape([&] { EXPECT_TRUE(t->stats().device.has_value()); });
  ASSERT_TRUE(slow->WaitUntilBlocked());
  ASSERT_TRUE(t->Train(Pipeline(1, 0).get()).ok());
  // Every step finished while the scrape was still waiting on the device.
  EXPECT_TRUE(slow->still_blocked());
  EXPECT_EQ(t->stats().steps, (kFiles * kPerFile + 63) / 64);
  slow->Release();
  scrape.join();
}

}  // namespace
}  // namespace brook::trainer
