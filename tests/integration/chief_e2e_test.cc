// The main job end to end on 127.0.0.1 (issue 6): `brook ps` shards, a
// `brook chief` and `brook trainer --chief` processes, jobs submitted and
// watched through the `brook` CLI, the export scored with `brook predict`;
// trainers and the chief killed with -9 mid-job.
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <stdlib.h>

#include <chrono>
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
#include "tests/testing/http_get.h"
#include "tests/testing/process.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::ChildProcess;
using testing::RunCommand;
using namespace std::chrono_literals;

constexpr uint64_t kAdultTrainRows = 32561;

// Adult converted to TFRecord once for every test here.
class ChiefE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new testing::TempDir();
    const std::string shared = testing::SharedDataDir();
    auto train = RunCommand({BrookBinary(), "data", "convert", "--schema", "adult", "--shards", "2",
                             "--prefix", "train", "--out", data_->Join("train"),
                             shared + "/adult/adult.train.csv"});
    ASSERT_EQ(train.exit_code, 0) << train.output;
    auto test = RunCommand({BrookBinary(), "data", "convert", "--schema", "adult", "--shards", "2",
                            "--prefix", "test", "--out", data_->Join("test"),
                            shared + "/adult/adult.test.csv"});
    ASSERT_EQ(test.exit_code, 0) << test.output;
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }

  void TearDown() override {
    trainers_.clear();
    chief_.reset();
    ps_.clear();
  }

  // A job spec of Wide & Deep on Adult.
  std::string JobYaml(const std::string& name, int priority, int epochs, int batch_size,
                      int records_per_unit, int trainers, const std::string& extra = "") {
    return absl::StrCat(
        "name: ", name, "\npriority: ", priority, "\n",
        "data:\n  train: [", data_->Join("train/train-*.tfrecord"), "]\n  eval: [",
        data_->Join("test/test-*.tfrecord"), "]\n  records_per_unit: ", records_per_unit, "\n",
        "features: ", data_->Join("train/feature_spec.yaml"), "\n",
        "model_file: ", testing::SourceDir(), "/examples/adult/wide_deep.yaml\n",
        "optimizer:\n  embedding: {type: adagrad, learning_rate: 0.1, initial_accumulator: 0.1}\n"
        "  dense: {type: adam, learning_rate: 0.003}\n",
        "training: {batch_size: ", batch_size, ", epochs: ", epochs, ", staleness: 2, seed: 1}\n",
        "trainers: ", trainers, "\n",
        "checkpoint: {dir: ", dir_.Join("ckpt"), ", interval_seconds: 600, keep: 2}\n",
        "export: {dir: ", dir_.Join("export"), "}\n", extra);
  }
  std::string WriteJob(const std::string& file, const std::string& yaml) {
    const std::string path = dir_.Join(file);
    testing::WriteFileOrDie(path, yaml);
    return path;
  }

  // n PS processes; with data_dirs each gets --data-dir <tmp>/ps-<i> (so a
  // test can restart it over the same one), then `flags`.
  void StartPs(int n, bool data_dirs = false, const std::vector<std::string>& flags = {}) {
    for (int i = 0; i < n; ++i) {
      std::string error;
      std::vector<std::string> args;
      if (data_dirs) args = {"--data-dir", dir_.Join(absl::StrCat("ps-", i))};
      args.insert(args.end(), flags.begin(), flags.end());
      auto ps = testing::StartBrookPs(i, n, args, 30s, &error);
      ASSERT_TRUE(ps.has_value()) << error;
      ps_addresses_.push_back(ps->address);
      metrics_["ps-" + std::to_string(i)] = ps->metrics_address;
      ps_.push_back(std::move(ps->process));
    }
  }
  // `port` 0: a free one (remembered, so a restart can take it again).
  void StartChief(int port = 0) {
    std::string error;
    std::string ps;
    for (const std::string& a : ps_addresses_) ps += (ps.empty() ? "" : ",") + a;
    chief_ = ChildProcess::Start(
        {BrookBinary(), "chief", "--listen", absl::StrCat("127.0.0.1:", port), "--metrics-listen",
         "127.0.0.1:0", "--state-dir", dir_.Join("chief-state"), "--ps", ps, "--lease-seconds", "2"},
        &error);
    ASSERT_NE(chief_, nullptr) << error;
    auto line = chief_->WaitForLine("brook chief listening on", 30s);
    ASSERT_TRUE(line.has_value()) << "no listening line from brook chief";
    chief_address_ = line->substr(std::string("brook chief listening on ").size());
    metrics_["chief"] = line->substr(line->rfind(' ') + 1);
    chief_address_ = chief_address_.substr(0, chief_address_.find(' '));
    auto client = chief::ChiefClient::Connect(chief_address_);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }
  // `tf_config`: find the chief through TF_CONFIG, as a TFJob's pod does,
  // instead of --chief.
  void StartTrainer(const std::string& id, bool tf_config = false) {
    std::string error;
    std::vector<std::string> argv = {BrookBinary(), "trainer", "--node-id", id, "--cpu-threads",
                                     "1", "--parse-threads", "1", "--metrics-listen",
                                     "127.0.0.1:0"};
    if (tf_config) {
      setenv("TF_CONFIG",
             absl::StrCat(R"({"cluster": {"chief": [")", chief_address_, R"("], "ps": [")",
                          ps_addresses_[0], R"("], "worker": ["127.0.0.1:1"]},)",
                          R"( "task": {"type": "worker", "index": 0}})")
                 .c_str(),
             1);
    } else {
      argv.insert(argv.begin() + 2, {"--chief", chief_address_});
    }
    auto t = ChildProcess::Start(argv, &error);
    unsetenv("TF_CONFIG");
    ASSERT_NE(t, nullptr) << error;
    auto metrics_line = t->WaitForLine("brook trainer metrics on", 30s);
    ASSERT_TRUE(metrics_line.has_value());
    metrics_["trainer-" + id] = metrics_line->substr(metrics_line->rfind(' ') + 1);
    ASSERT_TRUE(t->WaitForLine("brook trainer", 30s).has_value());
    trainers_[id] = std::move(t);
  }

  testing::CommandResult Cli(std::vector<std::string> args, int timeout_seconds = 120) {
    args.insert(args.begin(), BrookBinary());
    args.push_back("--chief");
    args.push_back(chief_address_);
    return RunCommand(args, timeout_seconds);
  }

  v1::JobStatus Job(const std::string& id, bool with_events = false) {
    v1::GetJobRequest r;
    r.set_job_id(id);
    r.set_with_events(with_events);
    auto s = client_->GetJob(r);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::JobStatus();
  }
  // Polls until `pred` holds (true) or `timeout` passes (false).
  template <typename Pred>
  bool WaitFor(const std::string& id, Pred pred, std::chrono::seconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      v1::GetJobRequest r;
      r.set_job_id(id);
      auto s = client_->GetJob(r);
      if (s.ok() && pred(*s)) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  static void ExpectEveryEpochCountsTheDataOnce(const v1::JobStatus& job, int epochs) {
    ASSERT_EQ(job.examples_per_epoch_size(), epochs) << job.DebugString();
    for (int e = 0; e < epochs; ++e) {
      EXPECT_EQ(job.examples_per_epoch(e), kAdultTrainRows) << "epoch " << e;
      EXPECT_EQ(job.records_per_epoch(e), kAdultTrainRows) << "epoch " << e;
    }
  }

  // The sum of every sample of metric `name` (all label sets) that `node`
  // exports now; -1 if it exports none.
  double MetricSum(const std::string& node, const std::string& name) {
    std::string error;
    auto page = testing::HttpGet(metrics_[node], "/metrics", 5000, &error);
    EXPECT_TRUE(page.has_value()) << node << ": " << error;
    if (!page.has_value()) return -1;
    double sum = -1;
    for (absl::string_view line : absl::StrSplit(page->body, '\n')) {
      if (!absl::StartsWith(line, name + " ") && !absl::StartsWith(line, name + "{")) continue;
      sum = std::max(sum, 0.0) + std::stod(std::string(line.substr(line.rfind(' ') + 1)));
    }
    return sum;
  }

  // The job's event texts that contain `needle`.
  std::vector<std::string> EventsWith(const std::string& id, const std::string& needle) {
    std::vector<std::string> out;
    const v1::JobStatus job = Job(id, true);
    for (const v1::ChiefJobEvent& e : job.events()) {
      if (absl::StrContains(e.text(), needle)) out.push_back(e.text());
    }
    return out;
  }

  static testing::TempDir* data_;
  testing::TempDir dir_;
  std::vector<std::unique_ptr<ChildProcess>> ps_;
  std::vector<std::string> ps_addresses_;
  std::unique_ptr<ChildProcess> chief_;
  std::string chief_address_;
  std::unique_ptr<chief::ChiefClient> client_;
  std::map<std::string, std::unique_ptr<ChildProcess>> trainers_;
  std::map<std::string, std::string> metrics_;  // node -> its /metrics host:port
};

testing::TempDir* ChiefE2eTest::data_ = nullptr;

TEST_F(ChiefE2eTest, AdultJobThroughTheCliCompletesAndItsExportScoresAbove090) {
  StartPs(2);
  StartChief();
  StartTrainer("t0");
  StartTrainer("t1");
  const std::string job = WriteJob("adult.yaml", JobYaml("adult", 0, 4, 256, 5000, 2));

  auto submit = Cli({"submit", job});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  EXPECT_NE(submit.output.find("adult-1"), std::string::npos) << submit.output;
  auto watch = Cli({"status", "adult-1", "--watch", "--interval", "0.5"}, 300);
  ASSERT_EQ(watch.exit_code, 0) << watch.output;

  auto status = Cli({"status", "adult-1", "--output", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.output;
  const nlohmann::json j = nlohmann::json::parse(status.output);
  EXPECT_EQ(j["state"], "SUCCEEDED");
  const v1::JobStatus s = Job("adult-1");
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
  auto logs = Cli({"logs", "adult-1"});
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
  ASSERT_EQ(Cli({"submit", WriteJob("blocker.yaml", JobYaml("blocker", 0, 1000, 256, 0, 1))})
                .exit_code,
            0);
  ASSERT_TRUE(WaitFor("blocker-1", [](const v1::JobStatus& j) { return j.examples_trained() > 0; },
                      60s));
  ASSERT_EQ(Cli({"submit", WriteJob("low.yaml", JobYaml("low", 0, 1, 256, 0, 1))}).exit_code, 0);
  ASSERT_EQ(Cli({"submit", WriteJob("high.yaml", JobYaml("high", 5, 1, 256, 0, 1))}).exit_code, 0);
  EXPECT_EQ(Job("low-2").state(), "QUEUED");
  EXPECT_EQ(Job("high-3").state(), "QUEUED");

  // `brook list`: running first, then queued by priority.
  auto list = Cli({"list", "--output", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.output;
  std::vector<std::string> order;
  for (const auto& line : absl::StrSplit(list.output, '\n')) {
    if (line.empty() || line[0] != '{') continue;
    const nlohmann::json j = nlohmann::json::parse(std::string(line));
    if (j.contains("jobs")) {
      for (const auto& job : j["jobs"]) order.push_back(job["id"]);
    } else {
      order.push_back(j["id"]);
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{"blocker-1", "high-3", "low-2"})) << list.output;

  // Cancelling the running job frees its trainer for the higher-priority job.
  auto cancel = Cli({"cancel", "blocker-1"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.output;
  ASSERT_TRUE(WaitFor("high-3", [](const v1::JobStatus& j) {
    return j.state() == "RUNNING" && j.trainers_size() == 1 && j.trainers(0) == "t0";
  }, 30s)) << Job("high-3").DebugString();
  EXPECT_EQ(Job("low-2").state(), "QUEUED");
  EXPECT_EQ(Job("blocker-1").state(), "CANCELLED");
  EXPECT_EQ(Cli({"status", "blocker-1"}).exit_code, 1);  // ended, not succeeded
  EXPECT_EQ(Cli({"status", "no-such-job-7"}).exit_code, 3);

  // Invalid specs: refused before anything is queued, the field named.
  auto bad = Cli({"submit", WriteJob("bad.yaml", JobYaml("bad", 0, 1, 0, 0, 1))});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("training.batch_size"), std::string::npos) << bad.output;
  const std::string steps_yaml = absl::StrReplaceAll(JobYaml("steps", 0, 1, 64, 0, 1),
                                                     {{"epochs: 1", "steps: 100"}});
  auto steps = Cli({"submit", WriteJob("steps.yaml", steps_yaml)});
  EXPECT_EQ(steps.exit_code, 1) << steps.output;
  EXPECT_NE(steps.output.find("training.steps"), std::string::npos) << steps.output;
  v1::ListJobsRequest lr;
  auto all = client_->ListJobs(lr);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->jobs_size(), 3);

  // Cancel what is left. high-3 (one epoch) may have finished meanwhile on a
  // fast machine, and low-2 may be running or finished after it: a job that
  // ended cannot be cancelled (exit 1), anything else can.
  for (const std::string id : {"high-3", "low-2"}) {
    const testing::CommandResult cancelled = Cli({"cancel", id});
    const std::string state = Job(id).state();
    if (state != "SUCCEEDED") {
      EXPECT_EQ(cancelled.exit_code, 0) << id << ": " << cancelled.output;
      EXPECT_EQ(state, "CANCELLED") << id;
    }
  }
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
  // Kill t0 three times, each once more units are done and it holds a
  // lease, and start it again (as its pod restarts): each time the unit it
  // held goes to the next holder from its last commit.
  for (uint32_t round = 0; round < 3; ++round) {
    ASSERT_TRUE(WaitFor("kill-1", [&](const v1::JobStatus& j) {
      return j.units_done() >= 2 + 4 * round && j.units_leased() == 2;
    }, 60s)) << "round " << round;
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
    const auto leased_until = std::chrono::steady_clock::now() + 10s;
    while (Job("kill-1").units_leased() != 2 && std::chrono::steady_clock::now() < leased_until) {
    }
    trainers_["t0"]->Signal(SIGKILL);
    ASSERT_TRUE(trainers_["t0"]->Wait(10s).has_value());
    if (round < 2) StartTrainer("t0");
  }

  ASSERT_TRUE(WaitFor("kill-1", [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; },
                      240s))
      << Job("kill-1").DebugString();
  const v1::JobStatus s = Job("kill-1");
  ExpectEveryEpochCountsTheDataOnce(s, 3);
  EXPECT_GE(s.releases(), 3u);
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
  with_events.set_job_id("kill-1");
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
  ASSERT_EQ(Cli({"submit", WriteJob("resume.yaml", JobYaml("resume", 0, 3, 64, 2000, 2))})
                .exit_code,
            0);
  ASSERT_TRUE(WaitFor("resume-1", [](const v1::JobStatus& j) { return j.units_done() >= 3; }, 60s));
  const uint64_t before = Job("resume-1").examples_trained();
  chief_->Signal(SIGKILL);
  ASSERT_TRUE(chief_->Wait(10s).has_value());
  std::this_thread::sleep_for(500ms);  // the trainers keep training, and retry the chief
  StartChief(port);

  const v1::JobStatus resumed = Job("resume-1");
  EXPECT_EQ(resumed.state(), "RUNNING");
  EXPECT_GE(resumed.examples_trained(), before);  // nothing acknowledged was forgotten
  ASSERT_TRUE(WaitFor("resume-1", [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; },
                      240s))
      << Job("resume-1").DebugString();
  const v1::JobStatus s = Job("resume-1");
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
  ASSERT_EQ(Cli({"submit", WriteJob("pskill.yaml", JobYaml("pskill", 0, 2, 64, 4000, 2))}).exit_code,
            0);
  ASSERT_TRUE(WaitFor("pskill-1", [](const v1::JobStatus& j) { return j.units_done() >= 2; }, 60s));
  std::string error;
  auto before = testing::HttpGet(metrics_["ps-1"], "/metrics", 5000, &error);
  ASSERT_TRUE(before.has_value()) << error;
  const double rows_before = SumOfMetric(before->body, "brook_ps_table_rows");
  ASSERT_GT(rows_before, 0);
  ASSERT_TRUE(ps_[1]->Signal(SIGKILL));
  ASSERT_TRUE(ps_[1]->Wait(10s).has_value());

  auto again = testing::StartBrookPs(1, 2, {"--data-dir", dir_.Join("ps-1")}, 60s, &error,
                                     ps_addresses_[1]);
  ASSERT_TRUE(again.has_value()) << error;
  ps_[1] = std::move(again->process);
  auto after = testing::HttpGet(again->metrics_address, "/metrics", 5000, &error);
  ASSERT_TRUE(after.has_value()) << error;
  // Rows are only ever added in this job: the restart lost none.
  EXPECT_GE(SumOfMetric(after->body, "brook_ps_table_rows"), rows_before);

  ASSERT_TRUE(WaitFor("pskill-1", [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; },
                      240s))
      << Job("pskill-1").DebugString();
  const v1::JobStatus s = Job("pskill-1");
  ExpectEveryEpochCountsTheDataOnce(s, 2);
  EXPECT_GE(s.eval().auc(), 0.88);
  // The chief noticed the restart and told the job that nothing was lost.
  const std::vector<std::string> restarts = EventsWith("pskill-1", "restarted");
  ASSERT_EQ(restarts.size(), 1u) << Job("pskill-1", true).DebugString();
  EXPECT_NE(restarts[0].find("PS shard 1"), std::string::npos) << restarts[0];
  EXPECT_NE(restarts[0].find("nothing it acknowledged was lost"), std::string::npos) << restarts[0];
}

// The same kill with the WAL off (`--no-wal`): the restarted PS goes back to
// the job's last checkpoint, and the job reports what was rolled back (an
// event naming the checkpoint and the steps lost; a metric), then completes:
// the loss is bounded by the checkpoint, and the data ledger stays exact.
TEST_F(ChiefE2eTest, PsKilledWithoutItsWalRollsBackToTheCheckpointAndTheJobReportsIt) {
  StartPs(2, /*data_dirs=*/true, {"--no-wal"});
  StartChief();
  StartTrainer("t0");
  StartTrainer("t1");
  // Epochs enough to outlast a checkpoint, the kill and the restart.
  std::string yaml = JobYaml("nowal", 0, 8, 64, 4000, 2);
  yaml = absl::StrReplaceAll(yaml, {{"interval_seconds: 600", "interval_seconds: 1"}});
  ASSERT_EQ(Cli({"submit", WriteJob("nowal.yaml", yaml)}).exit_code, 0);
  ASSERT_TRUE(WaitFor("nowal-1", [](const v1::JobStatus& j) {
    return j.checkpoints_size() >= 1 && j.examples_per_epoch_size() <= 4;
  }, 60s)) << Job("nowal-1").DebugString();
  std::this_thread::sleep_for(1s);  // steps past the checkpoint, to be lost
  ASSERT_TRUE(ps_[1]->Signal(SIGKILL));
  ASSERT_TRUE(ps_[1]->Wait(10s).has_value());
  std::string error;
  auto again = testing::StartBrookPs(1, 2, {"--data-dir", dir_.Join("ps-1"), "--no-wal"}, 60s,
                                     &error, ps_addresses_[1]);
  ASSERT_TRUE(again.has_value()) << error;
  ps_[1] = std::move(again->process);

  ASSERT_TRUE(WaitFor("nowal-1", [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; },
                      240s))
      << Job("nowal-1", true).DebugString();
  const v1::JobStatus s = Job("nowal-1");
  ExpectEveryEpochCountsTheDataOnce(s, 8);
  const std::vector<std::string> rollbacks = EventsWith("nowal-1", "ROLLED BACK");
  ASSERT_EQ(rollbacks.size(), 1u) << Job("nowal-1", true).DebugString();
  EXPECT_NE(rollbacks[0].find("PS shard 1"), std::string::npos) << rollbacks[0];
  // The PS's own restart point, under its data dir, written with the job's
  // checkpoint at the same instant (the job's copy is not what it restarts from).
  EXPECT_NE(rollbacks[0].find(dir_.Join("ps-1") + "/checkpoints/ckpt-"), std::string::npos)
      << rollbacks[0];
  EXPECT_NE(rollbacks[0].find("are lost"), std::string::npos) << rollbacks[0];
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
TEST_F(ChiefE2eTest, PsFrozenMidJobTrainingResumesOnSigcontAndCountsEveryExampleOnce) {
  StartPs(2);
  StartChief();
  StartTrainer("t0");
  StartTrainer("t1");
  ASSERT_EQ(Cli({"submit", WriteJob("freeze.yaml", JobYaml("freeze", 0, 2, 64, 4000, 2))}).exit_code,
            0);
  ASSERT_TRUE(WaitFor("freeze-1", [](const v1::JobStatus& j) { return j.units_done() >= 2; }, 60s));
  ASSERT_TRUE(ps_[1]->Signal(SIGSTOP));
  std::this_thread::sleep_for(1s);  // in-flight steps drain into the frozen PS
  const uint64_t frozen_at = Job("freeze-1").examples_trained();
  std::this_thread::sleep_for(5s);  // 2.5 lease durations
  const v1::JobStatus during = Job("freeze-1");
  EXPECT_EQ(during.state(), "RUNNING");
  EXPECT_EQ(during.expired_trainers(), 0u) << "a trainer waiting on a PS lost its lease";
  // Every step needs both shards: no progress is committed while one is frozen.
  EXPECT_LE(during.examples_trained(), frozen_at + 64 * 8) << during.DebugString();
  EXPECT_TRUE(trainers_["t0"]->running());
  EXPECT_TRUE(trainers_["t1"]->running());
  ASSERT_TRUE(ps_[1]->Signal(SIGCONT));

  ASSERT_TRUE(WaitFor("freeze-1", [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; },
                      240s))
      << Job("freeze-1").DebugString();
  const v1::JobStatus s = Job("freeze-1");
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
  ASSERT_EQ(Cli({"submit", WriteJob("zombie.yaml", JobYaml("zombie", 0, epochs, 64, 4000, 2))})
                .exit_code,
            0);
  ASSERT_TRUE(WaitFor("zombie-1", [](const v1::JobStatus& j) {
    return j.units_done() >= 2 && j.units_leased() == 2;
  }, 60s));
  ASSERT_TRUE(trainers_["t0"]->Signal(SIGSTOP));
  ASSERT_TRUE(WaitFor("zombie-1", [](const v1::JobStatus& j) { return j.expired_trainers() >= 1; },
                      30s))
      << Job("zombie-1").DebugString();
  std::this_thread::sleep_for(1s);  // t1 picks up the released units
  ASSERT_TRUE(trainers_["t0"]->Signal(SIGCONT));

  ASSERT_TRUE(WaitFor("zombie-1", [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; },
                      240s))
      << Job("zombie-1").DebugString();
  const v1::JobStatus s = Job("zombie-1");
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
    targets += absl::StrCat("      - targets: ['", address, "']\n        labels: {node: '", node,
                            "'}\n");
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
  EXPECT_EQ(Cli({"cancel", "prom-1"}).exit_code, 0);
  server->Signal(SIGTERM);
  server->Wait(10s);
}

}  // namespace
}  // namespace brook
