// The job CLI's output against a real cluster (ChiefE2eTest's `brook ps`,
// `brook chief`, `brook trainer --chief` processes): `logs --follow` through
// a chief killed and restarted, `logs --trainer`, the labelled AUCs of
// `status` and `list`, and `-o json` with integers as numbers.
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tests/integration/chief_cluster_fixture.h"
#include "tests/testing/process.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

class JobCliClusterTest : public ChiefE2eTest {
 protected:
  // A trainer whose stderr goes to `log` (as under `brook local`).
  void StartTrainerLoggingTo(const std::string& id, const std::string& log) {
    std::string error;
    auto t = ChildProcess::Start(
        {"/bin/sh", "-c",
         absl::StrCat("exec '", BrookBinary(), "' trainer --chief ", chief_address_, " --node-id ",
                      id, " --cpu-threads 1 --parse-threads 1 --metrics-listen 127.0.0.1:0 2>'",
                      log, "'")},
        &error);
    ASSERT_NE(t, nullptr) << error;
    ASSERT_TRUE(t->WaitForLine("brook trainer", 30s).has_value());
    trainers_[id] = std::move(t);
  }
};

std::vector<std::string> EventTexts(const std::string& log) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    // "2026-12-02T15:13:20.123Z  TEXT": the events, not the CLI's notes.
    if (line.size() > 26 && line[4] == '-' && line[23] == 'Z') {
      out.emplace_back(line.substr(26));
    }
  }
  return out;
}

TEST_F(JobCliClusterTest, LogsFollowOutlivesAChiefRestartAndEndsWithTheJob) {
  StartPs(2);
  StartChief();
  const int port = std::stoi(chief_address_.substr(chief_address_.rfind(':') + 1));
  const std::string trainer_log = dir_.Join("t0.err");
  StartTrainerLoggingTo("t0", trainer_log);
  ASSERT_EQ(Cli({"submit", WriteJob("follow.yaml", JobYaml("follow", 0, 2, 64, 2000, 1,
                                                           "eval: {every_steps: 200}\n"))})
                .exit_code,
            0);

  testing::CommandResult follow;
  std::thread follower([&] {
    follow = Cli({"logs", "follow", "--follow", "--interval", "0.2"}, 300);
  });
  // No ASSERT until the follower is joined (a joinable thread terminates).
  const bool progressed = WaitFor(
      "follow", [](const v1::JobStatus& j) { return j.units_done() >= 3; }, 60s);
  if (progressed) {
    chief_->Signal(SIGKILL);
    EXPECT_TRUE(chief_->Wait(10s).has_value());
    std::this_thread::sleep_for(1500ms);  // `logs --follow` meets a dead chief
    StartChief(port);
  }
  follower.join();
  ASSERT_TRUE(progressed) << follow.output;

  EXPECT_EQ(follow.exit_code, 0) << follow.output;
  EXPECT_NE(follow.output.find("retrying for up to 1m"), std::string::npos) << follow.output;
  // Every event once, in order: what `logs` prints once the job has ended
  // and the chief's next tick has dropped its tables (the last event).
  testing::CommandResult logs = Cli({"logs", "follow"});
  for (int i = 0; i < 100 && !absl::StrContains(logs.output, "the job has ended"); ++i) {
    std::this_thread::sleep_for(200ms);
    logs = Cli({"logs", "follow"});
  }
  ASSERT_EQ(logs.exit_code, 0) << logs.output;
  // The PS tables are dropped on the chief's next tick after the job ends,
  // which `--follow` (done at the job's end) may or may not have seen.
  std::vector<std::string> ended = EventTexts(logs.output);
  const std::vector<std::string> followed = EventTexts(follow.output);
  if (ended.size() == followed.size() + 1 && absl::StrContains(ended.back(), "the job has ended")) {
    ended.pop_back();
  }
  EXPECT_EQ(followed, ended) << follow.output;
  EXPECT_NE(logs.output.find("exported to"), std::string::npos) << logs.output;
  // An ended job's --follow prints the log and exits with the job's code.
  const testing::CommandResult again = Cli({"logs", "follow", "-f", "-o", "json"});
  EXPECT_EQ(again.exit_code, 0) << again.output;
  size_t objects = 0;
  for (absl::string_view line : absl::StrSplit(again.output, '\n', absl::SkipEmpty())) {
    const nlohmann::json e = nlohmann::json::parse(line);
    EXPECT_TRUE(e["time_us"].is_number_integer()) << line;
    EXPECT_TRUE(e["text"].is_string()) << line;
    ++objects;
  }
  EXPECT_EQ(objects, EventTexts(logs.output).size());

  // The trainer's own log, which it told the chief about.
  const testing::CommandResult own = Cli({"logs", "follow", "--trainer", "t0"});
  EXPECT_EQ(own.exit_code, 0) << own.output;
  EXPECT_NE(own.output.find("brook trainer t0: registered with the chief"), std::string::npos)
      << own.output;
  // All of it (the file may have grown since).
  EXPECT_TRUE(absl::StartsWith(testing::ReadFileOrDie(trainer_log), own.output)) << own.output;
  const testing::CommandResult where = Cli({"logs", "follow", "--trainer", "t0", "-o", "json"});
  ASSERT_EQ(where.exit_code, 0) << where.output;
  const nlohmann::json w = nlohmann::json::parse(where.output);
  EXPECT_EQ(w["node_id"], "t0");
  ASSERT_FALSE(w["log"]["paths"].empty()) << where.output;
  EXPECT_EQ(w["log"]["paths"][0], trainer_log);
  const testing::CommandResult unknown = Cli({"logs", "follow", "--trainer", "t9"});
  EXPECT_EQ(unknown.exit_code, 3) << unknown.output;
  EXPECT_NE(unknown.output.find("the chief knows no trainer 't9' (it knows: t0)"),
            std::string::npos)
      << unknown.output;
  EXPECT_EQ(Cli({"logs", "no-such-job-7", "--follow"}).exit_code, 3);
}

TEST_F(JobCliClusterTest, StatusAndListLabelEachAucAndJsonIntegersAreNumbers) {
  StartPs(1);
  StartChief();
  StartTrainer("t0");
  ASSERT_EQ(Cli({"submit", WriteJob("aucs.yaml", JobYaml("aucs", 0, 1, 256, 0, 1))}).exit_code, 0);
  ASSERT_EQ(Cli({"status", "aucs", "--watch", "--interval", "0.5"}, 300).exit_code, 0);

  const v1::JobStatus job = Job("aucs");
  ASSERT_TRUE(job.eval().done());
  const testing::CommandResult status = Cli({"status", "aucs"});
  ASSERT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find(absl::StrCat("AUC:        train ")), std::string::npos)
      << status.output;
  EXPECT_NE(status.output.find(
                absl::StrFormat("  eval %.4f (step %d)", job.eval().auc(), job.eval().step())),
            std::string::npos)
      << status.output;
  const testing::CommandResult list = Cli({"list"});
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("TRAIN AUC  EVAL AUC"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find(absl::StrFormat("%.4f", job.eval().auc())), std::string::npos)
      << list.output;

  const testing::CommandResult json = Cli({"status", "aucs", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json j = nlohmann::json::parse(json.output);
  for (const char* field : {"units_done", "units_total", "examples_trained", "submit_time_us",
                            "end_time_us", "epoch"}) {
    EXPECT_TRUE(j[field].is_number_integer()) << field << ": " << j[field];
  }
  EXPECT_EQ(j["examples_trained"].get<uint64_t>(), job.examples_trained());
  EXPECT_EQ(j["eval"]["examples"].get<int64_t>(), job.eval().examples());
  EXPECT_EQ(j["examples_per_epoch"][0].get<uint64_t>(), kAdultTrainRows);
  const testing::CommandResult jobs = Cli({"list", "-o", "json"});
  ASSERT_EQ(jobs.exit_code, 0) << jobs.output;
  const nlohmann::json l = nlohmann::json::parse(jobs.output);
  ASSERT_EQ(l["jobs"].size(), 1u);
  EXPECT_TRUE(l["jobs"][0]["units_done"].is_number_unsigned());
}

}  // namespace
}  // namespace brook
