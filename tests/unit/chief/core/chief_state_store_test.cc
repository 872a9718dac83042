#include "chief/core/chief_state_store.h"
#include "chief/core/job_queue_state.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "brook/v1/chief.pb.h"
#include "storage/rocks_db.h"
#include "tests/testing/test_util.h"

namespace brook::chief {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

JobSubmission Sub(const std::string& name, int trainers, int epochs) {
  return JobSubmission{.name = name,
                       .priority = 0,
                       .spec_json = "{}",
                       .spec_hash = "h",
                       .units = sharding::PlanWorkUnits(
                           {{.path = "a", .records = 10}, {.path = "b", .records = 5}}, 4),
                       .epochs = epochs,
                       .trainers = trainers,
                       .lease_duration = absl::Seconds(10)};
}

// The trainers' side of a run: each trainer alternately takes a unit and
// commits half of it, then completes it. What trainers hold lives here (in
// the trainer processes), so it survives a chief restart.
class Driver {
 public:
  explicit Driver(std::vector<std::string> trainers) : trainers_(std::move(trainers)) {}
  // Step i at time kT0 + i s (a trainer with nothing to take just waits).
  void Step(JobQueue* q, int i) {
    const absl::Time now = kT0 + absl::Seconds(i);
    const std::string& t = trainers_[static_cast<size_t>(i) % trainers_.size()];
    if (auto it = held_.find(t); it != held_.end()) {
      const Lease& l = it->second.lease;
      const uint64_t half = l.resume_offset + (l.unit.end - l.resume_offset) / 2;
      EXPECT_TRUE(q->Complete(t, it->second.job_id, l.unit.id, l.lease_epoch, l.unit.end,
                              l.unit.end - half, now)
                      .ok());
      held_.erase(it);
      return;
    }
    if (!q->JobOfTrainer(t).has_value()) return;
    auto lease = q->Acquire(t, now);
    if (!lease.ok() || !lease->has_value()) return;
    const Lease& l = (*lease)->lease;
    const uint64_t half = l.resume_offset + (l.unit.end - l.resume_offset) / 2;
    EXPECT_TRUE(
        q->Commit(t, (*lease)->job_id, l.unit.id, l.lease_epoch, half, half - l.resume_offset, now)
            .ok());
    held_[t] = **lease;
  }

 private:
  std::vector<std::string> trainers_;
  std::map<std::string, JobLease> held_;
};

std::unique_ptr<JobQueue> NewQueueWithJobs(absl::Time now) {
  auto q = JobQueue::Create({});
  EXPECT_TRUE(q.ok());
  EXPECT_TRUE((*q)->Submit(Sub("train", 2, 2), now).ok());
  EXPECT_TRUE((*q)->Submit(Sub("next", 1, 1), now).ok());
  (*q)->Schedule(now);
  EXPECT_EQ(*(*q)->AssignTrainer("t1", now), "train-1");
  EXPECT_EQ(*(*q)->AssignTrainer("t2", now), "train-1");
  return std::move(q).value();
}

// Runs steps [from, to) while "train-1" runs, saving after each.
int RunSteps(JobQueue* q, Driver* d, int from, int to, ChiefStateStore* store) {
  int i = from;
  for (; i < to && q->Get("train-1")->state == JobState::kRunning && !q->Get("train-1")->finalizing;
       ++i) {
    d->Step(q, i);
    if (store != nullptr) {
      EXPECT_TRUE(store->Save(*q).ok());
    }
  }
  return i;
}

TEST(ChiefStateStoreTest, RestartMidJobContinuesToTheSameEndState) {
  // Uninterrupted reference run.
  auto ref = NewQueueWithJobs(kT0);
  Driver ref_driver({"t1", "t2"});
  const int ref_steps = RunSteps(ref.get(), &ref_driver, 0, 1000, nullptr);

  testing::TempDir tmp;
  const std::string dir = tmp.Join("state");
  Driver driver({"t1", "t2"});
  int step = 0;
  {
    auto store = ChiefStateStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    auto q = NewQueueWithJobs(kT0);
    ASSERT_TRUE((*store)->Save(*q).ok());
    step = RunSteps(q.get(), &driver, 0, 7, store->get());  // t2 holds a half-done unit
    ASSERT_EQ(step, 7);
    ASSERT_TRUE(q->ReportMetrics("train-1", 0.5, 0.7, 9, kT0 + absl::Seconds(7)).ok());
    ASSERT_TRUE(q->AddCheckpoint("train-1", "/ckpt/1", 9, kT0 + absl::Seconds(7)).ok());
    ASSERT_TRUE((*store)->Save(*q).ok());
  }  // the chief goes away
  auto store = ChiefStateStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  auto loaded = (*store)->Load({}, kT0 + absl::Seconds(7));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  JobQueue* q = loaded->get();
  auto mid = q->Get("train-1");
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->state, JobState::kRunning);
  EXPECT_EQ(mid->trainers, (std::vector<std::string>{"t1", "t2"}));
  EXPECT_EQ(mid->progress->units_leased, 1u);
  EXPECT_EQ(mid->checkpoints.size(), 1u);
  EXPECT_DOUBLE_EQ(mid->metrics.auc, 0.7);
  EXPECT_EQ(q->Get("next-2")->state, JobState::kQueued);
  EXPECT_EQ(q->next_seq(), 3u);

  const int steps = RunSteps(q, &driver, step, 1000, store->get());
  EXPECT_EQ(steps, ref_steps);
  EXPECT_TRUE(q->Get("train-1")->finalizing);
  ASSERT_TRUE(q->Finish("train-1", "exported", kT0 + absl::Seconds(steps)).ok());
  ASSERT_TRUE(ref->Finish("train-1", "exported", kT0 + absl::Seconds(steps)).ok());
  auto got = q->Get("train-1");
  auto want = ref->Get("train-1");
  ASSERT_TRUE(got.ok() && want.ok());
  EXPECT_EQ(got->state, JobState::kSucceeded);
  EXPECT_EQ(want->state, JobState::kSucceeded);
  EXPECT_EQ(got->progress->examples_per_epoch, want->progress->examples_per_epoch);
  EXPECT_EQ(got->progress->records_per_epoch, want->progress->records_per_epoch);
  EXPECT_EQ(got->progress->examples_per_epoch, (std::vector<uint64_t>{15, 15}));
  EXPECT_EQ(got->progress->releases, want->progress->releases);
  EXPECT_EQ(got->end_time, want->end_time);
  // The whole lease table ends identical.
  EXPECT_EQ(JobQueueCodec::ToRecord(*q, "train-1")->leases().SerializeAsString(),
            JobQueueCodec::ToRecord(*ref, "train-1")->leases().SerializeAsString());
  // The next job starts on the freed trainers, as in the reference.
  q->Schedule(kT0 + absl::Seconds(steps));
  ref->Schedule(kT0 + absl::Seconds(steps));
  EXPECT_EQ(q->JobOfTrainer("t1"), "next-2");
  EXPECT_EQ(q->List().size(), ref->List().size());

  // And the end state itself reloads.
  ASSERT_TRUE((*store)->Save(*q).ok());
  store->reset();
  auto again = ChiefStateStore::Open(dir);
  ASSERT_TRUE(again.ok());
  auto reloaded = (*again)->Load({}, kT0 + absl::Seconds(100));
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_EQ((*reloaded)->Get("train-1")->state, JobState::kSucceeded);
  EXPECT_EQ((*reloaded)->Get("next-2")->state, JobState::kRunning);
  EXPECT_EQ((*reloaded)->Get("train-1")->events.size(), q->Get("train-1")->events.size());
}

TEST(ChiefStateStoreTest, NewDirectoryLoadsAnEmptyQueue) {
  testing::TempDir tmp;
  auto store = ChiefStateStore::Open(tmp.Join("fresh"));
  ASSERT_TRUE(store.ok()) << store.status();
  auto q = (*store)->Load({}, kT0);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE((*q)->List().empty());
  EXPECT_TRUE((*store)->Save(**q).ok());
}

// Overwrites the stored value of `seq` with a framed `payload`.
void Overwrite(const std::string& dir, uint64_t seq, const std::string& payload) {
  auto db = storage::RocksDb::Open(dir, {});
  ASSERT_TRUE(db.ok()) << db.status();
  std::string value;
  for (int i = 0; i < 4; ++i) value += static_cast<char>((payload.size() >> (8 * i)) & 0xff);
  value += payload;
  const uint64_t keys[] = {seq};
  ASSERT_TRUE((*db)->Write("chief", keys, value.data(), value.size(), {}).ok());
}

// A bad record never stops the chief: that job alone is FAILED, saying why,
// and every other job loads as it was.
TEST(ChiefStateStoreTest, CorruptEntryFailsThatJobAloneNamingWhy) {
  testing::TempDir tmp;
  const std::string dir = tmp.Join("state");
  {
    auto store = ChiefStateStore::Open(dir);
    ASSERT_TRUE(store.ok());
    auto q = NewQueueWithJobs(kT0);
    ASSERT_TRUE((*store)->Save(*q).ok());
  }
  Overwrite(dir, 2, std::string("\xff\xff\xff", 3));  // does not parse
  {
    auto store = ChiefStateStore::Open(dir);
    ASSERT_TRUE(store.ok());
    auto q = (*store)->Load({}, kT0);
    ASSERT_TRUE(q.ok()) << q.status();
    EXPECT_EQ((*q)->Get("train-1")->state, JobState::kRunning);
    absl::StatusOr<JobInfo> bad = (*q)->Get("unreadable-2");
    ASSERT_TRUE(bad.ok());
    EXPECT_EQ(bad->state, JobState::kFailed);
    EXPECT_NE(bad->message.find("'next-2'"), std::string::npos) << bad->message;
    EXPECT_NE(bad->message.find("corrupt record"), std::string::npos) << bad->message;
    // Loading the same state again gives the same answer, and saving works.
    ASSERT_TRUE((*store)->Save(**q).ok());
  }
  // A record that parses but is not self-consistent: RUNNING with no leases.
  auto fresh = NewQueueWithJobs(kT0);
  v1::ChiefJobRecord bad = *JobQueueCodec::ToRecord(*fresh, "train-1");
  bad.clear_leases();
  Overwrite(dir, 2, JobQueueCodec::ToRecord(*fresh, "next-2")->SerializeAsString());  // repaired
  Overwrite(dir, 1, bad.SerializeAsString());
  auto store = ChiefStateStore::Open(dir);
  ASSERT_TRUE(store.ok());
  auto q = (*store)->Load({}, kT0);
  ASSERT_TRUE(q.ok()) << q.status();
  absl::StatusOr<JobInfo> train = (*q)->Get("train-1");
  ASSERT_TRUE(train.ok());
  EXPECT_EQ(train->state, JobState::kFailed);
  EXPECT_NE(train->message.find("RUNNING without a lease table"), std::string::npos)
      << train->message;
  EXPECT_TRUE(train->trainers.empty());
  EXPECT_EQ((*q)->Get("next-2")->state, JobState::kQueued);
  // Its trainers are free for the next job.
  (*q)->Schedule(kT0);
  EXPECT_EQ(*(*q)->AssignTrainer("t1", kT0), "next-2");
}

}  // namespace
}  // namespace brook::chief
