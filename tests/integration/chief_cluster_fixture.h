// The fixture of the chief's end-to-end tests: `brook ps`, `brook chief` and
// `brook trainer --chief` processes on 127.0.0.1 (ports picked at run time),
// Adult converted to TFRecord once per suite, the `brook` CLI, and reads of
// the job's status, events and the nodes' /metrics.
#pragma once

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "brook/v1/chief.pb.h"
#include "chief/client/chief_client.h"
#include "tests/testing/http_get.h"
#include "tests/testing/process.h"
#include "tests/testing/test_util.h"

namespace brook {

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
        "name: ", name, "\npriority: ", priority, "\n", "data:\n  train: [",
        data_->Join("train/train-*.tfrecord"), "]\n  eval: [", data_->Join("test/test-*.tfrecord"),
        "]\n  records_per_unit: ", records_per_unit, "\n",
        "features: ", data_->Join("train/feature_spec.yaml"), "\n",
        "model_file: ", testing::SourceDir(), "/examples/adult/wide_deep.yaml\n",
        "optimizer:\n  embedding: {type: adagrad, learning_rate: 0.1, initial_accumulator: 0.1}\n"
        "  dense: {type: adam, learning_rate: 0.003}\n",
        "training: {batch_size: ", batch_size, ", epochs: ", epochs, ", staleness: 2, seed: 1}\n",
        "trainers: ", trainers, "\n", "checkpoint: {dir: ", dir_.Join("ckpt"),
        ", interval_seconds: 600, keep: 2}\n", "export: {dir: ", dir_.Join("export"), "}\n", extra);
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
    chief_ =
        ChildProcess::Start({BrookBinary(), "chief", "--listen", absl::StrCat("127.0.0.1:", port),
                             "--metrics-listen", "127.0.0.1:0", "--state-dir",
                             dir_.Join("chief-state"), "--ps", ps, "--lease-seconds", "2"},
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
    std::vector<std::string> argv = {BrookBinary(),      "trainer",    "--node-id",       id,
                                     "--cpu-threads",    "1",          "--parse-threads", "1",
                                     "--metrics-listen", "127.0.0.1:0"};
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

  static bool IsFinished(const v1::JobStatus& j) {
    return j.state() == "SUCCEEDED" || j.state() == "FAILED" || j.state() == "CANCELLED";
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

  static inline testing::TempDir* data_ = nullptr;
  testing::TempDir dir_;
  std::vector<std::unique_ptr<ChildProcess>> ps_;
  std::vector<std::string> ps_addresses_;
  std::unique_ptr<ChildProcess> chief_;
  std::string chief_address_;
  std::unique_ptr<chief::ChiefClient> client_;
  std::map<std::string, std::unique_ptr<ChildProcess>> trainers_;
  std::map<std::string, std::string> metrics_;  // node -> its /metrics host:port
};

}  // namespace brook
