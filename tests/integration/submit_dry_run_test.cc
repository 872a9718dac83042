// `brook submit --dry-run` with the real binary: the shipped Adult job spec
// validates against data made by `brook data convert` (in a temp dir laid
// out as the example's comment says), and a broken spec fails with exit
// code 2 and an error naming the field and its line. Without --dry-run and
// no chief listening, submit exits 4 naming the address.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::RunCommand;

// The first line of `output` that parses as a JSON object.
nlohmann::json FirstJson(const std::string& output) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("{\"", 0) != 0) continue;
    auto json = nlohmann::json::parse(line, nullptr, false);
    if (!json.is_discarded()) return json;
  }
  ADD_FAILURE() << "no JSON in: " << output;
  return {};
}

class SubmitDryRunTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    const std::string adult = testing::SharedDataDir() + "/adult";
    for (const char* split : {"train", "test"}) {
      auto r = RunCommand({BrookBinary(), "data", "convert", "--schema", "adult", "--shards", "2",
                           "--prefix", split, "--out", dir_->Join(std::string("data/") + split),
                           adult + "/adult." + split + ".csv"},
                          300);
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    job_ = testing::ReadFileOrDie(testing::SourceDir() + "/examples/adult/job.yaml");
    testing::WriteFileOrDie(dir_->Join("job.yaml"), job_);
  }
  static void TearDownTestSuite() { delete dir_; }

  static testing::TempDir* dir_;
  static std::string job_;
};

testing::TempDir* SubmitDryRunTest::dir_ = nullptr;
std::string SubmitDryRunTest::job_;

TEST_F(SubmitDryRunTest, AdultExampleValidatesAndPrintsTheCanonicalSpec) {
  auto r = RunCommand({BrookBinary(), "submit", dir_->Join("job.yaml"), "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json spec = FirstJson(r.output);
  EXPECT_EQ(spec["name"], "adult-wide-deep");
  EXPECT_EQ(spec["model"]["type"], "wide_deep");
  EXPECT_EQ(spec["data"]["train"][0], dir_->Join("data/train/train-*.tfrecord"));
  EXPECT_EQ(spec["training"]["epochs"], 4);
  EXPECT_EQ(spec["optimizer"]["embedding"]["type"], "adagrad");
  EXPECT_NE(r.output.find("data.train[0]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(": 2 files"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("job adult-wide-deep is valid (spec hash "), std::string::npos)
      << r.output;
}

TEST_F(SubmitDryRunTest, BrokenSpecExitsWithUsageErrorNamingTheField) {
  const std::string broken =
      absl::StrReplaceAll(job_, {{"learning_rate: 0.1,", "learning_rate: -0.1,"}});
  ASSERT_NE(broken, job_);
  testing::WriteFileOrDie(dir_->Join("broken.yaml"), broken);
  auto r = RunCommand({BrookBinary(), "submit", dir_->Join("broken.yaml"), "--dry-run"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("optimizer.embedding.learning_rate (line "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("must be a finite number > 0"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("{\""), std::string::npos) << r.output;
}

TEST_F(SubmitDryRunTest, GlobWithoutFilesExitsWithUsageError) {
  const std::string moved =
      absl::StrReplaceAll(job_, {{"data/train/train-", "data/nowhere/train-"}});
  testing::WriteFileOrDie(dir_->Join("moved.yaml"), moved);
  auto r = RunCommand({BrookBinary(), "submit", dir_->Join("moved.yaml"), "--dry-run"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("data.train[0]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("matches no file"), std::string::npos) << r.output;
}

// Without --dry-run the valid spec goes to the chief; with nothing listening
// at --chief the exit code is 4 and the message names the address.
TEST_F(SubmitDryRunTest, WithoutDryRunAndNoChiefExitsUnreachable) {
  auto r = RunCommand({BrookBinary(), "submit", dir_->Join("job.yaml"), "--chief", "127.0.0.1:1"});
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("chief at 127.0.0.1:1 unreachable"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("{\""), std::string::npos) << r.output;
}

// The same spec drives `brook trainer --job` (here cut short by an explicit
// --max-steps, which overrides the job's 4 epochs; the batch size is the
// job's), and its checkpoint and export sections are honoured: a model
// trained without a chief is kept, and `brook predict` scores the export.
TEST_F(SubmitDryRunTest, TrainerRunsFromTheJobSpecAndKeepsItsCheckpointAndExport) {
  const std::string job = absl::StrReplaceAll(job_, {{"/tmp/brook/", dir_->Join("out/")}});
  testing::WriteFileOrDie(dir_->Join("standalone.yaml"), job);
  auto r = RunCommand({BrookBinary(), "trainer", "--job", dir_->Join("standalone.yaml"),
                       "--local-ps", "2", "--max-steps", "20"},
                      300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json out = FirstJson(r.output);
  EXPECT_EQ(out["steps"], 20);
  EXPECT_EQ(out["examples"], 20 * 256);
  EXPECT_GT(out["eval"]["examples"].get<int64_t>(), 16000);  // data.eval: Adult's test split
  ASSERT_EQ(out["checkpoints"].size(), 1u) << out.dump();    // 600 s interval: the final one
  const std::string ckpt = out["checkpoints"][0];
  EXPECT_EQ(ckpt.rfind(dir_->Join("out/adult-wide-deep/ckpt/adult-wide-deep-"), 0), 0u) << ckpt;
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/shard-00000-of-00002/MANIFEST")) << ckpt;
  const std::string exported = out["export_dir"];
  EXPECT_EQ(exported.rfind(dir_->Join("out/adult-wide-deep/export/adult-wide-deep-"), 0), 0u);
  EXPECT_NE(r.output.find("brook trainer: exported to " + exported), std::string::npos) << r.output;
  auto predict = RunCommand({BrookBinary(), "predict", "--model", exported, "--data",
                             dir_->Join("data/test/test-*.tfrecord")},
                            300);
  ASSERT_EQ(predict.exit_code, 0) << predict.output;
  EXPECT_NE(predict.output.find("\"auc\""), std::string::npos) << predict.output;
}

// --export-dir without a job: the export records a spec made of the flags.
TEST_F(SubmitDryRunTest, TrainerWithoutAJobExportsToExportDir) {
  auto r = RunCommand({BrookBinary(), "trainer", "--local-ps", "1", "--spec",
                       dir_->Join("data/train/feature_spec.yaml"), "--model",
                       testing::SourceDir() + "/examples/adult/lr.yaml", "--data",
                       dir_->Join("data/train/train-*.tfrecord"), "--max-steps", "10",
                       "--export-dir", dir_->Join("flags-export")},
                      300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string exported = FirstJson(r.output)["export_dir"];
  EXPECT_EQ(exported.rfind(dir_->Join("flags-export/trainer-"), 0), 0u) << exported;
  auto predict = RunCommand({BrookBinary(), "predict", "--model", exported, "--data",
                             dir_->Join("data/test/test-*.tfrecord")},
                            300);
  EXPECT_EQ(predict.exit_code, 0) << predict.output;
}

// The dry run checks the output dirs as the chief does, making none.
TEST_F(SubmitDryRunTest, AnExportDirInsideAnotherRunsExportIsRefusedByTheDryRun) {
  const std::string old_export = dir_->Join("old-export");
  std::filesystem::create_directories(old_export + "/tables");
  testing::WriteFileOrDie(old_export + "/manifest.json", "{}");
  const std::string inside =
      absl::StrReplaceAll(job_, {{"export: {dir: /tmp/brook/adult-wide-deep/export}",
                                  "export: {dir: " + old_export + "/sub}"}});
  ASSERT_NE(inside, job_);
  testing::WriteFileOrDie(dir_->Join("inside.yaml"), inside);
  auto r = RunCommand({BrookBinary(), "submit", dir_->Join("inside.yaml"), "--dry-run"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("export.dir: " + old_export + "/sub is inside an export, " + old_export),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(old_export + "/sub"));
}

// A chief refuses training.steps; the dry run says so too, in its words.
TEST_F(SubmitDryRunTest, AStepBoundedSpecIsRefusedByTheDryRunAsTheChiefWould) {
  const std::string steps = absl::StrReplaceAll(job_, {{"epochs: 4", "steps: 100"}});
  ASSERT_NE(steps, job_);
  testing::WriteFileOrDie(dir_->Join("steps.yaml"), steps);
  auto r = RunCommand({BrookBinary(), "submit", dir_->Join("steps.yaml"), "--dry-run"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("training.steps: a chief runs jobs bounded by training.epochs"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("brook trainer --job"), std::string::npos) << r.output;
  // `brook local` refuses it before it starts a process.
  auto local = RunCommand({BrookBinary(), "local", dir_->Join("steps.yaml"), "--ps", "1",
                           "--trainers", "1", "--work-dir", dir_->Join("local-steps")},
                          120);
  EXPECT_EQ(local.exit_code, 2) << local.output;
  EXPECT_NE(local.output.find("training.steps: a chief runs jobs bounded by training.epochs"),
            std::string::npos)
      << local.output;
  EXPECT_EQ(local.output.find("chief listening"), std::string::npos) << local.output;
}

// data/train/* picks up the feature_spec.yaml `brook data convert` wrote
// beside the shards.
TEST_F(SubmitDryRunTest, AGlobThatPicksUpTheFeatureSpecIsRefusedNamingTheFile) {
  const std::string wide =
      absl::StrReplaceAll(job_, {{"data/train/train-*.tfrecord", "data/train/*"}});
  testing::WriteFileOrDie(dir_->Join("wide.yaml"), wide);
  auto r = RunCommand({BrookBinary(), "submit", dir_->Join("wide.yaml"), "--dry-run"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("matches " + dir_->Join("data/train/feature_spec.yaml") +
                          ", which is not a TFRecord file"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("{\""), std::string::npos) << r.output;
}

// A feature the spec names that the data does not have: an error under
// on_missing: error, a warning with its absence rate under default.
TEST_F(SubmitDryRunTest, AFeatureTheDataLacksIsNamedBeforeAnythingRuns) {
  std::string features = testing::ReadFileOrDie(dir_->Join("data/train/feature_spec.yaml"));
  const size_t list = features.find("features:\n");
  ASSERT_NE(list, std::string::npos) << features;
  features.insert(list + 10, "  - {name: agee, type: float, length: 1, default: 0}\n");
  for (const char* policy : {"error", "default"}) {
    std::string f = features;
    if (f.find("on_missing:") == std::string::npos) {
      f = absl::StrCat("on_missing: ", policy, "\n", f);
    } else {
      f = absl::StrReplaceAll(f, {{"on_missing: default", std::string("on_missing: ") + policy},
                                  {"on_missing: error", std::string("on_missing: ") + policy}});
    }
    testing::WriteFileOrDie(dir_->Join("typo_features.yaml"), f);
    testing::WriteFileOrDie(dir_->Join("typo.yaml"),
                            absl::StrReplaceAll(job_, {{"features: data/train/feature_spec.yaml",
                                                        "features: typo_features.yaml"}}));
    auto r = RunCommand({BrookBinary(), "submit", dir_->Join("typo.yaml"), "--dry-run"});
    EXPECT_NE(r.output.find("feature \"agee\""), std::string::npos) << policy << r.output;
    if (std::string(policy) == "error") {
      EXPECT_EQ(r.exit_code, 2) << r.output;
      EXPECT_NE(r.output.find("is the name right?"), std::string::npos) << r.output;
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.output;
      EXPECT_NE(r.output.find("brook submit: warning: "), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("absent from all 1000 of the first 1000 records (100.0%)"),
                std::string::npos)
          << r.output;
    }
  }
}

// A shard corrupt past the records the start-up check samples: training
// stops naming the file, the offset and the option; --on-corrupt skip
// trains past it and counts what it skipped.
TEST_F(SubmitDryRunTest, TrainerOnCorruptFailNamesTheOptionAndSkipCountsWhatItSkipped) {
  const std::string corrupt = dir_->Join("corrupt");
  std::filesystem::create_directories(corrupt);
  for (const char* shard : {"train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"}) {
    std::filesystem::copy_file(dir_->Join(std::string("data/train/") + shard),
                               corrupt + "/" + shard,
                               std::filesystem::copy_options::overwrite_existing);
  }
  const std::string victim = corrupt + "/train-00000-of-00002.tfrecord";
  std::string bytes = testing::ReadFileOrDie(victim);
  for (size_t i = 0; i < 64; ++i) bytes[bytes.size() * 9 / 10 + i] ^= 0x5a;
  testing::WriteFileOrDie(victim, bytes);
  const std::vector<std::string> common = {
      BrookBinary(),      "trainer",
      "--local-ps",       "1",
      "--spec",           dir_->Join("data/train/feature_spec.yaml"),
      "--model",          testing::SourceDir() + "/examples/adult/lr.yaml",
      "--data",           corrupt + "/train-*.tfrecord",
      "--shuffle-buffer", "0"};
  auto failed = RunCommand(common, 300);
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  EXPECT_NE(failed.output.find(victim), std::string::npos) << failed.output;
  EXPECT_NE(failed.output.find("offset"), std::string::npos) << failed.output;
  EXPECT_NE(failed.output.find("data.on_corrupt: skip"), std::string::npos) << failed.output;
  EXPECT_NE(failed.output.find("--on-corrupt skip"), std::string::npos) << failed.output;

  std::vector<std::string> skip = common;
  skip.insert(skip.end(), {"--on-corrupt", "skip"});
  auto skipped = RunCommand(skip, 300);
  ASSERT_EQ(skipped.exit_code, 0) << skipped.output;
  const nlohmann::json out = FirstJson(skipped.output);
  EXPECT_GE(out["skipped"]["corrupt_regions"].get<int64_t>(), 1) << out.dump();
  EXPECT_GE(out["skipped"]["corrupt_bytes"].get<int64_t>(), 64) << out.dump();
  // Every record but those in the damaged region trained.
  EXPECT_GT(out["examples"].get<int64_t>(), 32000) << out.dump();
  EXPECT_LT(out["examples"].get<int64_t>(), 32561) << out.dump();
  EXPECT_NE(skipped.output.find("brook trainer: skipped "), std::string::npos) << skipped.output;
}

}  // namespace
}  // namespace brook
