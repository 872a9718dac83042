// The quality bars of the trainer on real data: UCI Adult (../shared/data)
// converted with `brook data convert`, trained with the real `brook trainer`
// binary against in-process PS shards (--local-ps), evaluated on the held-out
// test split. scikit-learn on this machine: logistic regression 0.905, boosted
// trees 0.927 (../shared/NOTES.md). The model specs are the shipped examples.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "tests/testing/process.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::RunCommand;

// The last line of `output` that is a JSON object (the trainer prints its
// evaluation as one; stderr lines are interleaved).
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

class TrainerAdultTest : public ::testing::Test {
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
  }
  static void TearDownTestSuite() { delete dir_; }

  // Trains `model` and returns the evaluation JSON printed on stdout.
  nlohmann::json Train(const std::string& model, std::vector<std::string> extra) {
    std::vector<std::string> argv = {
        BrookBinary(), "trainer",
        "--local-ps",  "2",
        "--spec",      dir_->Join("train") + "/feature_spec.yaml",
        "--model",     testing::SourceDir() + "/examples/adult/" + model,
        "--data",      dir_->Join("train") + "/train-*.tfrecord",
        "--eval-data", dir_->Join("test") + "/test-*.tfrecord"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto r = RunCommand(argv, 600);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    nlohmann::json json = LastJson(r.output);
    std::cout << model << ": " << json.dump() << "\n";
    return json;
  }

  static testing::TempDir* dir_;
};

testing::TempDir* TrainerAdultTest::dir_ = nullptr;

// The AUC bars that train for several epochs: "Quality" in the name keeps
// them out of the ASan tier (scripts/test.sh), where -O0 makes each take
// about 40 s and they reach no code the tests of TrainerAdultTest do not.
class TrainerAdultQualityTest : public TrainerAdultTest {};

TEST_F(TrainerAdultTest, LogisticRegressionReachesAuc090) {
  nlohmann::json r =
      Train("lr.yaml", {"--epochs", "4", "--batch-size", "128", "--embedding-lr", "0.1"});
  ASSERT_TRUE(r.contains("eval")) << r.dump();
  EXPECT_EQ(r["eval"]["examples"].get<int64_t>(), 16281);
  EXPECT_GE(r["eval"]["auc"].get<double>(), 0.90) << r.dump();
  EXPECT_NEAR(r["eval"]["calibration"].get<double>(), 1.0, 0.15) << r.dump();
}

TEST_F(TrainerAdultQualityTest, WideAndDeepReachesAuc091) {
  nlohmann::json r = Train("wide_deep.yaml", {"--epochs", "4", "--batch-size", "128", "--dense-lr",
                                              "0.003", "--embedding-lr", "0.1"});
  ASSERT_TRUE(r.contains("eval")) << r.dump();
  EXPECT_GE(r["eval"]["auc"].get<double>(), 0.91) << r.dump();
}

TEST_F(TrainerAdultQualityTest, DeepFmReachesAuc091) {
  nlohmann::json r = Train("deepfm.yaml", {"--epochs", "4", "--batch-size", "128", "--dense-lr",
                                           "0.003", "--embedding-lr", "0.1"});
  ASSERT_TRUE(r.contains("eval")) << r.dump();
  EXPECT_GE(r["eval"]["auc"].get<double>(), 0.91) << r.dump();
}

TEST_F(TrainerAdultQualityTest, SynchronousAndStaleTrainingAgree) {
  // Staleness 0 (every pull sees every earlier push) vs 4 batches in flight,
  // one trainer: the asynchrony costs at most 0.005 AUC here.
  nlohmann::json sync = Train("wide_deep.yaml", {"--epochs", "2", "--staleness", "0", "--dense-lr",
                                                 "0.003", "--embedding-lr", "0.1"});
  nlohmann::json stale = Train("wide_deep.yaml", {"--epochs", "2", "--staleness", "4", "--dense-lr",
                                                  "0.003", "--embedding-lr", "0.1"});
  ASSERT_TRUE(sync.contains("eval") && stale.contains("eval"));
  EXPECT_NEAR(stale["eval"]["auc"].get<double>(), sync["eval"]["auc"].get<double>(), 0.005);
}

// The tables' wire precision (--wire, a job's tables.default.wire): rows
// and gradients rounded to bf16 or fp16 on their way cost at most 0.001 AUC
// against fp32 (issue 27), and the payload bytes per example drop by the
// values' half (keys stay 8 bytes: at Adult's dim 8, 37 -> 24 bytes).
TEST_F(TrainerAdultQualityTest, HalfPrecisionOnTheWireKeepsTheAuc) {
  const std::vector<std::string> flags = {"--epochs",       "4",   "--batch-size", "128",
                                          "--staleness",    "0",   "--dense-lr",   "0.003",
                                          "--embedding-lr", "0.1", "--seed",       "1"};
  auto with = [&](const char* wire) {
    std::vector<std::string> f = flags;
    f.insert(f.end(), {"--wire", wire});
    return Train("wide_deep.yaml", f);
  };
  nlohmann::json fp32 = with("fp32"), bf16 = with("bf16"), fp16 = with("fp16");
  ASSERT_TRUE(fp32.contains("eval") && bf16.contains("eval") && fp16.contains("eval"));
  const double auc = fp32["eval"]["auc"].get<double>();
  EXPECT_NEAR(bf16["eval"]["auc"].get<double>(), auc, 0.001);
  EXPECT_NEAR(fp16["eval"]["auc"].get<double>(), auc, 0.001);
  for (const char* call : {"pull", "push"}) {
    const double full = fp32["ps_payload_bytes_per_example"][call].get<double>();
    const double half = bf16["ps_payload_bytes_per_example"][call].get<double>();
    EXPECT_GT(full, 0) << call;
    EXPECT_LT(half, 0.7 * full) << call;
    EXPECT_EQ(fp16["ps_payload_bytes_per_example"][call].get<double>(), half) << call;
  }
}

// Two `brook trainer` processes, each on half of the training files, push
// asynchronously (staleness 4) into two real `brook ps` processes over
// 127.0.0.1; a third evaluates what the PS holds. Against one synchronous
// trainer on all the files for the same epochs (same examples, same number
// of updates in total) the AUC is within 0.005. The model spec gives the
// standardize moments (computed from the full training split) so that
// every trainer transforms alike, whatever files it reads.
TEST_F(TrainerAdultTest, TwoAsynchronousTrainersMatchOneSynchronous) {
  testing::TempDir work;
  std::string spec =
      testing::ReadFileOrDie(testing::SourceDir() + "/examples/adult/wide_deep.yaml");
  const std::string from = "{feature: education-num, transform: standardize}";
  ASSERT_NE(spec.find(from), std::string::npos);
  spec.replace(spec.find(from), from.size(),
               "{feature: education-num, transform: standardize, mean: 10.0807, stddev: 2.5727}");
  testing::WriteFileOrDie(work.Join("wide_deep.yaml"), spec);
  const std::vector<std::string> common = {
      "--spec",         dir_->Join("train") + "/feature_spec.yaml",
      "--model",        work.Join("wide_deep.yaml"),
      "--epochs",       "2",
      "--dense-lr",     "0.003",
      "--embedding-lr", "0.1",
      "--batch-size",   "128"};
  auto with = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), {BrookBinary(), "trainer"});
    argv.insert(argv.end(), common.begin(), common.end());
    return argv;
  };

  nlohmann::json sync =
      LastJson(RunCommand(with({"--local-ps", "2", "--staleness", "0", "--data",
                                dir_->Join("train") + "/train-*.tfrecord", "--eval-data",
                                dir_->Join("test") + "/test-*.tfrecord"}),
                          600)
                   .output);
  ASSERT_TRUE(sync.contains("eval")) << sync.dump();

  std::string error;
  std::vector<testing::PsProcess> ps;
  for (int i = 0; i < 2; ++i) {
    auto p = testing::StartBrookPs(i, 2, {}, std::chrono::milliseconds(20000), &error);
    ASSERT_TRUE(p.has_value()) << error;
    ps.push_back(std::move(*p));
  }
  const std::string addresses = ps[0].address + "," + ps[1].address;
  std::vector<std::unique_ptr<testing::ChildProcess>> trainers;
  for (int i = 0; i < 2; ++i) {
    auto t = testing::ChildProcess::Start(
        with({"--ps", addresses, "--staleness", "4", "--data",
              dir_->Join("train") + "/train-0000" + std::to_string(i) + "-of-00002.tfrecord"}),
        &error);
    ASSERT_NE(t, nullptr) << error;
    trainers.push_back(std::move(t));
  }
  int64_t trained = 0;
  for (auto& t : trainers) {
    // Reading stdout up to the JSON line also keeps the pipe from filling.
    std::optional<std::string> line = t->WaitForLine("{\"", std::chrono::minutes(10));
    ASSERT_TRUE(line.has_value()) << "no result from a trainer: " << t->stdout_text();
    std::optional<int> code = t->Wait(std::chrono::seconds(60));
    ASSERT_TRUE(code.has_value()) << "trainer still running after its result";
    ASSERT_EQ(*code, 0) << t->stdout_text();
    trained += LastJson(*line)["examples"].get<int64_t>();
  }
  // Together the two saw every training example once per epoch, as the
  // synchronous one did.
  EXPECT_EQ(trained, sync["examples"].get<int64_t>());
  nlohmann::json async = LastJson(RunCommand(with({"--ps", addresses, "--eval-only", "--eval-data",
                                                   dir_->Join("test") + "/test-*.tfrecord"}),
                                             600)
                                      .output);
  ASSERT_TRUE(async.contains("eval")) << async.dump();
  EXPECT_EQ(async["steps"].get<int64_t>(), 0);
  std::cout << "sync " << sync["eval"].dump() << "\n2 async trainers " << async["eval"].dump()
            << "\n";
  EXPECT_NEAR(async["eval"]["auc"].get<double>(), sync["eval"]["auc"].get<double>(), 0.005);
  EXPECT_GE(async["eval"]["auc"].get<double>(), 0.90);
}

// --check-config reads a standalone trainer's specs as the run would: a bad
// one is exit 2 naming the file and the line, a good one `config ok`.
TEST_F(TrainerAdultTest, CheckConfigReadsTheSpecsAndNamesTheBadFile) {
  const std::string spec = dir_->Join("train") + "/feature_spec.yaml";
  const std::string model = testing::SourceDir() + "/examples/adult/lr.yaml";
  auto ok = RunCommand({BrookBinary(), "trainer", "--local-ps", "1", "--spec", spec, "--model",
                        model, "--check-config"});
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("config ok"), std::string::npos) << ok.output;

  const std::string bad_model = dir_->Join("bad_model.yaml");
  testing::WriteFileOrDie(bad_model, "model:\n  type: lr\n  modle: 1\n");
  auto bad = RunCommand({BrookBinary(), "trainer", "--local-ps", "1", "--spec", spec, "--model",
                         bad_model, "--check-config"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find(bad_model + ": model.modle (line 3)"), std::string::npos) << bad.output;

  auto missing = RunCommand({BrookBinary(), "trainer", "--local-ps", "1", "--spec",
                             dir_->Join("nope.yaml"), "--model", model, "--check-config"});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("nope.yaml"), std::string::npos) << missing.output;

  // The device as the run would name it, without opening it: a GPU is not
  // needed to check a config for one, and a misspelled one is caught.
  for (const char* device : {"cuda", "cuda:1"}) {
    auto r = RunCommand({BrookBinary(), "trainer", "--local-ps", "1", "--spec", spec, "--model",
                         model, "--device", device, "--gemm-math", "tf32", "--check-config"});
    EXPECT_EQ(r.exit_code, 0) << device << ": " << r.output;
  }
  for (const auto& [device, math, says] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"cpu,cuda", "fp32", "unknown device \"cpu,cuda\""},
           {"CPU", "fp32", "unknown device \"CPU\""},
           {"cuda:-1", "fp32", "unknown device \"cuda:-1\""},
           {"cpu", "bf16", "the cpu device computes in fp32"}}) {
    auto r = RunCommand({BrookBinary(), "trainer", "--local-ps", "1", "--spec", spec, "--model",
                         model, "--device", device, "--gemm-math", math, "--check-config"});
    EXPECT_EQ(r.exit_code, 2) << device << ": " << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << device << ": " << r.output;
  }
}

}  // namespace
}  // namespace brook
