#include "chief/core/job_queue.h"
#include "chief/core/job_queue_state.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "brook/v1/chief.pb.h"

namespace brook::chief {
namespace {

using sharding::WorkUnit;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

// 0:[0,4) 1:[4,8) 2:[8,10) of a, 3:[0,4) 4:[4,5) of b: 15 records.
std::vector<WorkUnit> SmallPlan() {
  return sharding::PlanWorkUnits({{.path = "a", .records = 10}, {.path = "b", .records = 5}}, 4);
}

JobSubmission Sub(const std::string& name, int priority = 0, int trainers = 1, int epochs = 1) {
  return JobSubmission{.name = name,
                       .priority = priority,
                       .spec_json = "{\"name\":\"" + name + "\"}",
                       .spec_hash = "h-" + name,
                       .units = SmallPlan(),
                       .epochs = epochs,
                       .trainers = trainers,
                       .lease_duration = absl::Seconds(10)};
}

std::unique_ptr<JobQueue> MakeQueue(int max_running = 1) {
  auto queue = JobQueue::Create({.max_running_jobs = max_running});
  EXPECT_TRUE(queue.ok()) << queue.status();
  return std::move(queue).value();
}

std::string MustSubmit(JobQueue* q, const JobSubmission& sub, absl::Time now) {
  auto id = q->Submit(sub, now);
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : "";
}

JobState StateOf(const JobQueue& q, const std::string& id) {
  auto info = q.Get(id);
  EXPECT_TRUE(info.ok()) << info.status();
  return info.ok() ? info->state : JobState::kFailed;
}

std::vector<std::string> ListIds(const JobQueue& q) {
  std::vector<std::string> ids;
  for (const JobInfo& info : q.List()) ids.push_back(info.id);
  return ids;
}

// Every trainer takes a unit and completes it, round robin, until the job
// ends; returns the calls made.
int RunToEnd(JobQueue* q, const std::string& job_id, const std::vector<std::string>& trainers,
             absl::Time now) {
  int calls = 0;
  while (StateOf(*q, job_id) == JobState::kRunning && !q->Get(job_id)->finalizing && calls < 1000) {
    for (const std::string& t : trainers) {
      auto lease = q->Acquire(t, now);
      if (!lease.ok() || !lease->has_value()) continue;
      const Lease& l = (*lease)->lease;
      EXPECT_EQ((*lease)->job_id, job_id);
      EXPECT_TRUE(q->Complete(t, job_id, l.unit.id, l.lease_epoch, l.unit.end,
                              l.unit.end - l.resume_offset, now, /*steps=*/2)
                      .ok());
      ++calls;
    }
  }
  return calls;
}

TEST(JobQueueTest, PriorityThenSubmitTimeOrdersThreeJobs) {
  auto q = MakeQueue();
  const std::string low = MustSubmit(q.get(), Sub("low", 1), kT0);
  const std::string high_late = MustSubmit(q.get(), Sub("high-late", 5), kT0 + absl::Seconds(2));
  const std::string high_early = MustSubmit(q.get(), Sub("high-early", 5), kT0 + absl::Seconds(1));
  EXPECT_EQ(low, "low-1");
  EXPECT_EQ(ListIds(*q), (std::vector<std::string>{high_early, high_late, low}));

  EXPECT_EQ(q->Schedule(kT0 + absl::Seconds(3)), std::vector<std::string>{high_early});
  EXPECT_EQ(StateOf(*q, high_early), JobState::kRunning);
  EXPECT_EQ(StateOf(*q, high_late), JobState::kQueued);  // max_running_jobs 1

  ASSERT_TRUE(q->Finish(high_early, "step limit", kT0 + absl::Seconds(4)).ok());
  EXPECT_EQ(q->Schedule(kT0 + absl::Seconds(4)), std::vector<std::string>{high_late});
  ASSERT_TRUE(q->Fail(high_late, "trainer error", kT0 + absl::Seconds(5)).ok());
  EXPECT_EQ(q->Schedule(kT0 + absl::Seconds(5)), std::vector<std::string>{low});
  // Running, then finished with the latest end first.
  EXPECT_EQ(ListIds(*q), (std::vector<std::string>{low, high_late, high_early}));
  EXPECT_EQ(StateOf(*q, high_late), JobState::kFailed);
  EXPECT_EQ(q->Get(high_late)->message, "trainer error");
}

TEST(JobQueueTest, MaxRunningJobsStartsSeveral) {
  auto q = MakeQueue(/*max_running=*/2);
  const std::string a = MustSubmit(q.get(), Sub("a"), kT0);
  const std::string b = MustSubmit(q.get(), Sub("b"), kT0);
  MustSubmit(q.get(), Sub("c"), kT0);
  EXPECT_EQ(q->Schedule(kT0), (std::vector<std::string>{a, b}));
  // One trainer each, in schedule order.
  EXPECT_EQ(*q->AssignTrainer("t1", kT0), a);
  EXPECT_EQ(*q->AssignTrainer("t2", kT0), b);
  EXPECT_EQ(*q->AssignTrainer("t3", kT0), std::nullopt);
}

TEST(JobQueueTest, CancelOfRunningJobFreesItsTrainersForTheNextJob) {
  auto q = MakeQueue();
  const std::string first = MustSubmit(q.get(), Sub("first", 0, /*trainers=*/2), kT0);
  const std::string next = MustSubmit(q.get(), Sub("next", 0, /*trainers=*/2), kT0);
  q->Schedule(kT0);
  EXPECT_EQ(*q->AssignTrainer("t1", kT0), first);
  EXPECT_EQ(*q->AssignTrainer("t2", kT0), first);
  EXPECT_EQ(q->Get(first)->trainers, (std::vector<std::string>{"t1", "t2"}));
  auto lease = q->Acquire("t1", kT0);
  ASSERT_TRUE(lease.ok() && lease->has_value());

  ASSERT_TRUE(q->Cancel(first, "user asked", kT0 + absl::Seconds(1)).ok());
  EXPECT_EQ(StateOf(*q, first), JobState::kCancelled);
  EXPECT_TRUE(q->Get(first)->trainers.empty());
  EXPECT_EQ(q->JobOfTrainer("t1"), std::nullopt);
  // The old job's lease is refused: the trainer serves no job.
  const Lease& l = (*lease)->lease;
  EXPECT_EQ(q->Commit("t1", first, l.unit.id, l.lease_epoch, l.unit.begin + 1, 1, kT0).code(),
            absl::StatusCode::kFailedPrecondition);

  EXPECT_EQ(q->Schedule(kT0 + absl::Seconds(1)), std::vector<std::string>{next});
  EXPECT_EQ(q->JobOfTrainer("t1"), next);
  EXPECT_EQ(q->JobOfTrainer("t2"), next);
  EXPECT_EQ(q->Get(next)->trainers.size(), 2u);

  EXPECT_EQ(q->Cancel(first, "", kT0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(q->Cancel("nope-9", "", kT0).code(), absl::StatusCode::kNotFound);
  // A queued job cancels too.
  const std::string queued = MustSubmit(q.get(), Sub("queued"), kT0);
  EXPECT_TRUE(q->Cancel(queued, "", kT0).ok());
  EXPECT_EQ(StateOf(*q, queued), JobState::kCancelled);
}

TEST(JobQueueTest, InvalidSubmitNamesTheFieldAndChangesNothing) {
  auto q = MakeQueue();
  struct Case {
    JobSubmission sub;
    std::string field;
  };
  std::vector<Case> cases;
  for (const std::string& bad : std::vector<std::string>{"", "Upper", "under_score", "-lead",
                                                         "trail-", std::string(64, 'a')}) {
    cases.push_back({Sub("x"), "name"});
    cases.back().sub.name = bad;
  }
  cases.push_back({Sub("x", 0, /*trainers=*/0), "trainers"});
  cases.push_back({Sub("x"), "units"});
  cases.back().sub.units.clear();
  cases.push_back({Sub("x"), "units"});
  cases.back().sub.units[1].id = cases.back().sub.units[0].id;  // duplicate id
  cases.push_back({Sub("x", 0, 1, /*epochs=*/-1), "epochs"});
  cases.push_back({Sub("x"), "lease_duration"});
  cases.back().sub.lease_duration = absl::ZeroDuration();
  for (const Case& c : cases) {
    auto id = q->Submit(c.sub, kT0);
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << c.sub.name;
    EXPECT_NE(id.status().message().find(c.field), std::string::npos) << id.status();
  }
  EXPECT_TRUE(q->List().empty());
  EXPECT_EQ(q->next_seq(), 1u);
  EXPECT_EQ(MustSubmit(q.get(), Sub("ok"), kT0), "ok-1");

  // A second active job of one name; allowed again once the first is over.
  EXPECT_EQ(q->Submit(Sub("ok"), kT0).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(q->List().size(), 1u);
  ASSERT_TRUE(q->Cancel("ok-1", "", kT0).ok());
  EXPECT_EQ(MustSubmit(q.get(), Sub("ok"), kT0), "ok-2");
}

TEST(JobQueueTest, JobFinalizesWhenItsLeasesFinishFreesTrainersThenSucceeds) {
  auto q = MakeQueue();
  const std::string job = MustSubmit(q.get(), Sub("train", 0, /*trainers=*/2, /*epochs=*/2), kT0);
  const std::string after = MustSubmit(q.get(), Sub("after"), kT0);
  q->Schedule(kT0);
  EXPECT_EQ(*q->AssignTrainer("t1", kT0), job);
  EXPECT_EQ(*q->AssignTrainer("t2", kT0), job);
  // A trainer with no job gets nothing to do.
  EXPECT_EQ(q->Acquire("t3", kT0).status().code(), absl::StatusCode::kNotFound);

  RunToEnd(q.get(), job, {"t1", "t2"}, kT0 + absl::Seconds(1));
  auto info = q->Get(job);
  ASSERT_TRUE(info.ok());
  // Trained, not yet evaluated and exported: still RUNNING, holding its slot.
  EXPECT_EQ(info->state, JobState::kRunning);
  EXPECT_TRUE(info->finalizing);
  q->Schedule(kT0 + absl::Seconds(1));
  EXPECT_EQ(q->Get(after)->state, JobState::kQueued);
  EXPECT_EQ(q->JobOfTrainer("t1"), std::nullopt);
  // A finalization longer than the lease duration (10 s; the idle pool's
  // timeout is 30 s): the freed trainers are not the job's to expire.
  EXPECT_TRUE(q->Expire(kT0 + absl::Seconds(20)).empty());
  EXPECT_EQ(q->Get(job)->progress->expired_trainers, 0u);
  ASSERT_TRUE(q->Finish(job, "exported", kT0 + absl::Seconds(1)).ok());
  info = q->Get(job);
  EXPECT_EQ(info->state, JobState::kSucceeded);
  EXPECT_FALSE(info->finalizing);
  ASSERT_TRUE(info->progress.has_value());
  EXPECT_TRUE(info->progress->finished);
  EXPECT_EQ(info->progress->examples_per_epoch, (std::vector<uint64_t>{15, 15}));
  EXPECT_TRUE(info->trainers.empty());
  EXPECT_EQ(q->JobOfTrainer("t1"), std::nullopt);
  EXPECT_EQ(q->Acquire("t1", kT0).status().code(), absl::StatusCode::kFailedPrecondition);
  // Metrics and the final checkpoint may land after the end.
  EXPECT_TRUE(q->ReportMetrics(job, 0.4, 0.8, 30, kT0 + absl::Seconds(2)).ok());
  EXPECT_TRUE(q->AddCheckpoint(job, "/ckpt/train-1/final", 30, kT0 + absl::Seconds(2)).ok());
  EXPECT_EQ(q->ReportMetrics(after, 0.4, 0.8, 30, kT0).code(),
            absl::StatusCode::kFailedPrecondition);

  EXPECT_EQ(q->Schedule(kT0 + absl::Seconds(2)), std::vector<std::string>{after});
  EXPECT_EQ(q->JobOfTrainer("t1"), after);  // wants 1 trainer
  EXPECT_EQ(q->JobOfTrainer("t2"), std::nullopt);
}

// A chief killed (or stopped) while it finalized a job left it RUNNING with
// every epoch done: the restart restores it as finalizing, never refuses it.
TEST(JobQueueTest, AJobSavedWhileFinalizingRestoresAsFinalizing) {
  auto q = MakeQueue();
  const std::string job = MustSubmit(q.get(), Sub("train", 0, /*trainers=*/2, /*epochs=*/2), kT0);
  const std::string after = MustSubmit(q.get(), Sub("after"), kT0);
  q->Schedule(kT0);
  ASSERT_EQ(*q->AssignTrainer("t1", kT0), job);
  ASSERT_EQ(*q->AssignTrainer("t2", kT0), job);
  RunToEnd(q.get(), job, {"t1", "t2"}, kT0 + absl::Seconds(1));
  ASSERT_TRUE(q->Get(job)->finalizing);
  std::vector<v1::ChiefJobRecord> records;
  for (const std::string& id : q->JobIds()) records.push_back(*JobQueueCodec::ToRecord(*q, id));
  auto restored = JobQueueCodec::Restore({}, records, q->next_seq(), kT0 + absl::Seconds(2));
  ASSERT_TRUE(restored.ok()) << restored.status();
  absl::StatusOr<JobInfo> info = (*restored)->Get(job);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, JobState::kRunning);
  EXPECT_TRUE(info->finalizing);
  EXPECT_TRUE(info->trainers.empty());
  EXPECT_EQ(info->progress->steps, 2 * 5 * 2);  // 2 steps a unit, 5 units, 2 epochs
  ASSERT_TRUE((*restored)->Finish(job, "exported", kT0 + absl::Seconds(3)).ok());
  EXPECT_EQ((*restored)->Schedule(kT0 + absl::Seconds(3)), std::vector<std::string>{after});
}

// Ids come from the chief (NewJobId) and are never reused; a bad or taken
// one is refused naming the field.
TEST(JobQueueTest, GivenIdsAreCheckedAndNeverReused) {
  auto q = MakeQueue();
  JobSubmission sub = Sub("ctr");
  sub.id = NewJobId("ctr", kT0, 0xabcdef12u);
  EXPECT_EQ(sub.id, "ctr-20231114-221320-cdef12");
  EXPECT_EQ(MustSubmit(q.get(), sub, kT0), sub.id);
  ASSERT_TRUE(q->Cancel(sub.id, "", kT0).ok());
  EXPECT_EQ(q->Submit(sub, kT0).status().code(), absl::StatusCode::kAlreadyExists);
  for (const std::string bad : {"other-1", "ctr-", "ctr", "ctr-A1", "ctr-1-"}) {
    JobSubmission wrong = Sub("ctr");
    wrong.id = bad;
    absl::StatusOr<std::string> refused = q->Submit(wrong, kT0);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("id:"), std::string::npos) << refused.status();
  }
  EXPECT_EQ(q->List().size(), 1u);
}

TEST(JobQueueTest, ExpiredTrainerLeavesItsJobAndItsUnitGoesBack) {
  auto q = MakeQueue();
  const std::string job = MustSubmit(q.get(), Sub("train", 0, /*trainers=*/2), kT0);
  q->Schedule(kT0);
  ASSERT_EQ(*q->AssignTrainer("t1", kT0), job);
  ASSERT_EQ(*q->AssignTrainer("t2", kT0), job);
  auto lease = q->Acquire("t1", kT0);
  ASSERT_TRUE(lease.ok() && lease->has_value());
  ASSERT_TRUE(q->Heartbeat("t2", kT0 + absl::Seconds(8)).ok());
  EXPECT_EQ(q->Expire(kT0 + absl::Seconds(11)), std::vector<std::string>{"t1"});
  EXPECT_EQ(q->Get(job)->trainers, std::vector<std::string>{"t2"});
  EXPECT_EQ(q->Heartbeat("t1", kT0).code(), absl::StatusCode::kNotFound);
  auto again = q->Acquire("t2", kT0 + absl::Seconds(11));
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->lease.unit.id, (*lease)->lease.unit.id);
  // It comes back as a fresh trainer and fills the gap.
  EXPECT_EQ(*q->AssignTrainer("t1", kT0 + absl::Seconds(12)), job);
}

TEST(JobQueueTest, EventLogIsBoundedAndTablePrefixNamespacesTheJob) {
  auto queue = JobQueue::Create({.max_events_per_job = 3});
  ASSERT_TRUE(queue.ok());
  JobQueue* q = queue->get();
  const std::string job = MustSubmit(q, Sub("logs"), kT0);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(q->LogEvent(job, "e" + std::to_string(i), kT0).ok());
  auto info = q->Get(job);
  ASSERT_EQ(info->events.size(), 3u);
  EXPECT_EQ(info->events.back().text, "e4");
  EXPECT_EQ(info->events_dropped, 3u);  // "submitted", e0, e1
  EXPECT_EQ(TablePrefix(job), "logs-1/");
  EXPECT_EQ(JobStateName(JobState::kCancelled), "CANCELLED");
}

}  // namespace
}  // namespace brook::chief
