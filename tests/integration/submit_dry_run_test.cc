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
// job's).
TEST_F(SubmitDryRunTest, TrainerRunsFromTheJobSpec) {
  auto r = RunCommand({BrookBinary(), "trainer", "--job", dir_->Join("job.yaml"), "--local-ps", "2",
                       "--max-steps", "20"},
                      300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json out = FirstJson(r.output);
  EXPECT_EQ(out["steps"], 20);
  EXPECT_EQ(out["examples"], 20 * 256);
  EXPECT_GT(out["eval"]["examples"].get<int64_t>(), 16000);  // data.eval: Adult's test split
}

}  // namespace
}  // namespace brook
