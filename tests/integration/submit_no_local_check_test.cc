// `brook submit --no-local-check`: submitting from a machine that cannot see
// the cluster's volumes (a laptop through `kubectl port-forward`). The chief
// and trainer run in one directory ("the pods"), the submitter in another;
// the job's data glob goes through /proc/self/cwd, so it names files for
// the chief and the trainer (their volume) and nothing for the submitter,
// as a pod's mount path does on a laptop. The local check fails naming the
// glob and hinting at --no-local-check; with it the chief checks the glob
// where it runs and the job trains; a glob nobody sees is refused by the
// chief, naming it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/testing/process.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using namespace std::chrono_literals;
using testing::BrookBinary;
using testing::ChildProcess;
using testing::RunCommand;

// What a pod's volume path is on the submitter's machine: a path that
// names files only where the chief and the trainer run.
constexpr char kPodDataGlob[] = "/proc/self/cwd/volume/train-*.tfrecord";

class SubmitNoLocalCheckTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    std::filesystem::create_directories(Pods());
    std::filesystem::create_directories(Submitter());
    // The smoke job's data (docker/Dockerfile.cpu's arguments, half the size).
    auto gen = RunCommand(
        {BrookBinary(), "data", "gen", "--out", Pods() + "/volume", "--train", "2048", "--test",
         "0", "--shards", "1", "--seed", "7", "--cardinality-max", "1000", "--threads", "1"},
        120);
    ASSERT_EQ(gen.exit_code, 0) << gen.output;
    // The feature spec is read (and embedded) where the job is submitted.
    std::filesystem::copy_file(Pods() + "/volume/feature_spec.yaml",
                               Submitter() + "/feature_spec.yaml");
    std::string error;
    auto ps = testing::StartBrookPs(0, 1, {}, 30s, &error);
    ASSERT_TRUE(ps.has_value()) << error;
    ps_ = ps->process.release();
    chief_ = InPods({BrookBinary(), "chief", "--listen", "127.0.0.1:0", "--metrics-listen",
                     "127.0.0.1:0", "--state-dir", dir_->Join("chief-state"), "--ps", ps->address,
                     "--lease-seconds", "2"})
                 .release();
    ASSERT_NE(chief_, nullptr);
    auto line = chief_->WaitForLine("brook chief listening on", 30s);
    ASSERT_TRUE(line.has_value()) << "no listening line from brook chief";
    chief_address_ = line->substr(std::string("brook chief listening on ").size());
    chief_address_ = chief_address_.substr(0, chief_address_.find(' '));
  }
  static void TearDownTestSuite() {
    delete chief_;
    delete ps_;
    delete dir_;
  }

  static std::string Pods() { return dir_->Join("pods"); }
  static std::string Submitter() { return dir_->Join("laptop"); }
  // Runs argv with the pods' directory as its working directory.
  static std::unique_ptr<ChildProcess> InPods(const std::vector<std::string>& argv) {
    std::string cmd = absl::StrCat("cd '", Pods(), "' && exec");
    for (const std::string& a : argv) absl::StrAppend(&cmd, " '", a, "'");
    std::string error;
    auto p = ChildProcess::Start({"/bin/sh", "-c", cmd}, &error);
    EXPECT_NE(p, nullptr) << error;
    return p;
  }
  // `brook submit JOB --chief <chief> EXTRA...` run from the submitter's
  // directory.
  static testing::CommandResult Submit(const std::string& job,
                                       const std::vector<std::string>& extra) {
    std::string cmd = absl::StrCat("cd '", Submitter(), "' && exec '", BrookBinary(), "' submit '",
                                   job, "' --chief ", chief_address_);
    for (const std::string& a : extra) absl::StrAppend(&cmd, " '", a, "'");
    return RunCommand({"/bin/sh", "-c", cmd}, 120);
  }
  // The smoke job (examples/smoke/job.yaml) named `name`, training on `glob`.
  static std::string WriteJob(const std::string& name, const std::string& glob) {
    const std::string smoke =
        testing::ReadFileOrDie(testing::SourceDir() + "/examples/smoke/job.yaml");
    const std::string job = absl::StrReplaceAll(
        smoke, {{"name: helm-test-smoke", absl::StrCat("name: ", name)},
                {"train: [train-*.tfrecord]", absl::StrCat("train: [", glob, "]")}});
    EXPECT_NE(job, smoke);
    const std::string path = Submitter() + "/" + name + ".yaml";
    testing::WriteFileOrDie(path, job);
    return path;
  }

  static testing::TempDir* dir_;
  static ChildProcess* ps_;
  static ChildProcess* chief_;
  static std::string chief_address_;
};

testing::TempDir* SubmitNoLocalCheckTest::dir_ = nullptr;
ChildProcess* SubmitNoLocalCheckTest::ps_ = nullptr;
ChildProcess* SubmitNoLocalCheckTest::chief_ = nullptr;
std::string SubmitNoLocalCheckTest::chief_address_;

TEST_F(SubmitNoLocalCheckTest, TheLocalCheckOfAPodPathFailsNamingItAndHintsAtNoLocalCheck) {
  const std::string job = WriteJob("pod-data-local", kPodDataGlob);
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--dry-run"}}) {
    auto r = Submit(job, extra);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(absl::StrCat("data.train[0]: \"", kPodDataGlob, "\" matches no file")),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("submit with --no-local-check"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("submitted to"), std::string::npos) << r.output;
  }
}

TEST_F(SubmitNoLocalCheckTest, WithNoLocalCheckTheChiefChecksThePodPathAndTheJobTrains) {
  const std::string job = WriteJob("pod-data", kPodDataGlob);
  auto dry = Submit(job, {"--no-local-check", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("not checked here (--no-local-check"), std::string::npos) << dry.output;
  EXPECT_NE(dry.output.find(kPodDataGlob), std::string::npos) << dry.output;

  auto r = Submit(job, {"--no-local-check"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string id = r.output.substr(0, r.output.find('\n'));
  ASSERT_EQ(id.rfind("pod-data-", 0), 0u) << r.output;

  // A trainer that sees the volume too (the trainer pods mount it).
  auto trainer =
      InPods({BrookBinary(), "trainer", "--chief", chief_address_, "--node-id", "trainer-0",
              "--cpu-threads", "1", "--parse-threads", "1", "--metrics-listen", "127.0.0.1:0"});
  ASSERT_NE(trainer, nullptr);
  auto watch = RunCommand(
      {BrookBinary(), "status", id, "--watch", "--interval", "0.5", "--chief", chief_address_},
      180);
  EXPECT_EQ(watch.exit_code, 0) << watch.output;
  EXPECT_NE(watch.output.find("SUCCEEDED"), std::string::npos) << watch.output;
}

TEST_F(SubmitNoLocalCheckTest, AGlobNobodySeesIsRefusedByTheChiefNamingIt) {
  const std::string glob = "/proc/self/cwd/no-such-volume/train-*.tfrecord";
  const std::string job = WriteJob("nobody-sees", glob);
  auto r = Submit(job, {"--no-local-check"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string refused =
      absl::StrCat("the chief at ", chief_address_, " refused job nobody-sees");
  EXPECT_NE(r.output.find(refused), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(absl::StrCat("data.train[0]: \"", glob, "\" matches no file")),
            std::string::npos)
      << r.output;
}

TEST_F(SubmitNoLocalCheckTest, NoLocalCheckStillRefusesAnInvalidSpec) {
  const std::string job = WriteJob("bad-spec", kPodDataGlob);
  std::string yaml = testing::ReadFileOrDie(job);
  yaml = absl::StrReplaceAll(yaml, {{"batch_size: 256", "batch_size: -1"}});
  testing::WriteFileOrDie(job, yaml);
  auto r = Submit(job, {"--no-local-check"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("training.batch_size"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace brook
