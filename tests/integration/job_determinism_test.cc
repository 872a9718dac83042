// The job-lifecycle promise as a whole (docs/reliability.md "Jobs"): at
// staleness 0 a job ends with the bit-identical model of an uninterrupted
// run whatever was killed and when: trainers (with a learning-rate schedule
// on, so every step's number matters), the chief in each phase of its
// finalization. Each disturbed job runs on the same long-lived cluster as
// its reference, one after the other, so these tests also prove that jobs
// of one spec and seed train the same model under different ids.
#include <signal.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "ps/client/grpc_ps_client.h"
#include "tests/cluster/exported_model.h"
#include "tests/integration/chief_cluster_fixture.h"

namespace brook {
namespace {

using testing::ExportedModel;

ExportedModel LoadModel(const std::string& dir) {
  absl::StatusOr<ExportedModel> model = testing::LoadExportedModel(dir);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : ExportedModel{};
}

// Bit for bit: the same rows, every float's bits equal.
void ExpectSameModel(const ExportedModel& want, const ExportedModel& got, const std::string& what) {
  EXPECT_GT(want.row_count(), 100u) << what;
  EXPECT_EQ(testing::DiffExportedModels(want, got), "") << what;
}

class JobDeterminismTest : public ChiefE2eTest {
 protected:
  // Wide & Deep on Adult at staleness 0 with warmup + cosine decay: units
  // of 2000 records (17 an epoch), ~1018 steps an epoch.
  std::string ScheduledJob(const std::string& name, int epochs) {
    std::string yaml = JobYaml(name, 0, epochs, 32, 2000, 1, "eval: {every_steps: 700}\n");
    yaml = absl::StrReplaceAll(
        yaml, {{"staleness: 2", "staleness: 0"},
               {"  dense: {type: adam, learning_rate: 0.003}\n",
                "  dense: {type: adam, learning_rate: 0.003}\n"
                "  schedule: {warmup_steps: 300, decay: cosine, decay_steps: 1500}\n"}});
    return WriteJob(name + ".yaml", yaml);
  }
  // Submits; returns the job's id.
  std::string Submit(const std::string& job_file) {
    auto submit = Cli({"submit", job_file});
    EXPECT_EQ(submit.exit_code, 0) << submit.output;
    std::smatch m;
    const bool found =
        std::regex_search(submit.output, m, std::regex("[a-z0-9-]+-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}"));
    EXPECT_TRUE(found) << submit.output;
    return found ? m.str() : "";
  }
  v1::JobStatus WaitSucceeded(const std::string& id) {
    EXPECT_TRUE(WaitFor(
        id, [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; }, 240s))
        << Job(id).DebugString();
    return Job(id);
  }
  // `brook predict`'s JSON line on the job's eval data.
  std::string Predict(const std::string& export_dir) {
    auto r = RunCommand({BrookBinary(), "predict", "--model", export_dir, "--data",
                         data_->Join("test/test-*.tfrecord")},
                        120);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const size_t at = r.output.find("\"logloss\"");
    EXPECT_NE(at, std::string::npos) << r.output;
    return at == std::string::npos ? "" : r.output.substr(at, r.output.find(',', at) - at);
  }
};

TEST_F(JobDeterminismTest, TrainerKilledTwiceWithAScheduleEndsBitIdenticalToAnUninterruptedRun) {
  // One PS: a push to one shard is applied whole or not at all. (With
  // several, a kill between the shards of one step's push is the one case
  // not promised bit for bit: docs/reliability.md.)
  StartPs(1);
  StartChief();
  StartTrainer("t0");
  const std::string spec = ScheduledJob("sched", 2);
  const std::string ref_id = Submit(spec);
  const v1::JobStatus ref = WaitSucceeded(ref_id);

  const std::string id = Submit(spec);
  ASSERT_NE(id, ref_id);
  for (uint32_t round = 0; round < 2; ++round) {
    ASSERT_TRUE(WaitFor(
        id,
        [&](const v1::JobStatus& j) {
          return j.units_done() >= 4 + 12 * round && j.units_leased() == 1;
        },
        120s))
        << "round " << round;
    // A few steps into its unit, past its last commit.
    const double steps = MetricSum("trainer-t0", "brook_trainer_steps_total");
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (MetricSum("trainer-t0", "brook_trainer_steps_total") < steps + 5 &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(5ms);
    }
    trainers_["t0"]->Signal(SIGKILL);
    ASSERT_TRUE(trainers_["t0"]->Wait(10s).has_value());
    StartTrainer("t0");
  }
  const v1::JobStatus s = WaitSucceeded(id);
  ExpectEveryEpochCountsTheDataOnce(s, 2);
  EXPECT_GE(s.releases(), 2u);
  EXPECT_EQ(s.checkpoints(s.checkpoints_size() - 1).step(),
            ref.checkpoints(ref.checkpoints_size() - 1).step());
  EXPECT_EQ(s.eval().step(), ref.eval().step());
  EXPECT_GT(ref.eval().step(), 2000);  // the job's step, not a process's
  ExpectSameModel(LoadModel(ref.export_dir()), LoadModel(s.export_dir()), "trainer killed x2");
  EXPECT_EQ(Predict(ref.export_dir()), Predict(s.export_dir()));

  // Both exported, so neither job's tables stay on the PS: the chief drops
  // them (memory and RocksDB) once the export is written, and says so.
  for (const std::string& job : {ref_id, id}) {
    ASSERT_TRUE(WaitFor(
        job, [](const v1::JobStatus& j) { return j.tables_dropped_time_us() > 0; }, 30s))
        << job;
    EXPECT_EQ(EventsWith(job, "table parts and").size(), 1u) << job;
  }
  ps::GrpcPsClientOptions po;
  po.addresses = ps_addresses_;
  auto ps = ps::GrpcPsClient::Create(po);
  ASSERT_TRUE(ps.ok()) << ps.status();
  auto stats = (*ps)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const ps::ServerStats& shard : *stats) {
    EXPECT_TRUE(shard.tables.empty()) << shard.tables.front().name;
    EXPECT_TRUE(shard.dense.empty()) << shard.dense.front().name;
  }
}

TEST_F(JobDeterminismTest, PsKilledMidJobAndRestartedWithItsWalEndsBitIdentical) {
  StartPs(1, /*data_dirs=*/true);
  StartChief();
  StartTrainer("t0");
  const std::string spec = ScheduledJob("pswal", 2);
  const v1::JobStatus ref = WaitSucceeded(Submit(spec));

  const std::string id = Submit(spec);
  ASSERT_TRUE(WaitFor(
      id, [](const v1::JobStatus& j) { return j.units_done() >= 6; }, 120s));
  ASSERT_TRUE(ps_[0]->Signal(SIGKILL));
  ASSERT_TRUE(ps_[0]->Wait(10s).has_value());
  std::string error;
  auto again =
      testing::StartBrookPs(0, 1, {"--data-dir", dir_.Join("ps-0")}, 60s, &error, ps_addresses_[0]);
  ASSERT_TRUE(again.has_value()) << error;
  ps_[0] = std::move(again->process);
  const v1::JobStatus s = WaitSucceeded(id);
  ExpectEveryEpochCountsTheDataOnce(s, 2);
  EXPECT_FALSE(EventsWith(id, "replayed its write-ahead log").empty());
  ExpectSameModel(LoadModel(ref.export_dir()), LoadModel(s.export_dir()), "PS killed with its WAL");
}

// The chief's state wiped (a new install over the same PS nodes and
// directories) while the old job's tables are still on the PS (its chief
// died after the export, before it ended the job): the same spec
// resubmitted gets a new id, starts from its initializers, not from the
// old job's rows, and trains the same model. (The old job's tables stay:
// nothing remembers them; see docs/reliability.md.)
TEST_F(JobDeterminismTest, ChiefStateWipedAndTheJobResubmittedTrainsTheSameModel) {
  StartPs(1);
  setenv("BROOK_TEST_FINALIZE_PAUSE", "finish", 1);
  StartChief();
  unsetenv("BROOK_TEST_FINALIZE_PAUSE");
  const int port = std::stoi(chief_address_.substr(chief_address_.rfind(':') + 1));
  StartTrainer("t0");
  const std::string spec = ScheduledJob("wiped", 1);
  const std::string first_id = Submit(spec);
  ASSERT_TRUE(
      chief_
          ->WaitForLine(absl::StrCat("brook chief: job ", first_id, ": paused before finalizing"),
                        240s)
          .has_value());
  chief_->Signal(SIGKILL);
  ASSERT_TRUE(chief_->Wait(10s).has_value());
  std::filesystem::remove_all(dir_.Join("chief-state"));
  StartChief(port);
  const std::string id = Submit(spec);
  EXPECT_NE(id, first_id);
  const v1::JobStatus s = WaitSucceeded(id);
  ExpectSameModel(LoadModel(dir_.Join("export/" + first_id)), LoadModel(s.export_dir()),
                  "after a wipe");
}

TEST_F(JobDeterminismTest, ChiefKilledInEachFinalizationPhaseFinishesWithTheSameExport) {
  StartPs(2);
  StartChief();
  const int port = std::stoi(chief_address_.substr(chief_address_.rfind(':') + 1));
  StartTrainer("t0");
  const std::string spec = ScheduledJob("final", 1);
  const v1::JobStatus ref = WaitSucceeded(Submit(spec));
  const ExportedModel want = LoadModel(ref.export_dir());

  for (const std::string phase : {"checkpoint", "eval", "export", "finish"}) {
    // A chief that stops in `phase`: killed there, restarted as it was.
    chief_->Signal(SIGTERM);
    ASSERT_TRUE(chief_->Wait(30s).has_value()) << phase;
    setenv("BROOK_TEST_FINALIZE_PAUSE", phase.c_str(), 1);
    StartChief(port);
    unsetenv("BROOK_TEST_FINALIZE_PAUSE");
    const std::string id = Submit(spec);
    ASSERT_TRUE(
        chief_
            ->WaitForLine(
                absl::StrCat("brook chief: job ", id, ": paused before finalizing: ", phase), 240s)
            .has_value())
        << phase;
    chief_->Signal(SIGKILL);
    ASSERT_TRUE(chief_->Wait(10s).has_value()) << phase;
    StartChief(port);
    const v1::JobStatus s = WaitSucceeded(id);
    ExpectSameModel(want, LoadModel(s.export_dir()), absl::StrCat("chief killed in ", phase));
    EXPECT_EQ(s.eval().auc(), ref.eval().auc()) << phase;
    EXPECT_EQ(s.eval().step(), ref.eval().step()) << phase;
    ASSERT_GE(s.checkpoints_size(), 1) << phase;
    EXPECT_TRUE(absl::EndsWith(s.checkpoints(s.checkpoints_size() - 1).dir(), "/final")) << phase;
  }
}

}  // namespace
}  // namespace brook
