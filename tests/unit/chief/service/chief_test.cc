// The chief core in process (no gRPC, no threads: Tick and RunPendingWork by
// hand): the API calls a trainer makes, finalization, state that survives a
// restart over the same state directory, and its metrics.
#include "chief/service/chief.h"
#include "chief/service/chief_metrics.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "ps/client/local_ps_client.h"
#include "ps/parameter_server.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/test_util.h"

namespace brook::chief {
namespace {

class ChiefTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Work units need only the files to exist (records_per_unit 0: whole files).
    for (int i = 0; i < 3; ++i) {
      testing::WriteFileOrDie(dir_.Join(absl::StrCat("train-", i, ".tfrecord")), "");
    }
  }
  std::string Spec(const std::string& name, int priority = 0, int epochs = 2) {
    return absl::StrCat("name: ", name, "\npriority: ", priority, "\n", "data: {train: [",
                        dir_.path(), "/train-*.tfrecord]}\n",
                        "features:\n  label: {name: label, type: float}\n  features:\n"
                        "    - {name: C1, type: int64}\n",
                        "model: {type: lr}\nsparse:\n  - {feature: C1}\n",
                        "training: {batch_size: 8, epochs: ", epochs, "}\n");
  }
  std::unique_ptr<Chief> Open(ps::PsClient* ps = nullptr) {
    ChiefOptions o;
    o.state_dir = dir_.Join("state");
    o.ps_addresses = {"127.0.0.1:7070"};
    o.background = false;
    auto c = Chief::Open(o, ps);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  static v1::SubmitJobRequest Submit(const std::string& spec) {
    v1::SubmitJobRequest r;
    r.set_spec_json(spec);
    return r;
  }
  static v1::AcquireWorkRequest Acquire(const std::string& node) {
    v1::AcquireWorkRequest r;
    r.set_node_id(node);
    return r;
  }
  static v1::CompleteWorkRequest Report(const std::string& node, const v1::AcquireWorkResponse& w,
                                        uint64_t offset, bool done) {
    v1::CompleteWorkRequest r;
    r.set_node_id(node);
    r.set_job_id(w.job_id());
    r.set_unit_id(w.unit().id());
    r.set_lease_epoch(w.lease_epoch());
    r.set_offset(offset);
    r.set_examples(offset - w.resume_offset());
    r.set_done(done);
    return r;
  }
  void RegisterTrainer(Chief* c, const std::string& node, uint64_t ps_client_id = 0) {
    v1::RegisterNodeRequest r;
    r.set_role(v1::NODE_ROLE_TRAINER);
    r.set_node_id(node);
    r.set_ps_client_id(ps_client_id);
    auto resp = c->RegisterNode(r);
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_EQ(resp->ps_addresses_size(), 1);
    EXPECT_GT(resp->heartbeat_interval_ms(), 0);
  }
  v1::JobStatus Get(Chief* c, const std::string& id) {
    v1::GetJobRequest r;
    r.set_job_id(id);
    r.set_with_events(true);
    auto s = c->GetJob(r);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::JobStatus();
  }

  testing::TempDir dir_;
};

TEST_F(ChiefTest, TrainersWorkThroughEveryUnitOfEveryEpochThenTheJobFinalizes) {
  auto c = Open();
  auto job = c->SubmitJob(Submit(Spec("lr")));
  ASSERT_TRUE(job.ok()) << job.status();
  // "<name>-<UTC date>-<time>-<6 random hex digits>": never reused.
  EXPECT_TRUE(std::regex_match(job->id(), std::regex("lr-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}")))
      << job->id();
  const std::string id = job->id();
  EXPECT_EQ(job->state(), "RUNNING");
  RegisterTrainer(c.get(), "t0");

  int leases = 0;
  for (;;) {
    auto w = c->AcquireWork(Acquire("t0"));
    ASSERT_TRUE(w.ok()) << w.status();
    if (w->job_id().empty()) break;
    ++leases;
    EXPECT_EQ(w->table_prefix(), id + "/");
    EXPECT_FALSE(w->spec_json().empty());
    // A commit halfway, then the end (files of 10 records).
    ASSERT_TRUE(c->CompleteWork(Report("t0", *w, 4, false)).ok());
    v1::CompleteWorkRequest done = Report("t0", *w, 10, true);
    done.set_examples(6);
    ASSERT_TRUE(c->CompleteWork(done).ok());
  }
  EXPECT_EQ(leases, 6);  // 3 files x 2 epochs
  v1::JobStatus s = Get(c.get(), id);
  EXPECT_TRUE(s.finalizing());
  EXPECT_EQ(s.examples_trained(), 60u);
  ASSERT_EQ(s.examples_per_epoch_size(), 2);
  EXPECT_EQ(s.examples_per_epoch(0), 30u);

  c->Tick(absl::Now());
  c->RunPendingWork();
  s = Get(c.get(), id);
  EXPECT_EQ(s.state(), "SUCCEEDED");
  EXPECT_NE(s.message().find("not evaluated"), std::string::npos) << s.message();
  EXPECT_DOUBLE_EQ(s.progress(), 1.0);
}

TEST_F(ChiefTest, StateSurvivesARestartAndAStaleLeaseIsRefused) {
  v1::AcquireWorkResponse held;
  {
    auto c = Open();
    ASSERT_TRUE(c->SubmitJob(Submit(Spec("resume"))).ok());
    RegisterTrainer(c.get(), "t0");
    auto w = c->AcquireWork(Acquire("t0"));
    ASSERT_TRUE(w.ok() && !w->job_id().empty());
    held = *w;
    ASSERT_TRUE(c->CompleteWork(Report("t0", held, 5, false)).ok());
  }  // the chief goes away without a goodbye
  auto c = Open();
  v1::JobStatus s = Get(c.get(), "resume");
  EXPECT_EQ(s.state(), "RUNNING");
  EXPECT_EQ(s.examples_trained(), 5u);
  EXPECT_EQ(s.units_leased(), 1u);
  // The trainer carries on under its lease after the restart.
  v1::CompleteWorkRequest more = Report("t0", held, 7, false);
  more.set_examples(2);
  {
    const absl::Status st = c->CompleteWork(more).status();
    ASSERT_TRUE(st.ok()) << st.message();
  }
  // t0 falls silent; its unit goes to t1, which resumes at the committed offset.
  c->Tick(absl::Now() + absl::Seconds(60));
  RegisterTrainer(c.get(), "t1");
  auto w = c->AcquireWork(Acquire("t1"));
  ASSERT_TRUE(w.ok() && !w->job_id().empty()) << w.status() << Get(c.get(), "resume").DebugString();
  EXPECT_EQ(w->unit().id(), held.unit().id());
  EXPECT_EQ(w->resume_offset(), 7u);
  EXPECT_GT(w->lease_epoch(), held.lease_epoch());
  // t0's late report (old lease epoch) changes nothing.
  v1::CompleteWorkRequest late_report = Report("t0", held, 9, false);
  late_report.set_examples(2);
  auto late = c->CompleteWork(late_report);
  EXPECT_FALSE(late.ok());
  EXPECT_EQ(Get(c.get(), "resume").examples_trained(), 7u);
}

// A trainer presumed dead has its PS client id fenced on every PS: if it was
// only paused, the pushes it makes on waking are refused.
// A cancelled job's tables stay `retention` seconds (a look, a rescue), then
// leave every PS, once; another job's stay.
TEST_F(ChiefTest, ACancelledJobsTablesLeaveEveryPsAfterItsRetention) {
  ps::ParameterServerOptions po;
  po.num_shards = 2;
  ps::ParameterServer shard0(po);
  po.shard_index = 1;
  ps::ParameterServer shard1(po);
  ps::LocalPsClient ps({&shard0, &shard1});
  auto c = Open(&ps);
  auto job = c->SubmitJob(Submit(Spec("short") + "retention: 60\n"));
  ASSERT_TRUE(job.ok()) << job.status();
  for (const std::string& name : {job->id() + "/C1", std::string("other-job/C1")}) {
    ASSERT_TRUE(ps.CreateTable(testing::CounterTable(name, 1)).ok());
  }
  ps::DenseOptions d;
  d.name = job->id() + "/deep/w0";
  d.shape = {2};
  ASSERT_TRUE(ps.CreateDense({d}).ok());
  RegisterTrainer(c.get(), "t0");
  ASSERT_TRUE(c->AcquireWork(Acquire("t0")).ok());  // started
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job->id());
  ASSERT_TRUE(c->CancelJob(cancel).ok());

  const absl::Time now = absl::Now();
  c->Tick(now + absl::Seconds(30));
  c->RunPendingWork();
  EXPECT_EQ(shard0.Stats().tables.size() + shard1.Stats().tables.size(), 4u);  // kept
  EXPECT_EQ(Get(c.get(), job->id()).tables_dropped_time_us(), 0);
  c->Tick(now + absl::Seconds(61));
  c->RunPendingWork();
  const v1::JobStatus s = Get(c.get(), job->id());
  EXPECT_GT(s.tables_dropped_time_us(), 0);
  for (ps::ParameterServer* shard : {&shard0, &shard1}) {
    const ps::ServerStats stats = shard->Stats();
    ASSERT_EQ(stats.tables.size(), 1u);
    EXPECT_EQ(stats.tables[0].name, "other-job/C1");
    EXPECT_TRUE(stats.dense.empty());
  }
  int events = 0;
  for (const v1::ChiefJobEvent& e : s.events()) {
    events += absl::StrContains(e.text(), "dropped its 2 table parts and 1 dense") ? 1 : 0;
  }
  EXPECT_EQ(events, 1) << s.DebugString();
  c->Tick(now + absl::Seconds(120));  // once
  c->RunPendingWork();
  EXPECT_EQ(Get(c.get(), job->id()).tables_dropped_time_us(), s.tables_dropped_time_us());
}

// export.dir names the parent of the job's exports (DIR/<job id>/): one that
// is itself an export, or a checkpoint dir that is itself a checkpoint, is
// another run's; the submit is refused naming it.
TEST_F(ChiefTest, ASubmitIntoAnotherRunsExportOrCheckpointIsRefusedNamingIt) {
  auto c = Open();
  const std::string old_export = dir_.Join("exports/old-run");
  std::filesystem::create_directories(old_export);
  testing::WriteFileOrDie(old_export + "/manifest.json", "{}");
  auto refused = c->SubmitJob(Submit(Spec("into") + "export: {dir: " + old_export + "}\n"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find(old_export), std::string::npos) << refused.status();
  const std::string old_ckpt = dir_.Join("ckpt/old-run/final");
  std::filesystem::create_directories(old_ckpt + "/shard-00000-of-00001");
  refused = c->SubmitJob(Submit(Spec("into") + "checkpoint: {dir: " + old_ckpt + "}\n"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find(old_ckpt), std::string::npos) << refused.status();
  // A file, or a path the chief cannot create, fails the submit, not the
  // job's end.
  const std::string file = dir_.Join("a-file");
  testing::WriteFileOrDie(file, "x");
  refused = c->SubmitJob(Submit(Spec("into") + "export: {dir: " + file + "}\n"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("export.dir: " + file), std::string::npos)
      << refused.status();
  refused = c->SubmitJob(Submit(Spec("into") + "checkpoint: {dir: /proc/brook-ckpt}\n"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("checkpoint.dir: /proc/brook-ckpt"), std::string::npos)
      << refused.status();
  // Inside another run's export (its tables/, a sub dir) or checkpoint, or
  // one dir for both: refused too.
  std::filesystem::create_directories(old_export + "/tables/shard-00000-of-00001");
  testing::WriteFileOrDie(old_export + "/tables/shard-00000-of-00001/MANIFEST", "x");
  for (const std::string& inside :
       {old_export + "/sub", old_export + "/tables/shard-00000-of-00001/rocksdb"}) {
    refused = c->SubmitJob(Submit(Spec("into") + "export: {dir: " + inside + "}\n"));
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << inside;
    // The nearest: the export itself, or the checkpoint in its tables/.
    EXPECT_NE(refused.status().message().find(" is inside a"), std::string::npos)
        << refused.status();
    EXPECT_NE(refused.status().message().find(", " + old_export), std::string::npos)
        << refused.status();
  }
  testing::WriteFileOrDie(old_ckpt + "/shard-00000-of-00001/MANIFEST", "x");
  refused = c->SubmitJob(Submit(Spec("into") + "checkpoint: {dir: " + old_ckpt + "/x}\n"));
  EXPECT_NE(refused.status().message().find("is inside a checkpoint"), std::string::npos)
      << refused.status();
  const std::string both = dir_.Join("both");
  refused = c->SubmitJob(
      Submit(Spec("into") + "export: {dir: " + both + "}\ncheckpoint: {dir: " + both + "}\n"));
  EXPECT_NE(refused.status().message().find("is export.dir too"), std::string::npos)
      << refused.status();
  EXPECT_TRUE(c->ListJobs()->jobs().empty());
  // Their parents are fine.
  EXPECT_TRUE(
      c->SubmitJob(Submit(Spec("into") + "export: {dir: " + dir_.Join("exports") + "}\n")).ok());
}

// Evaluations and checkpoints both due at every tick (intervals smaller
// than the steps between ticks) take turns: neither starves the other.
TEST_F(ChiefTest, CheckpointsAndEvaluationsDueAtEveryTickTakeTurns) {
  ps::ParameterServer shard{ps::ParameterServerOptions{}};
  ps::LocalPsClient ps({&shard});
  auto c = Open(&ps);
  const std::string extra =
      absl::StrCat("checkpoint: {dir: ", dir_.Join("ckpt"),
                   ", interval_seconds: 0, interval_steps: 4}\n", "eval: {every_steps: 1}\n");
  std::string spec = Spec("starve") + extra;
  spec = absl::StrReplaceAll(
      spec, {{"/train-*.tfrecord]}",
              absl::StrCat("/train-*.tfrecord], eval: [", dir_.path(), "/train-0.tfrecord]}")}});
  auto job = c->SubmitJob(Submit(spec));
  ASSERT_TRUE(job.ok()) << job.status();
  RegisterTrainer(c.get(), "t0");
  auto w = c->AcquireWork(Acquire("t0"));
  ASSERT_TRUE(w.ok() && !w->job_id().empty()) << w.status();
  for (uint64_t k = 1; k <= 6; ++k) {
    v1::CompleteWorkRequest r = Report("t0", *w, k, false);
    r.set_examples(1);
    r.set_steps(5 * k);  // past the next checkpoint and the next eval each time
    ASSERT_TRUE(c->CompleteWork(r).ok());
    c->Tick(absl::Now());
    c->RunPendingWork();
  }
  const v1::JobStatus s = Get(c.get(), job->id());
  // Both due at every tick: they take turns.
  EXPECT_EQ(s.checkpoints_size(), 3) << s.DebugString();
  EXPECT_EQ(s.checkpoints(s.checkpoints_size() - 1).step(), 25);
  int evals = 0;  // the eval data here is empty: each evaluation fails, saying so
  for (const v1::ChiefJobEvent& e : s.events()) {
    evals += absl::StrContains(e.text(), "no examples") ? 1 : 0;
  }
  EXPECT_EQ(evals, 3) << s.DebugString();
}

// A chief (or PS) killed mid-checkpoint leaves a step dir no recorded
// checkpoint names: the next checkpoint of that step is not refused by it,
// and such leftovers do not outlive `keep`.
TEST_F(ChiefTest, AKilledCheckpointsLeftoverNeitherBlocksTheRetryNorOutlivesKeep) {
  ps::ParameterServer shard{ps::ParameterServerOptions{}};
  ps::LocalPsClient ps({&shard});
  auto c = Open(&ps);
  const std::string spec =
      Spec("orphan") + absl::StrCat("checkpoint: {dir: ", dir_.Join("ckpt"),
                                    ", interval_seconds: 0, interval_steps: 4, keep: 1}\n");
  auto job = c->SubmitJob(Submit(spec));
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string job_dir = dir_.Join("ckpt") + "/" + job->id();
  // What a killed attempt left: the step the first checkpoint will take, and
  // another one.
  for (const char* leftover : {"step-5/shard-00000-of-00001", "step-3/shard-00000-of-00001"}) {
    std::filesystem::create_directories(job_dir + "/" + leftover);
  }
  RegisterTrainer(c.get(), "t0");
  auto w = c->AcquireWork(Acquire("t0"));
  ASSERT_TRUE(w.ok() && !w->job_id().empty()) << w.status();
  for (uint64_t k = 1; k <= 2; ++k) {
    v1::CompleteWorkRequest r = Report("t0", *w, k, false);
    r.set_examples(1);
    r.set_steps(5 * k);
    ASSERT_TRUE(c->CompleteWork(r).ok());
    c->Tick(absl::Now());
    c->RunPendingWork();
  }
  const v1::JobStatus s = Get(c.get(), job->id());
  ASSERT_EQ(s.checkpoints_size(), 2) << s.DebugString();
  EXPECT_EQ(s.checkpoints(0).dir(), job_dir + "/step-5");
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(job_dir)) {
    left.push_back(e.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"step-10"});  // keep: 1
}

TEST_F(ChiefTest, ExpiredOrReRegisteredTrainersPsClientIdsAreFencedOnEveryPs) {
  ps::ParameterServerOptions po;
  po.num_shards = 2;
  ps::ParameterServer shard0(po);
  po.shard_index = 1;
  ps::ParameterServer shard1(po);
  for (ps::ParameterServer* s : {&shard0, &shard1}) {
    ASSERT_TRUE(s->CreateTable(testing::CounterTable("emb", 1)).ok());
  }
  ps::LocalPsClient ps({&shard0, &shard1});
  auto c = Open(&ps);
  ASSERT_TRUE(c->SubmitJob(Submit(Spec("fence"))).ok());
  RegisterTrainer(c.get(), "paused", 501);
  RegisterTrainer(c.get(), "restarted", 601);
  RegisterTrainer(c.get(), "live", 701);
  ASSERT_TRUE(c->SendFences().ok());  // nothing to fence yet
  EXPECT_TRUE(c->FencedClients().empty());

  // "restarted" registers again under a new id (a new process with the same
  // node id): the old id is fenced at once. A repeat of the same
  // registration (a lost reply) fences nothing.
  RegisterTrainer(c.get(), "restarted", 602);
  RegisterTrainer(c.get(), "restarted", 602);
  EXPECT_EQ(c->FencedClients(), std::vector<uint64_t>({601}));

  // Heartbeats carry the id too (a restarted chief learns it back).
  const absl::Time later = absl::Now() + absl::Seconds(8);
  for (auto [node, id] : {std::pair<std::string, uint64_t>{"live", 701}, {"restarted", 602}}) {
    v1::HeartbeatRequest hb;
    hb.set_node_id(node);
    hb.set_ps_client_id(id);
    ASSERT_TRUE(c->Heartbeat(hb).ok());
  }
  c->Tick(later);  // heartbeats were at ~now: nobody is 10 s late yet
  EXPECT_EQ(c->FencedClients().size(), 1u);
  c->Tick(absl::Now() + absl::Seconds(30));
  // At +30 s every trainer has missed its lease: each id is fenced, once.
  std::vector<uint64_t> fenced = c->FencedClients();
  std::sort(fenced.begin(), fenced.end());
  EXPECT_EQ(fenced, std::vector<uint64_t>({501, 601, 602, 701}));
  ASSERT_TRUE(c->SendFences().ok());

  // Every shard refuses the fenced ids and takes everybody else's pushes.
  const std::vector<uint64_t> keys = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> grads(keys.size(), -1.0f);
  for (ps::ParameterServer* s : {&shard0, &shard1}) {
    EXPECT_EQ(s->Stats().fenced_clients, 4u);
    ps::PushContext zombie{.client_id = 501, .sequence = 1};
    EXPECT_TRUE(absl::IsAborted(s->Push("emb", keys, grads, zombie).status()));
    ps::PushContext fresh{.client_id = 502, .sequence = 1};
    EXPECT_TRUE(s->Push("emb", keys, grads, fresh).ok());
  }
  // The paused trainer registers again with a new id: pushes from it apply.
  RegisterTrainer(c.get(), "paused", 502);
  EXPECT_EQ(c->FencedClients().size(), 4u);

  std::string text;
  for (const auto& family : CollectChiefMetrics(c->Stats(), absl::Now())) {
    if (family.name == "brook_chief_fenced_ps_clients_total") {
      EXPECT_EQ(family.metric.at(0).counter.value, 4);
      text = family.name;
    }
  }
  EXPECT_FALSE(text.empty()) << "brook_chief_fenced_ps_clients_total not exported";
}

TEST_F(ChiefTest, BadSpecsAndUnknownJobsAreRefusedNamingWhatIsWrong) {
  auto c = Open();
  auto bad = c->SubmitJob(Submit("name: x\n"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  std::string steps_spec = Spec("steps");
  steps_spec.replace(steps_spec.find("epochs: 2"), 9, "steps: 10");
  auto steps = c->SubmitJob(Submit(steps_spec));
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(steps.status().message().find("training.steps"), std::string::npos);
  auto nodata = c->SubmitJob(Submit(
      absl::StrCat("name: nodata\ndata: {train: [", dir_.path(), "/none-*.tfrecord]}\n",
                   "features:\n  label: {name: label, type: float}\n  features:\n"
                   "    - {name: C1, type: int64}\n",
                   "model: {type: lr}\nsparse:\n  - {feature: C1}\n", "training: {epochs: 1}\n")));
  EXPECT_EQ(nodata.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(nodata.status().message().find("data.train[0]"), std::string::npos) << nodata.status();
  v1::GetJobRequest get;
  get.set_job_id("nope-1");
  EXPECT_EQ(c->GetJob(get).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c->ListJobs()->jobs_size(), 0);
  // An unregistered trainer is told to register.
  EXPECT_EQ(c->AcquireWork(Acquire("ghost")).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ChiefTest, MetricsCountJobsByStateAndUnitsByJob) {
  auto c = Open();
  auto m = c->SubmitJob(Submit(Spec("m", 0, 1)));
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(c->SubmitJob(Submit(Spec("q", 0, 1))).ok());
  std::map<std::string, double> samples;
  for (const auto& family : CollectChiefMetrics(c->Stats(), absl::Now())) {
    for (const auto& metric : family.metric) {
      std::string key = family.name;
      for (const auto& l : metric.label) key += "," + l.name + "=" + l.value;
      samples[key] = family.type == prometheus::MetricType::Counter ? metric.counter.value
                                                                    : metric.gauge.value;
    }
  }
  EXPECT_EQ(samples["brook_chief_jobs,state=RUNNING"], 1);
  EXPECT_EQ(samples["brook_chief_jobs,state=QUEUED"], 1);
  EXPECT_EQ(samples["brook_chief_job_work_units,job=" + m->id() + ",state=pending"], 3);
  EXPECT_EQ(samples.count("brook_chief_state_save_errors_total"), 1u);
}

}  // namespace
}  // namespace brook::chief
