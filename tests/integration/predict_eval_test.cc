// `brook predict` and `brook eval` on real exports: UCI Adult (../shared/data)
// converted with `brook data convert`, logistic regression trained for one
// epoch in this process against an in-process PS shared by two "jobs" (a
// trained one and an untrained one, each under its table prefix), exported
// with chief/export, then scored by the real binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "chief/export/model_export.h"
#include "chief/job/job_spec.h"
#include "ps/client/local_ps_client.h"
#include "ps/client/prefixed_ps_client.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/test_util.h"
#include "trainer/backend/cpu_backend.h"
#include "trainer/input/pipeline.h"
#include "trainer/model/quality_metrics.h"
#include "trainer/trainer.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::RunCommand;

// The last line of `output` that is a JSON object (stderr is interleaved).
nlohmann::json LastJson(const std::string& output) {
  size_t end = output.size();
  while (end > 0) {
    size_t start = output.rfind('\n', end - 1);
    start = start == std::string::npos ? 0 : start + 1;
    if (output.compare(start, 2, "{\"") == 0) {
      auto json = nlohmann::json::parse(output.substr(start, end - start), nullptr, false);
      if (!json.is_discarded()) return json;
    }
    if (start == 0) break;
    end = start - 1;
  }
  ADD_FAILURE() << "no JSON in: " << output;
  return {};
}

class PredictEvalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    const std::string adult = testing::SharedDataDir() + "/adult";
    for (const char* split : {"train", "test"}) {
      auto r = RunCommand(
          {BrookBinary(), "data", "convert", "--schema", "adult", "--shards", "2", "--prefix",
           split, "--out", dir_->Join(split), adult + "/adult." + split + ".csv"},
          300);
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    // lr.yaml with the standardize moments of the training split.
    std::string model = testing::ReadFileOrDie(testing::SourceDir() + "/examples/adult/lr.yaml");
    const std::string from = "{feature: education-num, transform: standardize}";
    ASSERT_NE(model.find(from), std::string::npos);
    model.replace(model.find(from), from.size(),
                  "{feature: education-num, transform: standardize, mean: 10.0807, "
                  "stddev: 2.5727}");
    const std::string yaml =
        "name: adult-lr\n"
        "data:\n"
        "  train: [" +
        dir_->Join("train") +
        "/train-*.tfrecord]\n"
        "  eval: [" +
        dir_->Join("test") +
        "/test-*.tfrecord]\n"
        "features: " +
        dir_->Join("train") + "/feature_spec.yaml\n" + model +
        "optimizer: {embedding: {type: adagrad, learning_rate: 0.1}}\n"
        "training: {batch_size: 128, epochs: 1, staleness: 0}\n";
    auto spec = chief::JobSpec::FromYaml(yaml, "");
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto matches = spec->CheckData();
    ASSERT_TRUE(matches.ok()) << matches.status();
    std::vector<std::string> train, eval;
    for (const auto& m : *matches) {
      std::vector<std::string>& files = m.field.rfind("data.train", 0) == 0 ? train : eval;
      files.insert(files.end(), m.files.begin(), m.files.end());
    }
    eval_files_ = new std::vector<std::string>(eval);

    // One PS, two jobs: "good" trains one epoch, "bad" is only declared
    // (every wide weight 0: AUC 0.5).
    ps::LocalPsCluster cluster(2);
    auto backend = trainer::CreateCpuBackend({});
    ASSERT_TRUE(backend.ok());
    for (const std::string job : {"good", "bad"}) {
      ps::PrefixedPsClient client(cluster.client.get(), job + "/");
      auto t = trainer::Trainer::Create(&client, spec->model, spec->features,
                                        spec->ToTrainerOptions(), backend->get());
      ASSERT_TRUE(t.ok()) << t.status();
      ASSERT_TRUE((*t)->Setup().ok());
      if (job == "good") {
        input::PipelineOptions o;
        o.files = train;
        o.batch_size = spec->training.batch_size;
        o.shuffle_buffer = 10000;
        auto p = input::Pipeline::Create(spec->features, o);
        ASSERT_TRUE(p.ok()) << p.status();
        ASSERT_TRUE((*t)->Train(p->get()).ok());
      }
      auto score = chief::ScoreModel(&client, *spec, eval);
      ASSERT_TRUE(score.ok()) << score.status();
      chief::ExportRequest req;
      req.dir = dir_->Join(job);
      req.job_id = job;
      req.table_prefix = job + "/";
      req.step = (*t)->stats().steps;
      req.eval = *score;
      req.train_files = train;
      req.eval_files = eval;
      auto m = chief::WriteExport(cluster.client.get(), *spec, req);
      ASSERT_TRUE(m.ok()) << m.status();
      std::cout << job << ": step " << req.step << ", AUC " << score->auc << "\n";
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete eval_files_;
  }

  static std::string Export(const std::string& job) { return dir_->Join(job); }
  static std::string TestGlob() { return dir_->Join("test") + "/test-*.tfrecord"; }

  static testing::TempDir* dir_;
  static std::vector<std::string>* eval_files_;
};

testing::TempDir* PredictEvalTest::dir_ = nullptr;
std::vector<std::string>* PredictEvalTest::eval_files_ = nullptr;

TEST_F(PredictEvalTest, PredictPrintsTheInProcessScore) {
  auto in_process = chief::ScoreExport(Export("good"), *eval_files_);
  ASSERT_TRUE(in_process.ok()) << in_process.status();
  auto r = RunCommand({BrookBinary(), "predict", "--model", Export("good"), "--data", TestGlob()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = LastJson(r.output);
  std::cout << j.dump() << "\n";
  EXPECT_EQ(j["job_id"], "good");
  EXPECT_EQ(j["examples"].get<int64_t>(), 16281);
  EXPECT_GE(j["auc"].get<double>(), 0.85) << j.dump();
  EXPECT_EQ(j["auc"].get<double>(), in_process->auc);
  EXPECT_EQ(j["logloss"].get<double>(), in_process->logloss);
  // The export recorded the live PS's score on the same files: the same.
  EXPECT_EQ(j["recorded_auc"].get<double>(), in_process->auc);
  for (const char* k : {"accuracy", "calibration", "mean_loss", "step"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }

  // Without --data: the eval files the export recorded.
  auto dflt = RunCommand({BrookBinary(), "predict", "--model", Export("good")});
  ASSERT_EQ(dflt.exit_code, 0) << dflt.output;
  EXPECT_EQ(LastJson(dflt.output)["auc"].get<double>(), in_process->auc);
}

// Issue 23: a shard manifest recorded absolute paths, so `brook predict`
// on a copied export read the original (or failed once it was gone). An
// export copied (cp -a), moved (mv) or carried in a tar, with the original
// gone from its path, scores exactly the same.
TEST_F(PredictEvalTest, AMovedOrCopiedExportScoresIdenticallyWithTheOriginalGone) {
  const std::string original = Export("good");
  auto before = RunCommand({BrookBinary(), "predict", "--model", original, "--data", TestGlob()});
  ASSERT_EQ(before.exit_code, 0) << before.output;
  const nlohmann::json want = LastJson(before.output);
  const std::string copy = dir_->Join("good-copy");
  const std::string moved = dir_->Join("good-moved");
  const std::string untarred = dir_->Join("good-untarred");
  ASSERT_EQ(RunCommand({"/bin/cp", "-a", original, copy}).exit_code, 0);
  ASSERT_EQ(
      RunCommand({"/bin/tar", "-C", dir_->path(), "-cf", dir_->Join("good.tar"), "good"}).exit_code,
      0);
  std::filesystem::create_directories(untarred);
  ASSERT_EQ(RunCommand({"/bin/tar", "-C", untarred, "-xf", dir_->Join("good.tar")}).exit_code, 0);
  // The original leaves its path (it comes back for the other tests).
  std::filesystem::rename(original, moved);
  struct PutBack {
    std::string from, to;
    ~PutBack() {
      std::error_code ec;
      std::filesystem::rename(from, to, ec);
    }
  } put_back{moved, original};
  for (const std::string& where : {copy, moved, untarred + "/good"}) {
    auto r = RunCommand({BrookBinary(), "predict", "--model", where, "--data", TestGlob()});
    ASSERT_EQ(r.exit_code, 0) << where << ": " << r.output;
    const nlohmann::json j = LastJson(r.output);
    for (const char* k :
         {"examples", "auc", "logloss", "accuracy", "calibration", "recorded_auc", "step"}) {
      EXPECT_EQ(j[k], want[k]) << where << ": " << k;
    }
  }
}

TEST_F(PredictEvalTest, PredictRefusesBadPathsWithUsageExit) {
  auto no_dir =
      RunCommand({BrookBinary(), "predict", "--model", dir_->Join("nope"), "--data", TestGlob()});
  EXPECT_EQ(no_dir.exit_code, 2) << no_dir.output;
  EXPECT_NE(no_dir.output.find(dir_->Join("nope")), std::string::npos) << no_dir.output;

  // A directory without manifest.json is not an export.
  auto not_export =
      RunCommand({BrookBinary(), "predict", "--model", dir_->Join("train"), "--data", TestGlob()});
  EXPECT_EQ(not_export.exit_code, 2) << not_export.output;
  EXPECT_NE(not_export.output.find("not a Brook export"), std::string::npos) << not_export.output;

  const std::string glob = dir_->Join("test") + "/nothing-*.tfrecord";
  auto no_match = RunCommand({BrookBinary(), "predict", "--model", Export("good"), "--data", glob});
  EXPECT_EQ(no_match.exit_code, 2) << no_match.output;
  EXPECT_NE(no_match.output.find(glob), std::string::npos) << no_match.output;

  // Data that is no TFRecord is refused before scoring, named (a glob that
  // picks up a text file beside the shards).
  testing::WriteFileOrDie(dir_->Join("junk.tfrecord"), "this is not a TFRecord file");
  auto junk = RunCommand(
      {BrookBinary(), "predict", "--model", Export("good"), "--data", dir_->Join("junk.tfrecord")});
  EXPECT_EQ(junk.exit_code, 2) << junk.output;
  EXPECT_NE(junk.output.find(dir_->Join("junk.tfrecord") + ", which is not a TFRecord file"),
            std::string::npos)
      << junk.output;
}

// A GZIP file whose name does not say so: the error says how to read it,
// and --compression gzip does.
TEST_F(PredictEvalTest, PredictReadsAGzipFileWithoutGzNameWithCompressionGzip) {
  const std::string shard = dir_->Join("test/test-00000-of-00002.tfrecord");
  const std::string hidden = dir_->Join("hidden-gzip.data");
  auto zipped = RunCommand({"/bin/sh", "-c", "gzip -c " + shard + " > " + hidden});
  ASSERT_EQ(zipped.exit_code, 0) << zipped.output;
  auto plain = RunCommand({BrookBinary(), "predict", "--model", Export("good"), "--data", hidden});
  EXPECT_EQ(plain.exit_code, 2) << plain.output;
  EXPECT_NE(plain.output.find("--compression gzip"), std::string::npos) << plain.output;
  auto told = RunCommand({BrookBinary(), "predict", "--model", Export("good"), "--data", hidden,
                          "--compression", "gzip"});
  ASSERT_EQ(told.exit_code, 0) << told.output;
  auto direct = RunCommand({BrookBinary(), "predict", "--model", Export("good"), "--data", shard});
  ASSERT_EQ(direct.exit_code, 0) << direct.output;
  // The same records, the same scores.
  const auto auc_of = [](const std::string& out) { return out.substr(out.find("\"auc\""), 30); };
  EXPECT_EQ(auc_of(told.output), auc_of(direct.output));
}

// The test split again, each record with an "example_id" ("row-N", N its
// index over both files in order), for --id-feature.
std::vector<std::string> WriteTestSplitWithIds(const std::string& glob, const std::string& out_dir,
                                               std::vector<float>* labels) {
  std::vector<std::string> out;
  std::vector<std::string> files;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(glob).parent_path())) {
    if (e.path().filename().string().rfind("test-", 0) == 0) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  std::filesystem::create_directories(out_dir);
  int n = 0;
  for (const std::string& file : files) {
    auto reader = storage::TFRecordReader::Open(file, {});
    EXPECT_TRUE(reader.ok()) << reader.status();
    const std::string path = out_dir + "/" + std::filesystem::path(file).filename().string();
    auto writer = storage::TFRecordWriter::Open(path, {});
    EXPECT_TRUE(writer.ok()) << writer.status();
    if (!reader.ok() || !writer.ok()) return out;
    std::string_view record;
    absl::StatusOr<bool> more;
    while ((more = (*reader)->Next(&record)).ok() && *more) {
      tf::Example e;
      EXPECT_TRUE(e.ParseFromArray(record.data(), static_cast<int>(record.size())));
      auto& features = *e.mutable_features()->mutable_feature();
      labels->push_back(features["label"].has_int64_list()
                            ? features["label"].int64_list().value(0)
                            : features["label"].float_list().value(0));
      features["example_id"].mutable_bytes_list()->add_value("row-" + std::to_string(n++));
      EXPECT_TRUE((*writer)->Write(e.SerializeAsString()).ok());
    }
    EXPECT_TRUE((*writer)->Close().ok());
    out.push_back(path);
  }
  return out;
}

TEST_F(PredictEvalTest, PredictWritesCsvScoresWhoseAucIsThePrintedAuc) {
  const std::string csv = dir_->Join("scores.csv");
  auto r = RunCommand(
      {BrookBinary(), "predict", "--model", Export("good"), "--data", TestGlob(), "--output", csv});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = LastJson(r.output);
  EXPECT_EQ(j["output"], csv);
  EXPECT_EQ(j["rows"].get<int64_t>(), 16281);
  const std::vector<std::string> lines =
      absl::StrSplit(testing::ReadFileOrDie(csv), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 16282u);
  EXPECT_EQ(lines[0], "label,score");
  std::vector<float> labels, scores;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    ASSERT_EQ(cells.size(), 2u) << lines[i];
    labels.push_back(std::stof(cells[0]));
    scores.push_back(std::stof(cells[1]));
    ASSERT_TRUE(labels.back() == 0 || labels.back() == 1) << lines[i];
    ASSERT_TRUE(scores.back() > 0 && scores.back() < 1) << lines[i];
  }
  EXPECT_EQ(trainer::Auc(scores, labels), j["auc"].get<double>());
  EXPECT_EQ(trainer::LogLoss(scores, labels), j["logloss"].get<double>());
  EXPECT_FALSE(std::filesystem::exists(csv + ".tmp"));
}

TEST_F(PredictEvalTest, PredictWritesTfRecordScoresWithTheIdOfEachRecord) {
  std::vector<float> want_labels;
  const std::vector<std::string> files =
      WriteTestSplitWithIds(TestGlob(), dir_->Join("ided"), &want_labels);
  ASSERT_EQ(files.size(), 2u);
  ASSERT_EQ(want_labels.size(), 16281u);
  const std::string out = dir_->Join("scores.tfrecord");
  std::vector<std::string> argv = {BrookBinary(),  "predict",    "--model",
                                   Export("good"), "--output",   out,
                                   "--id-feature", "example_id", "--data"};
  argv.insert(argv.end(), files.begin(), files.end());
  auto r = RunCommand(argv);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = LastJson(r.output);
  EXPECT_EQ(j["rows"].get<int64_t>(), 16281);

  auto reader = storage::TFRecordReader::Open(out, {});
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> labels, scores;
  std::string_view record;
  absl::StatusOr<bool> more;
  for (int n = 0; (more = (*reader)->Next(&record)).ok() && *more; ++n) {
    tf::Example e;
    ASSERT_TRUE(e.ParseFromArray(record.data(), static_cast<int>(record.size())));
    const auto& f = e.features().feature();
    ASSERT_EQ(f.size(), 3u);
    EXPECT_EQ(f.at("example_id").bytes_list().value(0), "row-" + std::to_string(n));
    labels.push_back(f.at("label").float_list().value(0));
    scores.push_back(f.at("score").float_list().value(0));
  }
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(labels, want_labels);  // each score beside its own record's label
  EXPECT_EQ(trainer::Auc(scores, labels), j["auc"].get<double>());

  // The same as CSV: the id column first, under the feature's name.
  const std::string csv = dir_->Join("ided.csv");
  argv[5] = csv;
  auto c = RunCommand(argv);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const std::string text = testing::ReadFileOrDie(csv);
  EXPECT_EQ(text.substr(0, text.find('\n', text.find('\n') + 1)),
            absl::StrFormat("example_id,label,score\nrow-0,%g,%.9g", labels[0], scores[0]));
}

TEST_F(PredictEvalTest, PredictOutputErrorsNameTheProblemAndWriteNothing) {
  const std::string txt = dir_->Join("scores.txt");
  auto bad_ext = RunCommand(
      {BrookBinary(), "predict", "--model", Export("good"), "--data", TestGlob(), "--output", txt});
  EXPECT_EQ(bad_ext.exit_code, 2) << bad_ext.output;
  EXPECT_NE(bad_ext.output.find("brook predict: --output " + txt +
                                ": unknown file type; the extension picks it: .csv, "
                                ".tfrecord or .tfrecords (.tfrecord.gz for GZIP)"),
            std::string::npos)
      << bad_ext.output;
  EXPECT_FALSE(std::filesystem::exists(txt));

  auto no_output =
      RunCommand({BrookBinary(), "predict", "--model", Export("good"), "--id-feature", "x"});
  EXPECT_EQ(no_output.exit_code, 2) << no_output.output;
  EXPECT_NE(no_output.output.find("--id-feature needs --output"), std::string::npos)
      << no_output.output;

  // The Adult test split has no example_id: scoring fails naming the record.
  const std::string csv = dir_->Join("no-ids.csv");
  auto missing = RunCommand({BrookBinary(), "predict", "--model", Export("good"), "--data",
                             TestGlob(), "--output", csv, "--id-feature", "example_id"});
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("--id-feature example_id: missing in record 0 "
                                "of " +
                                dir_->Join("test") + "/test-"),
            std::string::npos)
      << missing.output;
  EXPECT_FALSE(std::filesystem::exists(csv));
  EXPECT_FALSE(std::filesystem::exists(csv + ".tmp"));
}

TEST_F(PredictEvalTest, EvalGatesOnTheBaseline) {
  // The same model as its own baseline: no difference, passes.
  auto same = RunCommand({BrookBinary(), "eval", "--model", Export("good"), "--baseline",
                          Export("good"), "--data", TestGlob()});
  EXPECT_EQ(same.exit_code, 0) << same.output;
  nlohmann::json j = LastJson(same.output);
  EXPECT_EQ(j["verdict"], "ok");
  EXPECT_EQ(j["difference"]["auc"].get<double>(), 0.0);
  EXPECT_GE(j["model"]["auc"].get<double>(), 0.85);

  // An untrained model against the trained baseline: worse, exit 1.
  auto worse = RunCommand({BrookBinary(), "eval", "--model", Export("bad"), "--baseline",
                           Export("good"), "--data", TestGlob()});
  EXPECT_EQ(worse.exit_code, 1) << worse.output;
  j = LastJson(worse.output);
  std::cout << j.dump() << "\n";
  EXPECT_EQ(j["verdict"], "worse");
  EXPECT_LT(j["difference"]["auc"].get<double>(), -0.3);
  EXPECT_NE(worse.output.find("worse than the baseline"), std::string::npos);

  // By logloss too; and the other way round it passes.
  auto by_logloss = RunCommand({BrookBinary(), "eval", "--model", Export("bad"), "--baseline",
                                Export("good"), "--metric", "logloss"});
  EXPECT_EQ(by_logloss.exit_code, 1) << by_logloss.output;
  auto better = RunCommand({BrookBinary(), "eval", "--model", Export("good"), "--baseline",
                            Export("bad"), "--data", TestGlob(), "--margin", "0"});
  EXPECT_EQ(better.exit_code, 0) << better.output;

  auto bad_baseline = RunCommand({BrookBinary(), "eval", "--model", Export("good"), "--baseline",
                                  dir_->Join("nope"), "--data", TestGlob()});
  EXPECT_EQ(bad_baseline.exit_code, 2) << bad_baseline.output;
  EXPECT_NE(bad_baseline.output.find(dir_->Join("nope")), std::string::npos);
}

}  // namespace
}  // namespace brook
