// The chief with its background threads on (housekeeping, worker, fencer)
// under concurrent trainer calls, status readers and scrapes: the lease
// manager and the fencing as the gRPC service drives them, in process so
// that TSan (scripts/test.sh) sees every access. One trainer pauses past its
// lease: its late report is refused, its PS pushes are fenced, and the data
// ledger (examples per epoch) stays exact.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "chief/service/chief.h"
#include "chief/service/chief_metrics.h"
#include "ps/client/local_ps_client.h"
#include "ps/parameter_server.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/test_util.h"

namespace brook::chief {
namespace {

constexpr int kUnits = 12;
constexpr int kEpochs = 2;
constexpr uint64_t kRecordsPerUnit = 10;

std::string SpecFor(const testing::TempDir& dir) {
  return absl::StrCat("name: busy\ndata: {train: [", dir.path(), "/train-*.tfrecord]}\n",
                      "features:\n  label: {name: label, type: float}\n  features:\n"
                      "    - {name: C1, type: int64}\n",
                      "model: {type: lr}\nsparse:\n  - {feature: C1}\n",
                      "training: {batch_size: 8, epochs: ", kEpochs, "}\ntrainers: 4\n");
}

TEST(ChiefConcurrencyTest, TrainersReadersAndHousekeepingAtOnceKeepTheLedgerExact) {
  testing::TempDir dir;
  for (int i = 0; i < kUnits; ++i) {
    testing::WriteFileOrDie(dir.Join(absl::StrCat("train-", i, ".tfrecord")), "");
  }
  ps::ParameterServer shard(ps::ParameterServerOptions{});
  ASSERT_TRUE(shard.CreateTable(testing::CounterTable("ledger", 1)).ok());
  ps::LocalPsClient ps({&shard});

  ChiefOptions o;
  o.state_dir = dir.Join("state");
  o.lease_duration = absl::Seconds(1);
  o.tick = absl::Milliseconds(10);
  o.fence_resend = absl::Milliseconds(50);
  auto chief = Chief::Open(o, &ps);
  ASSERT_TRUE(chief.ok()) << chief.status();
  Chief* c = chief->get();
  v1::SubmitJobRequest submit;
  submit.set_spec_json(SpecFor(dir));
  auto job = c->SubmitJob(submit);
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string job_id = job->id();

  std::atomic<bool> done{false};
  std::atomic<bool> zombie_holds_a_unit{false};
  std::atomic<int> refused_reports{0}, fenced_pushes{0};
  std::mutex units_mu;
  std::set<uint64_t> unit_ids;  // guarded by units_mu
  auto trainer = [&](int index) {
    const std::string node = absl::StrCat("t", index);
    std::mt19937_64 rng(index);
    uint64_t client_id = 0;
    auto register_node = [&] {
      v1::RegisterNodeRequest r;
      r.set_role(v1::NODE_ROLE_TRAINER);
      r.set_node_id(node);
      client_id = rng() | 1;
      r.set_ps_client_id(client_id);
      ASSERT_TRUE(c->RegisterNode(r).ok());
    };
    register_node();
    bool paused_once = false;
    uint64_t sequence = 0;
    while (!done.load()) {
      v1::AcquireWorkRequest a;
      a.set_node_id(node);
      absl::StatusOr<v1::AcquireWorkResponse> w = c->AcquireWork(a);
      if (absl::IsNotFound(w.status())) {
        register_node();
        continue;
      }
      ASSERT_TRUE(w.ok()) << w.status();
      if (w->job_id().empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(units_mu);
        unit_ids.insert(w->unit().id());
      }
      // Each record is one example; its "gradient" adds 1 to the ledger key
      // of its unit on the PS, under this registration's client id.
      auto push = [&](uint64_t records) {
        const std::vector<uint64_t> key = {w->unit().id()};
        const std::vector<float> grad = {-static_cast<float>(records)};
        return shard.Push("ledger", key, grad,
                          ps::PushContext{.client_id = client_id, .sequence = ++sequence});
      };
      v1::CompleteWorkRequest r;
      r.set_node_id(node);
      r.set_job_id(w->job_id());
      r.set_unit_id(w->unit().id());
      r.set_lease_epoch(w->lease_epoch());
      const uint64_t half = std::max<uint64_t>(w->resume_offset(), kRecordsPerUnit / 2);
      if (index == 0 && !paused_once) {
        // A zombie: silent past its lease, then it wakes and carries on.
        paused_once = true;
        zombie_holds_a_unit.store(true);
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        r.set_offset(half);
        r.set_examples(half - w->resume_offset());
        if (!c->CompleteWork(r).ok()) ++refused_reports;
        if (absl::IsAborted(push(half - w->resume_offset()).status())) ++fenced_pushes;
        register_node();
        continue;
      }
      ASSERT_TRUE(push(half - w->resume_offset()).ok());
      r.set_offset(half);
      r.set_examples(half - w->resume_offset());
      ASSERT_TRUE(c->CompleteWork(r).ok());
      v1::HeartbeatRequest hb;
      hb.set_node_id(node);
      hb.set_ps_client_id(client_id);
      ASSERT_TRUE(c->Heartbeat(hb).ok());
      ASSERT_TRUE(push(kRecordsPerUnit - half).ok());
      r.set_offset(kRecordsPerUnit);
      r.set_examples(kRecordsPerUnit - half);
      r.set_done(true);
      ASSERT_TRUE(c->CompleteWork(r).ok());
    }
  };
  auto reader = [&] {
    while (!done.load()) {
      v1::GetJobRequest g;
      g.set_job_id(job_id);
      g.set_with_events(true);
      EXPECT_TRUE(c->GetJob(g).ok());
      EXPECT_TRUE(c->ListJobs().ok());
      EXPECT_FALSE(CollectChiefMetrics(c->Stats(), absl::Now()).empty());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };

  // The zombie takes its unit before the others start: otherwise they could
  // finish the job before it holds anything.
  std::vector<std::thread> threads;
  threads.emplace_back(trainer, 0);
  for (int i = 0; i < 2000 && !zombie_holds_a_unit.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!zombie_holds_a_unit.load()) {
    done.store(true);
    threads[0].join();
    FAIL() << "the first trainer never got a unit";
  }
  for (int i = 1; i < 4; ++i) threads.emplace_back(trainer, i);
  threads.emplace_back(reader);
  v1::JobStatus status;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    v1::GetJobRequest g;
    g.set_job_id(job_id);
    auto s = c->GetJob(g);
    ASSERT_TRUE(s.ok()) << s.status();
    status = *s;
    if (status.state() != "RUNNING" && status.state() != "QUEUED") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  done.store(true);
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(status.state(), "SUCCEEDED") << status.DebugString();
  ASSERT_EQ(status.examples_per_epoch_size(), kEpochs) << status.DebugString();
  for (int e = 0; e < kEpochs; ++e) {
    EXPECT_EQ(status.examples_per_epoch(e), kUnits * kRecordsPerUnit) << "epoch " << e;
  }
  EXPECT_GE(status.expired_trainers(), 1u);
  EXPECT_EQ(refused_reports.load(), 1);
  EXPECT_EQ(fenced_pushes.load(), 1) << "the zombie's push reached the PS unfenced";
  // The PS ledger: every unit's key holds exactly the examples committed for
  // it (the zombie's refused push added nothing).
  const std::vector<uint64_t> keys(unit_ids.begin(), unit_ids.end());
  ASSERT_EQ(keys.size(), static_cast<size_t>(kUnits));
  std::vector<float> counts(keys.size());
  ASSERT_TRUE(shard.Pull("ledger", keys, absl::MakeSpan(counts)).ok());
  for (size_t u = 0; u < keys.size(); ++u) {
    EXPECT_EQ(counts[u], static_cast<float>(kEpochs * kRecordsPerUnit)) << "unit " << keys[u];
  }
}

}  // namespace
}  // namespace brook::chief
