// The main job end to end on 127.0.0.1 (issue 6): `brook ps` shards, a
// `brook chief` and `brook trainer --chief` processes, jobs submitted and
// watched through the `brook` CLI, the export scored with `brook predict`;
// trainers and the chief killed with -9 mid-job.
#include <fcntl.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <stdlib.h>
#include <cctype>
#include <cstdio>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "brook/v1/chief.pb.h"
#include "chief/client/chief_client.h"
#include "tests/integration/chief_cluster_fixture.h"
#include "tests/testing/http_get.h"
#include "tests/testing/process.h"
#include "tests/testing/test_util.h"
#include "tests/testing/tmpfs.h"

namespace brook {
namespace {

TEST_F(ChiefE2eTest, AdultJobThroughTheCliCompletesAndItsExportScoresAbove090) {
  StartPs(2);
  StartChief();
  StartTrainer("t0");
  StartTrainer("t1");
  const std::string job = WriteJob("adult.yaml", JobYaml("adult", 0, 4, 256, 5000, 2));

  auto submit = Cli({"submit", job});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  EXPECT_NE(submit.output.find("adult"), std::string::npos) << submit.output;  // the id's date
  auto watch = Cli({"status", "adult", "--watch", "--interval", "0.5"}, 300);
  ASSERT_EQ(watch.exit_code, 0) << watch.output;

  auto status = Cli({"status", "adult", "--output", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.output;
  const nlohmann::json j = nlohmann::json::parse(status.output);
  EXPECT_EQ(j["state"], "SUCCEEDED");
  const v1::JobStatus s = Job("adult");
  ExpectEveryEpochCountsTheDataOnce(s, 4);
  ASSERT_TRUE(s.eval().done());
  EXPECT_GE(s.eval().auc(), 0.90);
  EXPECT_GT(s.checkpoints_size(), 0);
  ASSERT_FALSE(s.export_dir().empty());

  // The export reproduces the trained model: same AUC on the test split.
  auto predict = RunCommand({BrookBinary(), "predict", "--model", s.export_dir(), "--data",
                             data_->Join("test/test-*.tfrecord")});
  ASSERT_EQ(predict.exit_code, 0) << predict.output;
  const nlohmann::json p = nlohmann::json::parse(predict.output.substr(predict.output.find('{')));
  EXPECT_GE(p["auc"].get<double>(), 0.90);
  EXPECT_NEAR(p["auc"].get<double>(), s.eval().auc(), 1e-9);
  EXPECT_EQ(p["examples"].get<int64_t>(), s.eval().examples());

  auto list = Cli({"list"});
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("SUCCEEDED"), std::string::npos) << list.output;
  auto logs = Cli({"logs", "adult"});
  ASSERT_EQ(logs.exit_code, 0) << logs.output;
  EXPECT_NE(logs.output.find("exported to"), std::string::npos) << logs.output;

  // Every node's /metrics: promtool-clean, and every family documented.
  const std::string docs = testing::ReadFileOrDie(testing::SourceDir() + "/docs/metrics.md");
  const bool have_promtool = !testing::FindPromtool().empty();
  if (!have_promtool) std::printf("SKIPPED promtool half: promtool not installed\n");
  std::map<std::string, std::string> must_have = {
      {"ps-0", "brook_ps_rows_pulled_total"},
      {"chief", "brook_chief_job_examples_total"},
      {"trainer-t0", "brook_trainer_committed_examples_total"}};
  ASSERT_EQ(metrics_.size(), 5u);
  for (const auto& [node, address] : metrics_) {
    SCOPED_TRACE(node);
    std::string error;
    auto scrape = testing::HttpGet(address, "/metrics", 5000, &error);
    ASSERT_TRUE(scrape.has_value()) << error;
    ASSERT_EQ(scrape->status, 200);
    for (const char* common : {"brook_build_info{", "process_resident_memory_bytes ",
                               "process_cpu_seconds_total ", "process_open_fds "}) {
      EXPECT_NE(scrape->body.find(common), std::string::npos) << common;
    }
    if (must_have.count(node)) {
      EXPECT_NE(scrape->body.find(must_have[node]), std::string::npos) << must_have[node];
    }
    if (have_promtool) {
      std::string output;
      EXPECT_EQ(testing::PromtoolCheckMetrics(scrape->body, &output), 0) << output;
    }
    for (const auto& line : absl::StrSplit(scrape->body, '\n')) {
      if (!absl::StartsWith(line, "# TYPE ")) continue;
      const std::vector<std::string> words = absl::StrSplit(line, ' ');
      ASSERT_GE(words.size(), 3u);
      EXPECT_NE(docs.find("`" + words[2] + "`"), std::string::npos)
          << words[2] << " is not in docs/metrics.md";
    }
  }
}

TEST_F(ChiefE2eTest, JobsRunByPriorityCancelFreesTrainersAndBadSpecsAreRefused) {
  StartPs(1);
  StartChief();
  StartTrainer("t0", /*tf_config=*/true);
  ASSERT_EQ(
      Cli({"submit", WriteJob("blocker.yaml", JobYaml("blocker", 0, 1000, 256, 0, 1))}).exit_code,
      0);
  ASSERT_TRUE(WaitFor(
      "blocker", [](const v1::JobStatus& j) { return j.examples_trained() > 0; }, 60s));
  ASSERT_EQ(Cli({"submit", WriteJob("low.yaml", JobYaml("low", 0, 1, 256, 0, 1))}).exit_code, 0);
  ASSERT_EQ(Cli({"submit", WriteJob("high.yaml", JobYaml("high", 5, 1, 256, 0, 1))}).exit_code, 0);
  EXPECT_EQ(Job("low").state(), "QUEUED");
  EXPECT_EQ(Job("high").state(), "QUEUED");

  // `brook list`: running first, then queued by priority.
  auto list = Cli({"list", "--output", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.output;
  std::vector<std::string> order;
  for (const auto& line : absl::StrSplit(list.output, '\n')) {
    if (line.empty() || line[0] != '{') continue;
    const nlohmann::json j = nlohmann::json::parse(std::string(line));
    if (j.contains("jobs")) {
      for (const auto& job : j["jobs"]) order.push_back(job["name"]);
    } else {
      order.push_back(j["name"]);
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{"blocker", "high", "low"})) << list.output;

  // Cancelling the running job frees its trainer for the higher-priority job.
  auto cancel = Cli({"cancel", "blocker"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.output;
  ASSERT_TRUE(WaitFor(
      "high",
      [](const v1::JobStatus& j) {
        return j.state() == "RUNNING" && j.trainers_size() == 1 && j.trainers(0) == "t0";
      },
      30s))
      << Job("high").DebugString();
  EXPECT_EQ(Job("low").state(), "QUEUED");
  EXPECT_EQ(Job("blocker").state(), "CANCELLED");
  EXPECT_EQ(Cli({"status", "blocker"}).exit_code, 1);  // ended, not succeeded
  EXPECT_EQ(Cli({"status", "no-such-job-7"}).exit_code, 3);

  // Invalid specs: refused before anything is queued, the field named.
  auto bad = Cli({"submit", WriteJob("bad.yaml", JobYaml("bad", 0, 1, 0, 0, 1))});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("training.batch_size"), std::string::npos) << bad.output;
  const std::string steps_yaml =
      absl::StrReplaceAll(JobYaml("steps", 0, 1, 64, 0, 1), {{"epochs: 1", "steps: 100"}});
  auto steps = Cli({"submit", WriteJob("steps.yaml", steps_yaml)});
  EXPECT_EQ(steps.exit_code, 2) << steps.output;  // refused before it is sent
  EXPECT_NE(steps.output.find("training.steps"), std::string::npos) << steps.output;
  v1::ListJobsRequest lr;
  auto all = client_->ListJobs(lr);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->jobs_size(), 3);

  // Cancel what is left. high (one epoch) may have finished meanwhile on a
  // fast machine, and low may be running or finished after it: a job that
  // ended cannot be cancelled (exit 1), anything else can.
  for (const std::string id : {"high", "low"}) {
    const testing::CommandResult cancelled = Cli({"cancel", id});
    const std::string state = Job(id).state();
    if (state != "SUCCEEDED") {
      EXPECT_EQ(cancelled.exit_code, 0) << id << ": " << cancelled.output;
      EXPECT_EQ(state, "CANCELLED") << id;
    }
  }
}

// The last epoch with no unit left to lease (or the job past training):
// a trainer killed now leaves nothing for a next holder to take over.
bool JobNearlyDone(const v1::JobStatus& j) {
  return j.finalizing() || j.state() == "SUCCEEDED" ||
         (j.epoch() + 1 >= j.epochs() && j.units_pending() == 0);
}

TEST_F(ChiefE2eTest, TrainerKilledMidJobItsUnitsAreReleasedAndEveryExampleCountsOnce) {
  StartPs(2);
  StartChief();
  StartTrainer("t0");
  StartTrainer("t1");
  ASSERT_EQ(Cli({"submit", WriteJob("kill.yaml", JobYaml("kill", 0, 3, 64, 2000, 2,
                                                         "eval: {every_steps: 150}\n"))})
                .exit_code,
            0);
  // Kill t0 until three kills released a unit, each once more units are
  // done and it holds a lease, and start it again (as its pod restarts):
  // each time the unit it held goes to the next holder from its last
  // commit. A kill can still land between two of its units (status read,
  // then SIGKILL: units take well under a second) and release nothing; such
  // a round is seen (no release within the lease) and done again.
  // Rounds go on until three kills released a unit or the job's units run
  // out (a fast machine trains them before); at least one must have.
  uint32_t released = 0;
  for (uint32_t round = 0; released < 3 && round < 6; ++round) {
    ASSERT_TRUE(WaitFor(
        "kill",
        [&](const v1::JobStatus& j) {
          return (j.units_done() >= 2 && j.units_leased() == 2) || JobNearlyDone(j);
        },
        60s))
        << "round " << round;
    if (JobNearlyDone(Job("kill"))) break;
    // ... and has pushed a few steps since: units here take well under the
    // 1 s commit interval, so its current unit's steps are uncommitted.
    const double steps = MetricSum("trainer-t0", "brook_trainer_steps_total");
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (MetricSum("trainer-t0", "brook_trainer_steps_total") < steps + 3 &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(5ms);
    }
    // Kill it while it holds a unit: between two units (its commit, then its
    // next lease) it holds none, and a kill there releases nothing. Each
    // trainer holds one unit at a time, so two leased means t0 holds one.
    const uint32_t releases_before = Job("kill").releases();
    const auto leased_until = std::chrono::steady_clock::now() + 10s;
    while (Job("kill").units_leased() != 2 && std::chrono::steady_clock::now() < leased_until) {
    }
    trainers_["t0"]->Signal(SIGKILL);
    ASSERT_TRUE(trainers_["t0"]->Wait(10s).has_value());
    // The chief releases the unit once the 2 s lease expires.
    const auto release_until = std::chrono::steady_clock::now() + 8s;
    while (Job("kill").releases() == releases_before &&
           std::chrono::steady_clock::now() < release_until) {
      std::this_thread::sleep_for(50ms);
    }
    if (Job("kill").releases() > releases_before) ++released;
    StartTrainer("t0");
  }
  EXPECT_GE(released, 1u) << "no kill of t0 landed while it held a unit";

  ASSERT_TRUE(WaitFor(
      "kill", [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; }, 240s))
      << Job("kill").DebugString();
  const v1::JobStatus s = Job("kill");
  ExpectEveryEpochCountsTheDataOnce(s, 3);
  EXPECT_GE(s.releases(), released);
  EXPECT_GE(s.expired_trainers(), 1u);
  EXPECT_GE(s.eval().auc(), 0.88);
  // Every (unit, epoch) trained pushed under its own stream; the steps a
  // killed trainer pushed after its last commit were pushed again by the
  // unit's next holder and acknowledged as duplicates, not applied twice
  // (the exact model equality this gives: TrainerTest.AUnitResumedBy...).
  double streams = 0, duplicates = 0;
  for (const std::string ps : {"ps-0", "ps-1"}) {
    streams += MetricSum(ps, "brook_ps_push_streams");
    duplicates += MetricSum(ps, "brook_ps_duplicate_pushes_total");
  }
  EXPECT_GE(streams, 3 * 17);  // at least every unit of 3 epochs on some PS
  EXPECT_GT(duplicates, 0);
  std::cout << "push streams " << streams << ", step parts acknowledged as duplicates "
            << duplicates << "\n";
  // Evaluated every 150 steps while training, and at the end.
  v1::GetJobRequest with_events;
  with_events.set_job_id("kill");
  with_events.set_with_events(true);
  auto logged = client_->GetJob(with_events);
  ASSERT_TRUE(logged.ok());
  int evals = 0;
  for (const auto& e : logged->events()) evals += e.text().rfind("eval at step", 0) == 0 ? 1 : 0;
  EXPECT_GE(evals, 2) << logged->DebugString();
}

TEST_F(ChiefE2eTest, ChiefKilledAndRestartedMidJobResumesAndCompletes) {
  StartPs(2);
  StartChief();
  const int port = std::stoi(chief_address_.substr(chief_address_.rfind(':') + 1));
  StartTrainer("t0");
  StartTrainer("t1");
  ASSERT_EQ(
      Cli({"submit", WriteJob("resume.yaml", JobYaml("resume", 0, 3, 64, 2000, 2))}).exit_code, 0);
  ASSERT_TRUE(WaitFor(
      "resume", [](const v1::JobStatus& j) { return j.units_done() >= 3; }, 60s));
  const uint64_t before = Job("resume").examples_trained();
  chief_->Signal(SIGKILL);
  ASSERT_TRUE(chief_->Wait(10s).has_value());
  std::this_thread::sleep_for(500ms);  // the trainers keep training, and retry the chief
  StartChief(port);

  const v1::JobStatus resumed = Job("resume");
  EXPECT_EQ(resumed.state(), "RUNNING");
  EXPECT_GE(resumed.examples_trained(), before);  // nothing acknowledged was forgotten
  ASSERT_TRUE(WaitFor(
      "resume", [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; }, 240s))
      << Job("resume").DebugString();
  const v1::JobStatus s = Job("resume");
  ExpectEveryEpochCountsTheDataOnce(s, 3);
  EXPECT_GE(s.eval().auc(), 0.88);
  EXPECT_FALSE(s.export_dir().empty());
}

// Sums a metric's samples on a /metrics page (every label set).
double SumOfMetric(const std::string& page, const std::string& name) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::StartsWith(line, name) || line.size() <= name.size() ||
        (line[name.size()] != '{' && line[name.size()] != ' ')) {
      continue;
    }
    sum += std::stod(std::string(line.substr(line.rfind(' ') + 1)));
  }
  return sum;
}

// A PS killed with -9 mid-job and restarted on its port and data dir, as a
// StatefulSet restarts a pod: it serves again what it acknowledged (its rows
// are back from the checkpoint + WAL), the trainers' retries carry them over
// the gap, and the job completes with every example counted once.
TEST_F(ChiefE2eTest, PsKilledMidJobAndRestartedOnItsDataDirServesItsRowsAndTheJobCompletes) {
  StartPs(2, /*data_dirs=*/true);
  StartChief();
  StartTrainer("t0");
  StartTrainer("t1");
  ASSERT_EQ(
      Cli({"submit", WriteJob("pskill.yaml", JobYaml("pskill", 0, 2, 64, 4000, 2))}).exit_code, 0);
  ASSERT_TRUE(WaitFor(
      "pskill", [](const v1::JobStatus& j) { return j.units_done() >= 2; }, 60s));
  std::string error;
  auto before = testing::HttpGet(metrics_["ps-1"], "/metrics", 5000, &error);
  ASSERT_TRUE(before.has_value()) << error;
  const double rows_before = SumOfMetric(before->body, "brook_ps_table_rows");
  ASSERT_GT(rows_before, 0);
  ASSERT_TRUE(ps_[1]->Signal(SIGKILL));
  ASSERT_TRUE(ps_[1]->Wait(10s).has_value());

  auto again =
      testing::StartBrookPs(1, 2, {"--data-dir", dir_.Join("ps-1")}, 60s, &error, ps_addresses_[1]);
  ASSERT_TRUE(again.has_value()) << error;
  ps_[1] = std::move(again->process);
  auto after = testing::HttpGet(again->metrics_address, "/metrics", 5000, &error);
  ASSERT_TRUE(after.has_value()) << error;
  // Rows are only ever added in this job: the restart lost none.
  EXPECT_GE(SumOfMetric(after->body, "brook_ps_table_rows"), rows_before);

  ASSERT_TRUE(WaitFor(
      "pskill", [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; }, 240s))
      << Job("pskill").DebugString();
  const v1::JobStatus s = Job("pskill");
  ExpectEveryEpochCountsTheDataOnce(s, 2);
  EXPECT_GE(s.eval().auc(), 0.88);
  // The chief noticed the restart and told the job that nothing was lost.
  const std::vector<std::string> restarts = EventsWith("pskill", "restarted");
  ASSERT_EQ(restarts.size(), 1u) << Job("pskill", true).DebugString();
  EXPECT_NE(restarts[0].find("PS shard 1"), std::string::npos) << restarts[0];
  EXPECT_NE(restarts[0].find("nothing it acknowledged was lost"), std::string::npos) << restarts[0];
}

// The same kill with the WAL off (`--no-wal`): the restarted PS goes back to
// the job's last checkpoint, and the job reports what was rolled back (an
// event naming the checkpoint and the steps lost; a metric), then completes:
// the loss is bounded by the checkpoint, and the data ledger stays exact.
// An ended job's tables were dropped; its PS, without a WAL, restarts from a
// restart point older than the drop and has them again: the chief drops
// them again and says so (found from outside: they stayed for good).
TEST_F(ChiefE2eTest, TablesAPsBringsBackFromAnOlderRestartPointAreDroppedAgain) {
  StartPs(2, /*data_dirs=*/true, {"--no-wal"});
  StartChief();
  StartTrainer("t0");
  std::string yaml = JobYaml("back", 0, 1, 256, 8000, 1);
  ASSERT_EQ(Cli({"submit", WriteJob("back.yaml", yaml)}).exit_code, 0);
  ASSERT_TRUE(WaitFor(
      "back", [](const v1::JobStatus& j) { return j.tables_dropped_time_us() > 0; }, 120s))
      << Job("back", true).DebugString();
  const std::string id = Job("back").id();
  const std::string tables_of_job = absl::StrCat("brook_ps_job_tables{job=\"", id, "\"}");
  std::string error;
  auto page = testing::HttpGet(metrics_["ps-1"], "/metrics", 5000, &error);
  ASSERT_TRUE(page.has_value()) << error;
  EXPECT_EQ(page->body.find(tables_of_job), std::string::npos);

  ASSERT_TRUE(ps_[1]->Signal(SIGKILL));
  ASSERT_TRUE(ps_[1]->Wait(10s).has_value());
  auto again = testing::StartBrookPs(1, 2, {"--data-dir", dir_.Join("ps-1"), "--no-wal"}, 60s,
                                     &error, ps_addresses_[1]);
  ASSERT_TRUE(again.has_value()) << error;
  ps_[1] = std::move(again->process);
  metrics_["ps-1"] = again->metrics_address;
  // Back from the job's final checkpoint's restart point, then gone again.
  const auto until = std::chrono::steady_clock::now() + 30s;
  bool gone = false;
  while (!gone && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(200ms);
    page = testing::HttpGet(metrics_["ps-1"], "/metrics", 5000, &error);
    gone = page.has_value() && page->body.find(tables_of_job) == std::string::npos &&
           !EventsWith("back", "dropped again").empty();
  }
  EXPECT_TRUE(gone) << Job("back", true).DebugString();

  // The same while the chief is down: the restarted chief finds them.
  const int port = std::stoi(chief_address_.substr(chief_address_.rfind(':') + 1));
  chief_->Signal(SIGKILL);
  ASSERT_TRUE(chief_->Wait(10s).has_value());
  ASSERT_TRUE(ps_[1]->Signal(SIGKILL));
  ASSERT_TRUE(ps_[1]->Wait(10s).has_value());
  again = testing::StartBrookPs(1, 2, {"--data-dir", dir_.Join("ps-1"), "--no-wal"}, 60s, &error,
                                ps_addresses_[1]);
  ASSERT_TRUE(again.has_value()) << error;
  ps_[1] = std::move(again->process);
  metrics_["ps-1"] = again->metrics_address;
  page = testing::HttpGet(metrics_["ps-1"], "/metrics", 5000, &error);
  ASSERT_TRUE(page.has_value()) << error;
  EXPECT_NE(page->body.find(tables_of_job), std::string::npos);  // back again
  StartChief(port);
  const auto until_again = std::chrono::steady_clock::now() + 30s;
  gone = false;
  while (!gone && std::chrono::steady_clock::now() < until_again) {
    std::this_thread::sleep_for(200ms);
    page = testing::HttpGet(metrics_["ps-1"], "/metrics", 5000, &error);
    gone = page.has_value() && page->body.find(tables_of_job) == std::string::npos;
  }
  EXPECT_TRUE(gone) << Job("back", true).DebugString();
}

TEST_F(ChiefE2eTest, PsKilledWithoutItsWalRollsBackToTheCheckpointAndTheJobReportsIt) {
  StartPs(2, /*data_dirs=*/true, {"--no-wal"});
  StartChief();
  StartTrainer("t0");
  StartTrainer("t1");
  // Epochs enough to outlast a checkpoint, the kill and the restart.
  std::string yaml = JobYaml("nowal", 0, 8, 64, 4000, 2);
  yaml = absl::StrReplaceAll(yaml, {{"interval_seconds: 600", "interval_seconds: 1"}});
  ASSERT_EQ(Cli({"submit", WriteJob("nowal.yaml", yaml)}).exit_code, 0);
  ASSERT_TRUE(WaitFor(
      "nowal",
      [](const v1::JobStatus& j) {
        return j.checkpoints_size() >= 1 && j.examples_per_epoch_size() <= 4;
      },
      60s))
      << Job("nowal").DebugString();
  std::this_thread::sleep_for(1s);  // steps past the checkpoint, to be lost
  ASSERT_TRUE(ps_[1]->Signal(SIGKILL));
  ASSERT_TRUE(ps_[1]->Wait(10s).has_value());
  std::string error;
  auto again = testing::StartBrookPs(1, 2, {"--data-dir", dir_.Join("ps-1"), "--no-wal"}, 60s,
                                     &error, ps_addresses_[1]);
  ASSERT_TRUE(again.has_value()) << error;
  ps_[1] = std::move(again->process);

  // An ended job ends the wait: a FAILED one is reported at once, with why.
  ASSERT_TRUE(WaitFor(
      "nowal", [](const v1::JobStatus& j) { return IsFinished(j); }, 240s))
      << Job("nowal", true).DebugString();
  const v1::JobStatus s = Job("nowal");
  ASSERT_EQ(s.state(), "SUCCEEDED") << Job("nowal", true).DebugString();
  ExpectEveryEpochCountsTheDataOnce(s, 8);
  const std::vector<std::string> rollbacks = EventsWith("nowal", "ROLLED BACK");
  ASSERT_EQ(rollbacks.size(), 1u) << Job("nowal", true).DebugString();
  EXPECT_NE(rollbacks[0].find("PS shard 1"), std::string::npos) << rollbacks[0];
  // The PS's own restart point, under its data dir, written with the job's
  // checkpoint at the same instant (the job's copy is not what it restarts from).
  EXPECT_NE(rollbacks[0].find(dir_.Join("ps-1") + "/checkpoints/ckpt-"), std::string::npos)
      << rollbacks[0];
  EXPECT_NE(rollbacks[0].find("are lost"), std::string::npos) << rollbacks[0];
  // Measured from the job's own checkpoint the restart point was taken with.
  EXPECT_NE(rollbacks[0].find("the updates this job pushed to it after its checkpoint at step "),
            std::string::npos)
      << rollbacks[0];
  auto page = testing::HttpGet(metrics_["chief"], "/metrics", 5000, &error);
  ASSERT_TRUE(page.has_value()) << error;
  EXPECT_NE(page->body.find("brook_chief_ps_restarts_total{rolled_back=\"true\"} 1"),
            std::string::npos)
      << page->body;
}

// A PS frozen mid-job (SIGSTOP: a network partition as its clients see it,
// shorter than their 30 s call budget): the trainers' pulls and pushes time
// out per attempt and retry with backoff, nothing deadlocks, the trainers
// keep their leases (they heartbeat the chief, not the PS), and after SIGCONT
// the job completes with every example counted once.
// A PS with no data dir killed mid-job and started again comes back empty:
// the trainers' next calls find none of the job's tables there. They declare
// them again (from their initializers) and the job completes, every example
// counted once; the chief's event says what the job lost. (Seen as a rare CI
// "hang": a --no-wal PS rolled back to a restart point taken before the
// tables existed, the trainers failed on them and the job with them.)
TEST_F(ChiefE2eTest, PsRestartedEmptyMidJobTheTrainersDeclareTheTablesAgainAndTheJobCompletes) {
  StartPs(2);
  StartChief();
  StartTrainer("t0");
  ASSERT_EQ(Cli({"submit", WriteJob("empty.yaml", JobYaml("empty", 0, 3, 64, 4000, 1))}).exit_code,
            0);
  ASSERT_TRUE(WaitFor(
      "empty", [](const v1::JobStatus& j) { return j.examples_trained() > 4000; }, 60s));
  ASSERT_TRUE(ps_[1]->Signal(SIGKILL));
  ASSERT_TRUE(ps_[1]->Wait(10s).has_value());
  std::string error;
  auto again = testing::StartBrookPs(1, 2, {}, 60s, &error, ps_addresses_[1]);
  ASSERT_TRUE(again.has_value()) << error;
  ps_[1] = std::move(again->process);
  ASSERT_TRUE(WaitFor(
      "empty", [](const v1::JobStatus& j) { return IsFinished(j); }, 240s))
      << Job("empty", true).DebugString();
  const v1::JobStatus s = Job("empty", true);
  ASSERT_EQ(s.state(), "SUCCEEDED") << s.DebugString();
  ExpectEveryEpochCountsTheDataOnce(s, 3);
  EXPECT_EQ(EventsWith("empty", "with no data dir").size(), 1u) << s.DebugString();
  EXPECT_GE(MetricSum("trainer-t0", "brook_trainer_tables_redeclared_total"), 1) << s.DebugString();
}

// A shard corrupt past the records submit samples: under the default
// on_corrupt: fail the job fails naming the file and the option; under
// on_corrupt: skip it trains past the damage and the job's status, events
// and metrics count what was skipped.
TEST_F(ChiefE2eTest, OnCorruptFailsTheJobNamingTheOptionOrSkipsAndCountsTheDamage) {
  const std::string corrupt = dir_.Join("corrupt");
  std::filesystem::create_directories(corrupt);
  for (const char* shard : {"train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"}) {
    std::filesystem::copy_file(data_->Join(std::string("train/") + shard), corrupt + "/" + shard);
  }
  const std::string victim = corrupt + "/train-00001-of-00002.tfrecord";
  std::string bytes = testing::ReadFileOrDie(victim);
  for (size_t i = 0; i < 64; ++i) bytes[bytes.size() / 2 + i] ^= 0x5a;
  testing::WriteFileOrDie(victim, bytes);
  StartPs(1);
  StartChief();
  StartTrainer("t0");
  const std::string train_glob = data_->Join("train/train-*.tfrecord");
  auto job = [&](const std::string& name, const std::string& on_corrupt) {
    return absl::StrReplaceAll(
        JobYaml(name, 0, 1, 256, 0, 1),
        {{train_glob, corrupt + "/train-*.tfrecord"},
         {"records_per_unit: 0\n", "records_per_unit: 0\n  on_corrupt: " + on_corrupt + "\n"}});
  };
  // The chief reads the whole train data at submit for the model's
  // standardize moments: under fail it refuses the job there.
  const testing::CommandResult refused =
      Cli({"submit", WriteJob("fail.yaml", job("corrupt-fail", "fail"))});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find(victim), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("data.on_corrupt: skip"), std::string::npos) << refused.output;
  // A model without them meets the damage in training: the job fails.
  const std::string raw_model =
      WriteJob("raw_model.yaml",
               absl::StrReplaceAll(
                   testing::ReadFileOrDie(testing::SourceDir() + "/examples/adult/wide_deep.yaml"),
                   {{"transform: standardize", "transform: none"}}));
  const testing::CommandResult submitted =
      Cli({"submit",
           WriteJob("fail-raw.yaml",
                    absl::StrReplaceAll(
                        job("corrupt-fail", "fail"),
                        {{testing::SourceDir() + "/examples/adult/wide_deep.yaml", raw_model}}))});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  ASSERT_TRUE(WaitFor(
      "corrupt-fail", [](const v1::JobStatus& j) { return j.state() == "FAILED"; }, 120s))
      << Job("corrupt-fail").DebugString();
  const v1::JobStatus failed = Job("corrupt-fail");
  EXPECT_NE(failed.message().find(victim), std::string::npos) << failed.message();
  EXPECT_NE(failed.message().find("data.on_corrupt: skip"), std::string::npos) << failed.message();

  ASSERT_EQ(Cli({"submit", WriteJob("skip.yaml", job("corrupt-skip", "skip"))}).exit_code, 0);
  ASSERT_TRUE(WaitFor(
      "corrupt-skip", [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; }, 180s))
      << Job("corrupt-skip", true).DebugString();
  const v1::JobStatus s = Job("corrupt-skip");
  EXPECT_GE(s.skipped_corrupt_regions(), 1u) << s.DebugString();
  EXPECT_GE(s.skipped_corrupt_bytes(), 64u) << s.DebugString();
  EXPECT_LT(s.examples_trained(), kAdultTrainRows);
  EXPECT_GT(s.examples_trained(), kAdultTrainRows - 1000);
  const std::vector<std::string> events = EventsWith("corrupt-skip", "corrupt regions");
  ASSERT_FALSE(events.empty()) << Job("corrupt-skip", true).DebugString();
  EXPECT_NE(events[0].find(victim), std::string::npos) << events[0];
  EXPECT_NE(events[0].find("(data.on_corrupt: skip)"), std::string::npos) << events[0];
  EXPECT_GE(MetricSum("chief", "brook_chief_job_skipped_bytes_total"),
            static_cast<double>(s.skipped_corrupt_bytes()));
  // The job CLI shows it.
  auto status = Cli({"status", "corrupt-skip", "--output", "json"});
  EXPECT_NE(status.output.find("skipped_corrupt_regions"), std::string::npos) << status.output;
}

TEST_F(ChiefE2eTest, PsFrozenMidJobTrainingResumesOnSigcontAndCountsEveryExampleOnce) {
  StartPs(2);
  StartChief();
  StartTrainer("t0");
  StartTrainer("t1");
  ASSERT_EQ(
      Cli({"submit", WriteJob("freeze.yaml", JobYaml("freeze", 0, 2, 64, 4000, 2))}).exit_code, 0);
  ASSERT_TRUE(WaitFor(
      "freeze", [](const v1::JobStatus& j) { return j.units_done() >= 2; }, 60s));
  ASSERT_TRUE(ps_[1]->Signal(SIGSTOP));
  std::this_thread::sleep_for(1s);  // in-flight steps drain into the frozen PS
  const uint64_t frozen_at = Job("freeze").examples_trained();
  std::this_thread::sleep_for(5s);  // 2.5 lease durations
  const v1::JobStatus during = Job("freeze");
  EXPECT_EQ(during.state(), "RUNNING");
  EXPECT_EQ(during.expired_trainers(), 0u) << "a trainer waiting on a PS lost its lease";
  // Every step needs both shards: no progress is committed while one is frozen.
  EXPECT_LE(during.examples_trained(), frozen_at + 64 * 8) << during.DebugString();
  EXPECT_TRUE(trainers_["t0"]->running());
  EXPECT_TRUE(trainers_["t1"]->running());
  ASSERT_TRUE(ps_[1]->Signal(SIGCONT));

  ASSERT_TRUE(WaitFor(
      "freeze", [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; }, 240s))
      << Job("freeze").DebugString();
  const v1::JobStatus s = Job("freeze");
  ExpectEveryEpochCountsTheDataOnce(s, 2);
  EXPECT_EQ(s.expired_trainers(), 0u);
  EXPECT_GE(s.eval().auc(), 0.88);
}

// A trainer frozen past its lease (SIGSTOP: a zombie) loses its work units
// to the other trainer; after SIGCONT every report it makes on the old lease
// is refused (NOT_FOUND: register again, or FAILED_PRECONDITION: stale lease
// epoch), it re-registers and works on, and no example counts twice.
TEST_F(ChiefE2eTest, TrainerFrozenPastItsLeaseIsRefusedOnWakingAndNothingCountsTwice) {
  StartPs(1);
  StartChief();
  StartTrainer("t0");
  StartTrainer("t1");
  // After the freeze, t1 alone must still be training when the 2 s lease
  // runs out: 3 epochs of Adult took an optimized build under 2 s.
  const int epochs = testing::kSanitizedBuild ? 3 : 8;
  ASSERT_EQ(
      Cli({"submit", WriteJob("zombie.yaml", JobYaml("zombie", 0, epochs, 64, 4000, 2))}).exit_code,
      0);
  ASSERT_TRUE(WaitFor(
      "zombie", [](const v1::JobStatus& j) { return j.units_done() >= 2 && j.units_leased() == 2; },
      60s));
  ASSERT_TRUE(trainers_["t0"]->Signal(SIGSTOP));
  ASSERT_TRUE(WaitFor(
      "zombie", [](const v1::JobStatus& j) { return j.expired_trainers() >= 1; }, 30s))
      << Job("zombie").DebugString();
  std::this_thread::sleep_for(1s);  // t1 picks up the released units
  ASSERT_TRUE(trainers_["t0"]->Signal(SIGCONT));

  ASSERT_TRUE(WaitFor(
      "zombie", [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; }, 240s))
      << Job("zombie").DebugString();
  const v1::JobStatus s = Job("zombie");
  ExpectEveryEpochCountsTheDataOnce(s, epochs);
  EXPECT_GE(s.releases(), 1u);
  EXPECT_TRUE(trainers_["t0"]->running()) << "the woken trainer should re-register, not exit";

  // The chief refused the zombie's calls on its old registration or lease.
  std::string error;
  auto page = testing::HttpGet(metrics_["chief"], "/metrics", 5000, &error);
  ASSERT_TRUE(page.has_value()) << error;
  double refused = 0;
  for (absl::string_view line : absl::StrSplit(page->body, '\n')) {
    if (!absl::StartsWith(line, "brook_chief_requests_total{")) continue;
    if (!absl::StrContains(line, "code=\"NOT_FOUND\"") &&
        !absl::StrContains(line, "code=\"FAILED_PRECONDITION\"")) {
      continue;
    }
    if (absl::StrContains(line, "GetJob")) continue;  // the test's own lookups
    refused += std::stod(std::string(line.substr(line.rfind(' ') + 1)));
  }
  EXPECT_GE(refused, 1) << page->body;

  // The chief fenced the paused trainer's PS client id on the PS, so the
  // gradients it pushed on waking for data now someone else's were refused
  // (how many it tried depends on who won the race after SIGCONT: its push
  // thread or its heartbeat learning of the expiry).
  EXPECT_GE(MetricSum("chief", "brook_chief_fenced_ps_clients_total"), 1) << page->body;
  EXPECT_GE(MetricSum("ps-0", "brook_ps_fenced_clients"), 1);
  const double fenced_pushes = MetricSum("ps-0", "brook_ps_fenced_pushes_total");
  EXPECT_GE(fenced_pushes, 0);
  std::cout << "the woken trainer's pushes refused as fenced: " << fenced_pushes << "\n";
}

// Fills the filesystem that holds `path` to the last byte, with the file
// `path`. False (and why) when it cannot.
bool FillFilesystem(const std::string& path, std::string* why) {
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    *why = absl::StrCat("open ", path, ": ", strerror(errno));
    return false;
  }
  struct statvfs st;
  if (::fstatvfs(fd, &st) == 0 && st.f_bavail * st.f_frsize > (1u << 20)) {
    // Most of it at once; the writes below take the last pages.
    const off_t bulk = static_cast<off_t>(st.f_bavail * st.f_frsize - (1u << 20));
    if (::posix_fallocate(fd, 0, bulk) == 0) ::lseek(fd, 0, SEEK_END);
  }
  const std::string block(4096, 'x');
  for (size_t n = block.size(); n > 0; n /= 2) {
    while (::write(fd, block.data(), n) == static_cast<ssize_t>(n)) {
    }
  }
  ::close(fd);
  return true;
}

// A PS's WAL disk fills up mid-job for ~15 s (a real tmpfs under its WAL
// directory): the PS refuses pushes (RESOURCE_EXHAUSTED, out of space), the
// trainers retry them instead of failing the job, the job's events say so,
// and when space returns the job completes with every example counted once.
// A trainer stopped (SIGTERM) while it retries a push exits at once, and so
// does the PS (SIGTERM) with its disk full.
TEST_F(ChiefE2eTest, PsDiskFullMidJobTrainersRetryAndTheJobCompletesCountingEveryExampleOnce) {
  std::filesystem::create_directories(dir_.Join("ps-1"));
  std::string why;
  auto fs = testing::ScopedTmpfs::Mount(dir_.Join("ps-1/wal"), uint64_t{1} << 30, &why);
  if (fs == nullptr) GTEST_SKIP() << "SKIPPED: " << why;
  StartPs(2, /*data_dirs=*/true);
  StartChief();
  StartTrainer("t0");
  StartTrainer("t1");
  // Epochs enough to be training still when the disk fills.
  ASSERT_EQ(Cli({"submit", WriteJob("full.yaml", JobYaml("full", 0, 10, 64, 4000, 2))}).exit_code,
            0);
  ASSERT_TRUE(WaitFor(
      "full", [](const v1::JobStatus& j) { return j.examples_trained() > 0; }, 60s));
  const std::string filler = fs->path() + "/filler";
  ASSERT_TRUE(FillFilesystem(filler, &why)) << why;
  const auto full_at = std::chrono::steady_clock::now();

  // The trainers say they are retrying, as a job event.
  std::vector<std::string> retrying;
  for (int i = 0; i < 200 && retrying.empty(); ++i) {
    std::this_thread::sleep_for(100ms);
    retrying = EventsWith("full", "out of space: retrying pushes");
  }
  ASSERT_FALSE(retrying.empty()) << Job("full", true).DebugString();
  EXPECT_NE(retrying[0].find("PS shard 1 (" + ps_addresses_[1] + ")"), std::string::npos)
      << retrying[0];
  EXPECT_NE(retrying[0].find("for up to 300 s"), std::string::npos) << retrying[0];
  EXPECT_EQ(Job("full").state(), "RUNNING");

  // A trainer stopped while it retries a push exits within its drain time.
  ASSERT_TRUE(trainers_["t0"]->Signal(SIGTERM));
  const auto stopped = std::chrono::steady_clock::now();
  const std::optional<int> t0_exit = trainers_["t0"]->Wait(10s);
  ASSERT_TRUE(t0_exit.has_value()) << "a trainer retrying a push ignored SIGTERM";
  EXPECT_EQ(*t0_exit, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, 5s);

  std::this_thread::sleep_until(full_at + 15s);
  EXPECT_EQ(Job("full").state(), "RUNNING") << Job("full", true).DebugString();
  ASSERT_EQ(std::remove(filler.c_str()), 0);  // space returns

  ASSERT_TRUE(WaitFor(
      "full", [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; }, 240s))
      << Job("full", true).DebugString();
  const v1::JobStatus s = Job("full");
  ExpectEveryEpochCountsTheDataOnce(s, 10);
  EXPECT_GE(s.eval().auc(), 0.88);
  EXPECT_FALSE(EventsWith("full", "no longer retrying").empty()) << Job("full", true).DebugString();
  EXPECT_GE(MetricSum("ps-1", "brook_ps_wal_write_errors_total"), 1);

  // A PS whose disk is full stops on SIGTERM within its drain time (10 s).
  ASSERT_TRUE(FillFilesystem(filler, &why)) << why;
  ASSERT_TRUE(ps_[1]->Signal(SIGTERM));
  EXPECT_TRUE(ps_[1]->Wait(15s).has_value()) << "a PS with a full disk ignored SIGTERM";
}

// A PS that is down longer than the job's training.retry_seconds (5 s here)
// fails the job, with a message that names the PS (shard and address) and
// the error; trainers retried it for the window first, and said so.
TEST_F(ChiefE2eTest, PsDownPastTheRetryWindowFailsTheJobNamingThePs) {
  StartPs(2);
  StartChief();
  StartTrainer("t0");
  std::string yaml = JobYaml("gone", 0, 20, 64, 4000, 1);
  yaml = absl::StrReplaceAll(yaml, {{"seed: 1}", "seed: 1, retry_seconds: 5}"}});
  ASSERT_EQ(Cli({"submit", WriteJob("gone.yaml", yaml)}).exit_code, 0);
  ASSERT_TRUE(WaitFor(
      "gone", [](const v1::JobStatus& j) { return j.units_done() >= 1; }, 60s));
  ASSERT_TRUE(ps_[1]->Signal(SIGKILL));
  ASSERT_TRUE(ps_[1]->Wait(10s).has_value());
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor(
      "gone", [](const v1::JobStatus& j) { return j.state() == "FAILED"; }, 60s))
      << Job("gone", true).DebugString();
  EXPECT_GE(std::chrono::steady_clock::now() - killed, 4s) << "failed before the retry window";
  const v1::JobStatus s = Job("gone");
  EXPECT_NE(s.message().find("PS shard 1 (" + ps_addresses_[1] + ")"), std::string::npos)
      << s.message();
  EXPECT_FALSE(EventsWith("gone", "unreachable: retrying its calls for up to 5 s").empty())
      << Job("gone", true).DebugString();
  const testing::CommandResult status = Cli({"status", "gone"});
  EXPECT_NE(status.output.find(ps_addresses_[1]), std::string::npos) << status.output;
}

// A PS unreachable from the start (the trainer never saw it): the job fails
// after its retry window naming the PS, instead of RUNNING at 0% forever;
// and the chief, retrying the job's checkpoint against that PS for
// minutes, stops on SIGTERM within its drain time (5 s).
TEST_F(ChiefE2eTest, PsUnreachableFromTheStartFailsTheJobAndTheChiefStillStopsOnSigterm) {
  ps_addresses_ = {"127.0.0.1:1"};  // nothing listens on port 1
  StartChief();
  StartTrainer("t0");
  std::string yaml = JobYaml("nops", 0, 1, 64, 4000, 1);
  // 15 s: long enough for the chief's own event about the PS (after 5 s).
  yaml = absl::StrReplaceAll(yaml, {{"seed: 1}", "seed: 1, retry_seconds: 15}"},
                                    {"interval_seconds: 600", "interval_seconds: 1"}});
  ASSERT_EQ(Cli({"submit", WriteJob("nops.yaml", yaml)}).exit_code, 0);
  ASSERT_TRUE(WaitFor(
      "nops", [](const v1::JobStatus& j) { return j.state() == "FAILED"; }, 60s))
      << Job("nops", true).DebugString();
  EXPECT_NE(Job("nops").message().find("PS shard 0 (127.0.0.1:1)"), std::string::npos)
      << Job("nops").message();
  // Not silent while it lasted: the chief said in the job's events that it
  // cannot reach the PS.
  EXPECT_GE(EventsWith("nops", "the chief cannot reach the PS nodes").size(), 1u)
      << Job("nops", true).DebugString();

  ASSERT_TRUE(chief_->Signal(SIGTERM));
  const auto stopped = std::chrono::steady_clock::now();
  const std::optional<int> exit = chief_->Wait(15s);
  ASSERT_TRUE(exit.has_value()) << "the chief ignored SIGTERM while retrying a checkpoint";
  EXPECT_EQ(*exit, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, 8s);
}

// A real Prometheus server scrapes every node of a cluster running a job;
// its HTTP API then has a series from each node type and a rate that shows
// training progressing.
TEST_F(ChiefE2eTest, PrometheusScrapesEveryNodeAndSeesTrainingProgress) {
  const std::string prometheus = "/usr/bin/prometheus";
  if (access(prometheus.c_str(), X_OK) != 0) {
    GTEST_SKIP() << "SKIPPED: no Prometheus server (Debian package 'prometheus')";
  }
  StartPs(1);
  StartChief();
  StartTrainer("t0");
  // A job long enough to be scraped several times while it trains.
  ASSERT_EQ(Cli({"submit", WriteJob("prom.yaml", JobYaml("prom", 0, 40, 64, 4000, 1))}).exit_code,
            0);

  std::string targets;
  for (const auto& [node, address] : metrics_) {
    targets +=
        absl::StrCat("      - targets: ['", address, "']\n        labels: {node: '", node, "'}\n");
  }
  testing::WriteFileOrDie(dir_.Join("prometheus.yml"),
                          absl::StrCat("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                                       "scrape_configs:\n  - job_name: brook\n"
                                       "    static_configs:\n",
                                       targets));
  // A free port for Prometheus's web API: bind :0, read it, close.
  int port = 0;
  {
    std::string error;
    auto probe = ChildProcess::Start(
        {"/usr/bin/python3", "-c",
         "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])"},
        &error);
    ASSERT_NE(probe, nullptr) << error;
    auto line = probe->WaitForLine("", 10s);
    ASSERT_TRUE(line.has_value());
    port = std::stoi(*line);
  }
  std::string error;
  auto server = ChildProcess::Start(
      {prometheus, "--config.file=" + dir_.Join("prometheus.yml"),
       "--storage.tsdb.path=" + dir_.Join("tsdb"),
       absl::StrCat("--web.listen-address=127.0.0.1:", port), "--log.level=warn"},
      &error);
  ASSERT_NE(server, nullptr) << error;
  const std::string api = absl::StrCat("127.0.0.1:", port);
  // Prometheus's query API, URL-encoded query; the JSON reply's data.result.
  auto query = [&](const std::string& promql) -> nlohmann::json {
    std::string encoded;
    for (unsigned char c : promql) {
      if (std::isalnum(c) || c == '_') {
        encoded += static_cast<char>(c);
      } else {
        char buf[4];
        std::snprintf(buf, sizeof(buf), "%%%02X", c);
        encoded += buf;
      }
    }
    std::string err;
    auto r = testing::HttpGet(api, "/api/v1/query?query=" + encoded, 5000, &err);
    if (!r.has_value() || r->status != 200) return nlohmann::json::array();
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success") return nlohmann::json::array();
    return j["data"]["result"];
  };
  // Every target up (the first scrape lands ~5 s after start).
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  size_t up = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    up = 0;
    for (const auto& r : query("up == 1")) up += r.is_object() ? 1 : 0;
    if (up == metrics_.size()) break;
    std::this_thread::sleep_for(500ms);
  }
  ASSERT_EQ(up, metrics_.size()) << "targets up in Prometheus";
  // A series from each node type, and training progressing as a rate.
  bool progressing = false;
  while (std::chrono::steady_clock::now() < deadline + 30s && !progressing) {
    const auto rate = query("rate(brook_chief_job_examples_total[5s]) > 0");
    const auto trainer_rate = query("rate(brook_trainer_examples_total[5s]) > 0");
    progressing = !rate.empty() && !trainer_rate.empty();
    if (!progressing) std::this_thread::sleep_for(500ms);
  }
  EXPECT_TRUE(progressing) << "no positive examples rate in Prometheus";
  EXPECT_FALSE(query("brook_ps_rows_pulled_total > 0").empty());
  EXPECT_FALSE(query("brook_chief_jobs{state=\"RUNNING\"} == 1").empty());
  EXPECT_FALSE(query("brook_trainer_steps_total > 0").empty());
  EXPECT_EQ(query("brook_build_info").size(), metrics_.size());
  EXPECT_EQ(Cli({"cancel", "prom"}).exit_code, 0);
  server->Signal(SIGTERM);
  server->Wait(10s);
}

}  // namespace
}  // namespace brook
