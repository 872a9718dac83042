// Model export against a real in-process PS (two shards, shared with another
// job): a wide & deep model trained for one epoch on planted-signal data is
// exported, the manifest says what is inside (spec, data hashes, tables,
// checkpoint), scoring the export reproduces scoring the live PS exactly,
// and broken or half-written exports are refused naming the file and field.
#include "chief/export/model_export.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "common/hash.h"
#include "common/version.h"
#include "datatools/example_builder.h"
#include "ps/client/local_ps_client.h"
#include "ps/client/prefixed_ps_client.h"
#include "storage/tfrecord.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/test_util.h"
#include "trainer/backend/cpu_backend.h"
#include "trainer/input/pipeline.h"
#include "trainer/trainer.h"

namespace brook::chief {
namespace {

namespace fs = std::filesystem;

// Label = 1 with probability sigmoid(w[id] + 0.8 x): learnable, not separable.
void WriteData(const std::string& path, uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::mt19937_64 wrng(5);  // the same ground truth in every file
  std::normal_distribution<float> normal;
  std::vector<float> w(50);
  for (float& v : w) v = normal(wrng) * 1.5f;
  auto writer = storage::TFRecordWriter::Open(path, {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  datatools::ExampleBuilder b;
  for (int i = 0; i < n; ++i) {
    const int64_t id = static_cast<int64_t>(rng() % w.size());
    const float x = normal(rng);
    const float p = 1.0f / (1.0f + std::exp(-(w[id] + 0.8f * x)));
    const float label = std::uniform_real_distribution<float>(0, 1)(rng) < p ? 1.0f : 0.0f;
    b.Clear();
    b.AddFloats("label", std::span<const float>(&label, 1));
    b.AddInt64s("c", std::span<const int64_t>(&id, 1));
    b.AddFloats("x", std::span<const float>(&x, 1));
    ASSERT_TRUE((*writer)->Write(b.Serialize()).ok());
  }
  ASSERT_TRUE((*writer)->Close().ok());
}

std::string SpecYaml(const std::string& dir, const std::string& standardize) {
  return absl::StrReplaceAll(R"(name: export-test
data: {train: [DIR/train-*.tfrecord], eval: [DIR/eval.tfrecord]}
features:
  label: {name: label, type: float}
  features:
    - {name: c, type: int64, kind: varlen}
    - {name: x, type: float, length: 1}
model: {type: wide_deep, embedding_dim: 4, hidden: [8]}
sparse:
  - {feature: c}
dense:
  - {feature: x, transform: standardize STD}
optimizer:
  embedding: {type: adagrad, learning_rate: 0.1}
  dense: {type: adam, learning_rate: 0.01}
training: {batch_size: 64, epochs: 1, staleness: 0, shuffle_buffer: 0}
)",
                             {{"DIR", dir}, {"STD", standardize}});
}

class ModelExportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new testing::TempDir();
    WriteData(data_->Join("train-0.tfrecord"), 1, 3000);
    WriteData(data_->Join("train-1.tfrecord"), 2, 3000);
    WriteData(data_->Join("eval.tfrecord"), 3, 2000);
  }
  static void TearDownTestSuite() { delete data_; }

  void SetUp() override {
    auto spec = JobSpec::FromYaml(SpecYaml(data_->path(), ", mean: 0, stddev: 1"), "");
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    // Another job shares the PS: exports hold whole shards, scoring only
    // ever reads this job's prefix.
    BROOK_ASSERT_OK(other_.CreateTable(testing::CounterTable("c", 4)));
    BROOK_ASSERT_OK(other_.CreateTable(testing::CounterTable("c_wide", 1)));
    auto backend = trainer::CreateCpuBackend({.num_threads = 1});
    ASSERT_TRUE(backend.ok());
    backend_ = std::move(*backend);
    auto t = trainer::Trainer::Create(&job_, spec_.model, spec_.features, spec_.ToTrainerOptions(),
                                      backend_.get());
    ASSERT_TRUE(t.ok()) << t.status();
    trainer_ = std::move(*t);
    BROOK_ASSERT_OK(trainer_->Setup());
    input::PipelineOptions o;
    o.files = TrainFiles();
    o.batch_size = spec_.training.batch_size;
    auto p = input::Pipeline::Create(spec_.features, o);
    ASSERT_TRUE(p.ok()) << p.status();
    BROOK_ASSERT_OK(trainer_->Train(p->get()));
  }

  static std::vector<std::string> TrainFiles() {
    return {data_->Join("train-0.tfrecord"), data_->Join("train-1.tfrecord")};
  }
  static std::vector<std::string> EvalFiles() { return {data_->Join("eval.tfrecord")}; }

  ExportRequest Request(const std::string& dir) {
    ExportRequest r;
    r.dir = dir;
    r.job_id = "job-1";
    r.table_prefix = "job-1/";
    r.step = trainer_->stats().steps;
    r.train_files = TrainFiles();
    r.eval_files = EvalFiles();
    return r;
  }

  static testing::TempDir* data_;
  testing::TempDir out_;
  JobSpec spec_;
  ps::LocalPsCluster cluster_{2};
  ps::PrefixedPsClient job_{cluster_.client.get(), "job-1/"};
  ps::PrefixedPsClient other_{cluster_.client.get(), "job-0/"};
  std::unique_ptr<trainer::Backend> backend_;
  std::unique_ptr<trainer::Trainer> trainer_;
};

testing::TempDir* ModelExportTest::data_ = nullptr;

std::string HashHex(const std::string& path) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(Hash64(testing::ReadFileOrDie(path))));
  return buf;
}

TEST_F(ModelExportTest, ManifestRecordsWhatIsInside) {
  auto live = ScoreModel(&job_, spec_, EvalFiles());
  ASSERT_TRUE(live.ok()) << live.status();
  ExportRequest req = Request(out_.Join("export"));
  req.eval = *live;
  auto written = WriteExport(cluster_.client.get(), spec_, req);
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_TRUE(fs::exists(out_.Join("export/manifest.json")));
  ASSERT_TRUE(fs::is_directory(out_.Join("export/tables/shard-00000-of-00002")));

  auto loaded = ReadExport(out_.Join("export"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const ExportManifest& m = loaded->manifest;
  EXPECT_EQ(m.format, "brook-export/1");
  EXPECT_EQ(m.job_id, "job-1");
  EXPECT_EQ(m.table_prefix, "job-1/");
  EXPECT_EQ(m.step, trainer_->stats().steps);
  EXPECT_GT(m.step, 90);  // 6000 examples / 64
  EXPECT_EQ(m.version, Version());
  EXPECT_EQ(m.commit, GitCommit());
  EXPECT_GT(m.created_unix_micros, 1600000000LL * 1000000);
  EXPECT_EQ(m.spec_hash, spec_.SpecHash());
  EXPECT_EQ(loaded->spec.CanonicalJson(), spec_.CanonicalJson());
  EXPECT_EQ(loaded->spec.SpecHash(), spec_.SpecHash());

  ASSERT_EQ(m.train_files.size(), 2u);
  ASSERT_EQ(m.eval_files.size(), 1u);
  for (const ExportedFile& f : m.train_files) {
    EXPECT_EQ(f.bytes, fs::file_size(f.path)) << f.path;
    EXPECT_EQ(f.xxh64, HashHex(f.path)) << f.path;
  }
  EXPECT_EQ(m.eval_files[0].path, EvalFiles()[0]);
  EXPECT_EQ(m.eval_files[0].xxh64, HashHex(EvalFiles()[0]));

  // wide & deep with one sparse feature: the deep table, its wide weight and
  // the dense layers, all under the prefix.
  std::vector<std::string> tables;
  for (const ExportedTable& t : m.tables) {
    tables.push_back(t.name);
    EXPECT_EQ(t.ps_name, "job-1/" + t.name);
    EXPECT_EQ(t.dim, t.name == "c" ? 4 : 1) << t.name;
  }
  EXPECT_NE(std::find(tables.begin(), tables.end(), "c"), tables.end());
  EXPECT_NE(std::find(tables.begin(), tables.end(), "c_wide"), tables.end());
  ASSERT_FALSE(m.dense.empty());
  for (const ExportedDense& d : m.dense) EXPECT_EQ(d.ps_name, "job-1/" + d.name);

  EXPECT_EQ(m.checkpoint_shards, 2);
  EXPECT_EQ(m.checkpoint_parts, (std::vector<std::string>{"tables/shard-00000-of-00002",
                                                          "tables/shard-00001-of-00002"}));
  EXPECT_GE(m.checkpoint_rows, 100u);  // 50 ids x 2 tables of this job, at least
  EXPECT_GT(m.checkpoint_bytes, 0u);
  ASSERT_TRUE(m.eval.has_value());
  EXPECT_EQ(m.eval->auc, live->auc);
  EXPECT_EQ(m.eval->examples, 2000);
  BROOK_EXPECT_OK(VerifyDataFiles(m));
}

TEST_F(ModelExportTest, ScoringTheExportReproducesTheLiveScoreExactly) {
  auto live = ScoreModel(&job_, spec_, EvalFiles());
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ(live->examples, 2000);
  EXPECT_GT(live->auc, 0.75);
  ASSERT_TRUE(WriteExport(cluster_.client.get(), spec_, Request(out_.Join("e"))).ok());

  auto exported = ScoreExport(out_.Join("e"), EvalFiles());
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->examples, live->examples);
  EXPECT_EQ(exported->auc, live->auc);
  EXPECT_EQ(exported->logloss, live->logloss);
  EXPECT_EQ(exported->accuracy, live->accuracy);
  EXPECT_EQ(exported->calibration, live->calibration);

  // The live PS was not changed by scoring: a second score is the same.
  auto again = ScoreModel(&job_, spec_, EvalFiles());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->auc, live->auc);
}

// Issue 23: job B's export carried job A's 26 tables. On shared PS nodes an
// export holds its own job's tables and dense variables, nothing else.
TEST_F(ModelExportTest, AnExportHoldsOnlyItsJobsTables) {
  const std::string dir = out_.Join("e");
  ASSERT_TRUE(WriteExport(cluster_.client.get(), spec_, Request(dir)).ok());
  ps::LocalPsCluster restored(1);
  BROOK_ASSERT_OK(restored.client->Restore(dir + "/tables").status());
  auto stats = restored.client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_FALSE((*stats)[0].tables.empty());
  ASSERT_FALSE((*stats)[0].dense.empty());
  for (const ps::TableStats& t : (*stats)[0].tables) {
    EXPECT_EQ(t.name.rfind("job-1/", 0), 0u) << t.name << " is not job-1's";
  }
  for (const ps::DenseStats& d : (*stats)[0].dense) {
    EXPECT_EQ(d.name.rfind("job-1/", 0), 0u) << d.name << " is not job-1's";
  }
}

// Issue 23: a shard manifest recorded absolute paths, so a copied export
// read the original (another model's rows once it was overwritten) or
// failed once it was gone. Moved or copied, an export reads itself.
TEST_F(ModelExportTest, AMovedOrCopiedExportScoresTheSameWithTheOriginalGone) {
  const std::string dir = out_.Join("e");
  ASSERT_TRUE(WriteExport(cluster_.client.get(), spec_, Request(dir)).ok());
  auto original = ScoreExport(dir, EvalFiles());
  ASSERT_TRUE(original.ok()) << original.status();
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    EXPECT_EQ(testing::ReadFileOrDie(entry.path().string()).find(dir), std::string::npos)
        << entry.path() << " names the export's own location";
  }

  fs::copy(dir, out_.Join("copy"), fs::copy_options::recursive);
  fs::rename(dir, out_.Join("moved"));
  for (const std::string& where : {out_.Join("copy"), out_.Join("moved")}) {
    auto r = ScoreExport(where, EvalFiles());
    ASSERT_TRUE(r.ok()) << where << ": " << r.status();
    EXPECT_EQ(r->auc, original->auc) << where;
    EXPECT_EQ(r->logloss, original->logloss) << where;
  }
}

// Each part's MANIFEST is pinned by manifest.json, and each file by its
// MANIFEST: a replaced or damaged file is refused, naming it.
TEST_F(ModelExportTest, ATamperedOrTruncatedExportFileIsRefusedNamingIt) {
  const std::string dir = out_.Join("e");
  ASSERT_TRUE(WriteExport(cluster_.client.get(), spec_, Request(dir)).ok());
  const std::string part = dir + "/tables/shard-00000-of-00002";
  const std::string rows = part + "/rows.tfrecord";
  const std::string saved = testing::ReadFileOrDie(rows);
  {
    std::string damaged = saved;
    damaged[damaged.size() / 2] ^= 0x40;  // same size, other bytes
    testing::WriteFileOrDie(rows, damaged);
  }
  auto r = ScoreExport(dir, EvalFiles());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_NE(r.status().message().find(rows), std::string::npos) << r.status();
  testing::WriteFileOrDie(rows, saved.substr(0, saved.size() - 10));
  r = ScoreExport(dir, EvalFiles());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_NE(r.status().message().find(rows), std::string::npos) << r.status();
  testing::WriteFileOrDie(rows, saved);
  BROOK_EXPECT_OK(ScoreExport(dir, EvalFiles()).status());

  // Another part's MANIFEST in its place (a part of another export).
  const std::string manifest = part + "/MANIFEST";
  const std::string good = testing::ReadFileOrDie(manifest);
  fs::copy_file(dir + "/tables/shard-00001-of-00002/MANIFEST", manifest,
                fs::copy_options::overwrite_existing);
  auto read = ReadExport(dir);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_NE(read.status().message().find(manifest), std::string::npos) << read.status();
  testing::WriteFileOrDie(manifest, good);
  BROOK_EXPECT_OK(ReadExport(dir).status());
}

TEST_F(ModelExportTest, ExportsAreNeverOverwrittenButHalfWrittenOnesAreRedone) {
  const std::string dir = out_.Join("e");
  ASSERT_TRUE(WriteExport(cluster_.client.get(), spec_, Request(dir)).ok());
  auto again = WriteExport(cluster_.client.get(), spec_, Request(dir));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();

  // Without its manifest the directory is not an export...
  fs::remove(dir + "/manifest.json");
  auto read = ReadExport(dir);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound) << read.status();
  EXPECT_NE(read.status().message().find("not a Brook export"), std::string::npos) << read.status();
  EXPECT_NE(read.status().message().find(dir), std::string::npos) << read.status();
  // ...and writing it again completes it.
  ASSERT_TRUE(WriteExport(cluster_.client.get(), spec_, Request(dir)).ok());
  BROOK_EXPECT_OK(ReadExport(dir));

  EXPECT_EQ(ReadExport(out_.Join("missing")).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelExportTest, BadManifestFieldsAreRefusedNamingTheField) {
  const std::string dir = out_.Join("e");
  ASSERT_TRUE(WriteExport(cluster_.client.get(), spec_, Request(dir)).ok());
  const std::string path = dir + "/manifest.json";
  const std::string good = testing::ReadFileOrDie(path);
  // Keys are sorted: each `from` first matches in the field named.
  struct Case {
    std::string from, to, field;
  };
  const std::vector<Case> cases = {
      {"\"format\": \"brook-export/1\"", "\"format\": \"brook-export/9\"", "'format'"},
      {"\"step\": ", "\"step\": \"x\", \"old_step\": ", "'step'"},
      {"\"job_id\": \"job-1\"", "\"job_id\": 7", "'job_id'"},
      {"\"xxh64\": \"", "\"xxh64\": \"zz", "'data.eval[0].xxh64'"},
      {"\"shards\": 2", "\"shards\": 3", "'checkpoint.parts'"},
      {"\"ps_name\": \"job-1/", "\"ps_name\": \"job-2/", "'model.dense[0].ps_name'"},
  };
  for (const Case& c : cases) {
    std::string bad = good;
    const size_t at = bad.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    bad.replace(at, c.from.size(), c.to);
    testing::WriteFileOrDie(path, bad);
    auto r = ReadExport(dir);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.to << ": " << r.status();
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status();
  }
  // A spec edited after the export no longer matches its hash.
  std::string edited = good;
  const std::string batch = "\"batch_size\": 64";
  ASSERT_NE(edited.find(batch), std::string::npos);
  edited.replace(edited.find(batch), batch.size(), "\"batch_size\": 65");
  testing::WriteFileOrDie(path, edited);
  EXPECT_EQ(ReadExport(dir).status().code(), absl::StatusCode::kDataLoss);
  testing::WriteFileOrDie(path, "not json");
  EXPECT_EQ(ReadExport(dir).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelExportTest, RefusesWhatItCannotExportOrScore) {
  ExportRequest req = Request(out_.Join("e"));
  req.table_prefix = "job-9/";  // no such job on the PS
  auto wrong = WriteExport(cluster_.client.get(), spec_, req);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition) << wrong.status();
  EXPECT_NE(wrong.status().message().find("job-9/"), std::string::npos) << wrong.status();
  EXPECT_FALSE(fs::exists(out_.Join("e/manifest.json")));

  req = Request(out_.Join("e"));
  req.eval_files.push_back(data_->Join("nope.tfrecord"));
  auto missing = WriteExport(cluster_.client.get(), spec_, req);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_NE(missing.status().message().find("nope.tfrecord"), std::string::npos);

  auto unstandardized = JobSpec::FromYaml(SpecYaml(data_->path(), ""), "");
  ASSERT_TRUE(unstandardized.ok()) << unstandardized.status();
  auto score = ScoreModel(&job_, *unstandardized, EvalFiles());
  EXPECT_EQ(score.status().code(), absl::StatusCode::kFailedPrecondition) << score.status();
  EXPECT_EQ(ScoreModel(&job_, spec_, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelExportTest, ChangedDataFilesAreNoticed) {
  testing::TempDir copy;
  const std::string file = copy.Join("eval.tfrecord");
  fs::copy_file(EvalFiles()[0], file);
  ExportRequest req = Request(out_.Join("e"));
  req.eval_files = {file};
  auto m = WriteExport(cluster_.client.get(), spec_, req);
  ASSERT_TRUE(m.ok()) << m.status();
  BROOK_EXPECT_OK(VerifyDataFiles(*m));
  std::string bytes = testing::ReadFileOrDie(file);
  bytes[bytes.size() / 2] ^= 1;
  testing::WriteFileOrDie(file, bytes);
  absl::Status st = VerifyDataFiles(*m);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(st.message().find(file), std::string::npos) << st;
}

// Every model type's spec comes back from its canonical JSON (as embedded in
// a manifest) with the same hash.
TEST(SpecFromCanonicalJsonTest, RoundTripsEveryModelType) {
  const std::vector<std::string> models = {
      "model: {type: lr}",
      "model: {type: wide_deep, embedding_dim: 4, hidden: [8], activation: "
      "tanh, dropout: 0.1}",
      "model: {type: deepfm, embedding_dim: 4, hidden: [8, 4]}",
      "model: {type: dlrm, embedding_dim: 4, bottom: [8, 4], top: [8]}",
  };
  for (const std::string& model : models) {
    const std::string yaml = absl::StrReplaceAll(R"(name: round-trip
data: {train: [/data/train-*.tfrecord]}
features:
  label: {name: label, type: float}
  features:
    - {name: c, type: int64, kind: varlen}
    - {name: d, type: int64, kind: varlen}
    - {name: x, type: float, length: 1}
MODEL
sparse:
  - {feature: c}
  - {feature: d, table: shared}
dense:
  - {feature: x, transform: standardize, mean: 0.5, stddev: 2}
optimizer:
  tables: {shared: {type: ftrl, learning_rate: 0.1, l1: 0.01}}
  schedule: {warmup_steps: 10, decay: cosine, decay_steps: 100, min_scale: 0.1}
training: {batch_size: 32, steps: 100}
checkpoint: {dir: /ckpt}
export: {dir: /export}
)",
                                                 {{"MODEL", model}});
    auto spec = JobSpec::FromYaml(yaml, "");
    ASSERT_TRUE(spec.ok()) << model << ": " << spec.status();
    auto back = SpecFromCanonicalJson(spec->CanonicalJson());
    ASSERT_TRUE(back.ok()) << model << ": " << back.status();
    EXPECT_EQ(back->CanonicalJson(), spec->CanonicalJson()) << model;
    EXPECT_EQ(back->SpecHash(), spec->SpecHash()) << model;
  }
}

}  // namespace
}  // namespace brook::chief
