#include "chief/core/work_leases.h"
#include "chief/core/work_leases_state.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "brook/v1/chief.pb.h"

namespace brook::chief {
namespace {

using sharding::WorkUnit;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

// Two files of 10 and 5 records in units of at most 4 records:
// 0:[0,4) 1:[4,8) 2:[8,10) of a, 3:[0,4) 4:[4,5) of b.
std::vector<WorkUnit> SmallPlan() {
  std::vector<sharding::DataFile> files = {{.path = "a", .records = 10},
                                           {.path = "b", .records = 5}};
  return sharding::PlanWorkUnits(files, 4);
}

std::unique_ptr<WorkLeases> MakeLeases(std::vector<WorkUnit> units, int epochs,
                                       absl::Duration lease = absl::Seconds(10)) {
  auto leases = WorkLeases::Create(std::move(units), {.epochs = epochs, .lease_duration = lease});
  EXPECT_TRUE(leases.ok()) << leases.status();
  return std::move(leases).value();
}

Lease MustAcquire(WorkLeases* leases, const std::string& trainer, absl::Time now) {
  auto lease = leases->Acquire(trainer, now);
  EXPECT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(lease.ok() && lease->has_value());
  return lease.ok() && lease->has_value() ? **lease : Lease{};
}

TEST(WorkLeasesTest, CreateRefusesBadInput) {
  EXPECT_EQ(WorkLeases::Create({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      WorkLeases::Create({{.id = 1, .path = "a"}, {.id = 1, .path = "b"}}, {}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WorkLeases::Create({{.id = 0, .path = "a", .begin = 5, .end = 5}}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WorkLeases::Create(SmallPlan(), {.epochs = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      WorkLeases::Create(SmallPlan(), {.lease_duration = absl::ZeroDuration()}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(WorkLeasesTest, TwoEpochsWithABarrierBetweenThem) {
  auto leases = MakeLeases(SmallPlan(), /*epochs=*/2);
  EXPECT_EQ(leases->Acquire("t1", kT0).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(leases->RegisterTrainer("t1", kT0).ok());
  ASSERT_TRUE(leases->RegisterTrainer("t2", kT0).ok());

  for (int epoch = 0; epoch < 2; ++epoch) {
    // t1 takes units 0..3 of the epoch, t2 takes unit 4 and holds it.
    std::vector<Lease> held;
    for (int i = 0; i < 4; ++i) held.push_back(MustAcquire(leases.get(), "t1", kT0));
    const Lease last = MustAcquire(leases.get(), "t2", kT0);
    EXPECT_EQ(last.unit.id, 4u);
    EXPECT_EQ(last.epoch, epoch);
    for (const Lease& l : held) {
      EXPECT_EQ(l.epoch, epoch);
      EXPECT_EQ(l.resume_offset, l.unit.begin);
      EXPECT_EQ(l.lease_epoch, static_cast<uint64_t>(epoch + 1));
      // Half, then the rest through Complete.
      const uint64_t mid = l.unit.begin + (l.unit.end - l.unit.begin) / 2;
      EXPECT_TRUE(
          leases->Commit("t1", l.unit.id, l.lease_epoch, mid, mid - l.unit.begin, kT0).ok());
      EXPECT_TRUE(
          leases->Complete("t1", l.unit.id, l.lease_epoch, l.unit.end, l.unit.end - mid, kT0).ok());
    }
    // Barrier: unit 4 is still leased, so nothing of the next epoch yet.
    auto none = leases->Acquire("t1", kT0);
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());
    WorkLeasesStats stats = leases->Stats();
    EXPECT_EQ(stats.epoch, epoch);
    EXPECT_EQ(stats.units_done, 4u);
    EXPECT_EQ(stats.units_leased, 1u);
    EXPECT_EQ(stats.units_pending, 0u);
    // A commit reaching the known end completes the unit too.
    ASSERT_TRUE(leases->Commit("t2", 4, last.lease_epoch, 5, 5 - 4, kT0).ok());
    // Its repeat is harmless.
    EXPECT_TRUE(leases->Complete("t2", 4, last.lease_epoch, 5, 1, kT0).ok());
  }
  EXPECT_TRUE(leases->finished());
  EXPECT_EQ(leases->Acquire("t1", kT0).status().code(), absl::StatusCode::kOutOfRange);
  const WorkLeasesStats stats = leases->Stats();
  EXPECT_TRUE(stats.finished);
  EXPECT_EQ(stats.examples_per_epoch, (std::vector<uint64_t>{15, 15}));
  EXPECT_EQ(stats.records_per_epoch, (std::vector<uint64_t>{15, 15}));
  EXPECT_EQ(stats.releases, 0u);
  EXPECT_EQ(stats.live_trainers, 2u);
}

TEST(WorkLeasesTest, ExpiredTrainersUnitResumesAtCommittedOffsetAndItsLateReportIsRefused) {
  auto leases = MakeLeases(SmallPlan(), 1, absl::Seconds(10));
  ASSERT_TRUE(leases->RegisterTrainer("zombie", kT0).ok());
  ASSERT_TRUE(leases->RegisterTrainer("good", kT0).ok());
  const Lease first = MustAcquire(leases.get(), "zombie", kT0);
  ASSERT_EQ(first.unit.id, 0u);
  ASSERT_TRUE(leases->Commit("zombie", 0, first.lease_epoch, 3, 3, kT0).ok());

  // "good" heartbeats, "zombie" goes silent: at exactly the lease duration it
  // still holds; past it, it is expired.
  ASSERT_TRUE(leases->Heartbeat("good", kT0 + absl::Seconds(8)).ok());
  EXPECT_TRUE(leases->Expire(kT0 + absl::Seconds(10)).empty());
  EXPECT_EQ(leases->Expire(kT0 + absl::Seconds(11)), std::vector<std::string>{"zombie"});
  EXPECT_EQ(leases->Heartbeat("zombie", kT0 + absl::Seconds(11)).code(),
            absl::StatusCode::kNotFound);

  // Unit 0 comes back first, from record 3, under a higher lease epoch.
  const Lease again = MustAcquire(leases.get(), "good", kT0 + absl::Seconds(12));
  EXPECT_EQ(again.unit.id, 0u);
  EXPECT_EQ(again.resume_offset, 3u);
  EXPECT_GT(again.lease_epoch, first.lease_epoch);

  // The zombie's late report (and its completion) are refused, change nothing.
  EXPECT_EQ(leases->Commit("zombie", 0, first.lease_epoch, 4, 1, kT0).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(leases->Complete("zombie", 0, first.lease_epoch, 4, 1, kT0).code(),
            absl::StatusCode::kFailedPrecondition);
  // Even after it re-registers: the lease epoch names the old lease.
  ASSERT_TRUE(leases->RegisterTrainer("zombie", kT0 + absl::Seconds(13)).ok());
  EXPECT_EQ(leases->Commit("zombie", 0, first.lease_epoch, 4, 1, kT0).code(),
            absl::StatusCode::kFailedPrecondition);
  // Nor may the new holder report under the old epoch.
  EXPECT_EQ(leases->Commit("good", 0, first.lease_epoch, 4, 1, kT0).code(),
            absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(leases->Complete("good", 0, again.lease_epoch, 4, 1, kT0).ok());
  const WorkLeasesStats stats = leases->Stats();
  EXPECT_EQ(stats.examples_per_epoch, std::vector<uint64_t>{4});
  EXPECT_EQ(stats.releases, 1u);
  EXPECT_EQ(stats.expired_trainers, 1u);
  EXPECT_EQ(stats.live_trainers, 2u);
  EXPECT_EQ(stats.units_done, 1u);
}

// The next holder of a unit numbers its steps on from the committed ones
// (AcquireWorkResponse.resume_step): the steps go with the offset, survive a
// chief restart, start at 0 every epoch, and are unknown after a report
// that did not count them (an older trainer) or in state saved before them.
TEST(WorkLeasesTest, CommittedStepsGoToTheNextLeaseWithTheOffset) {
  auto leases = MakeLeases(SmallPlan(), 2, absl::Seconds(10));
  ASSERT_TRUE(leases->RegisterTrainer("a", kT0).ok());
  const Lease first = MustAcquire(leases.get(), "a", kT0);
  EXPECT_EQ(first.resume_step, std::optional<uint64_t>(0));
  ASSERT_TRUE(leases->Commit("a", 0, first.lease_epoch, 2, 2, kT0, 7).ok());
  ASSERT_TRUE(leases->Release("a").ok());
  ASSERT_TRUE(leases->RegisterTrainer("b", kT0).ok());
  const Lease second = MustAcquire(leases.get(), "b", kT0);
  ASSERT_EQ(second.unit.id, 0u);
  EXPECT_EQ(second.resume_offset, 2u);
  EXPECT_EQ(second.resume_step, std::optional<uint64_t>(7));

  // Through a restart.
  auto restored = WorkLeasesCodec::FromState(WorkLeasesCodec::ToState(*leases), kT0);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE((*restored)->Release("b").ok());
  ASSERT_TRUE((*restored)->RegisterTrainer("c", kT0).ok());
  EXPECT_EQ(MustAcquire(restored->get(), "c", kT0).resume_step, std::optional<uint64_t>(7));

  // State saved before steps were kept: unknown mid-unit, 0 at its start.
  v1::WorkLeasesState old = WorkLeasesCodec::ToState(*leases);
  for (v1::WorkUnitLeaseState& u : *old.mutable_units()) u.clear_committed_steps();
  auto from_old = WorkLeasesCodec::FromState(old, kT0);
  ASSERT_TRUE(from_old.ok()) << from_old.status();
  ASSERT_TRUE((*from_old)->Release("b").ok());
  ASSERT_TRUE((*from_old)->RegisterTrainer("c", kT0).ok());
  const Lease unknown = MustAcquire(from_old->get(), "c", kT0);
  EXPECT_EQ(unknown.unit.id, 0u);
  EXPECT_EQ(unknown.resume_step, std::nullopt);
  EXPECT_EQ(MustAcquire(from_old->get(), "c", kT0).resume_step, std::optional<uint64_t>(0));

  // A report without steps makes them unknown; the next epoch starts at 0.
  ASSERT_TRUE(leases->Commit("b", 0, second.lease_epoch, 3, 1, kT0).ok());
  ASSERT_TRUE(leases->Release("b").ok());
  ASSERT_TRUE(leases->RegisterTrainer("d", kT0).ok());
  const Lease third = MustAcquire(leases.get(), "d", kT0);
  EXPECT_EQ(third.resume_step, std::nullopt);
  ASSERT_TRUE(leases->Complete("d", 0, third.lease_epoch, 4, 1, kT0).ok());
  while (leases->Stats().epoch == 0) {
    const Lease l = MustAcquire(leases.get(), "d", kT0);
    ASSERT_TRUE(leases->Complete("d", l.unit.id, l.lease_epoch, l.unit.end, 0, kT0).ok());
  }
  EXPECT_EQ(MustAcquire(leases.get(), "d", kT0).resume_step, std::optional<uint64_t>(0));
}

// The job's step is the steps every unit-epoch committed: a lease's step
// base is it without the unit's own steps, so a unit's next holder numbers
// its steps as the dead one did, and the count survives a restart.
TEST(WorkLeasesTest, JobStepIsEveryUnitEpochsStepsAndALeaseStartsFromIt) {
  auto leases = MakeLeases(SmallPlan(), 2, absl::Seconds(10));
  ASSERT_TRUE(leases->RegisterTrainer("a", kT0).ok());
  const Lease u0 = MustAcquire(leases.get(), "a", kT0);
  EXPECT_EQ(u0.step_base, 0);
  ASSERT_TRUE(leases->Complete("a", u0.unit.id, u0.lease_epoch, u0.unit.end, 4, kT0, 3).ok());
  EXPECT_EQ(leases->JobSteps(), 3);
  const Lease u1 = MustAcquire(leases.get(), "a", kT0);
  EXPECT_EQ(u1.step_base, 3);
  ASSERT_TRUE(leases->Commit("a", u1.unit.id, u1.lease_epoch, u1.unit.begin + 2, 2, kT0, 2).ok());
  EXPECT_EQ(leases->JobSteps(), 5);
  EXPECT_EQ(*leases->StepBase(u1.unit.id), 3);  // its own steps are not in its base
  // A second trainer's unit starts past both.
  ASSERT_TRUE(leases->RegisterTrainer("b", kT0).ok());
  const Lease u2 = MustAcquire(leases.get(), "b", kT0);
  EXPECT_EQ(u2.step_base, 5);
  ASSERT_TRUE(leases->Commit("b", u2.unit.id, u2.lease_epoch, u2.unit.begin + 1, 1, kT0, 1).ok());
  EXPECT_EQ(*leases->StepBase(u1.unit.id), 4);  // moved on by b's commit

  // "a" dies: its committed steps stay in the job's step, and the unit's
  // next holder resumes at the same job step.
  ASSERT_TRUE(leases->Release("a").ok());
  EXPECT_EQ(leases->JobSteps(), 6);
  auto restored = WorkLeasesCodec::FromState(WorkLeasesCodec::ToState(*leases), kT0);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->JobSteps(), 6);
  ASSERT_TRUE((*restored)->RegisterTrainer("c", kT0).ok());
  const Lease again = MustAcquire(restored->get(), "c", kT0);
  ASSERT_EQ(again.unit.id, u1.unit.id);
  EXPECT_EQ(again.step_base + static_cast<int64_t>(*again.resume_step), 6);
  EXPECT_EQ(again.step_base, 4);
  EXPECT_EQ((*restored)->Stats().steps, 6);

  // Completing every unit of both epochs: the job's step is the sum of the
  // units' steps over the epochs, and never goes backwards at an epoch's end.
  WorkLeases* l = restored->get();
  ASSERT_TRUE(l->Complete("c", again.unit.id, again.lease_epoch, again.unit.end, 0, kT0, 3).ok());
  ASSERT_TRUE(l->Complete("b", u2.unit.id, u2.lease_epoch, u2.unit.end, 0, kT0, 2).ok());
  int64_t last = l->JobSteps();
  EXPECT_EQ(last, 3 + 3 + 2);
  while (!l->finished()) {
    const Lease next = MustAcquire(l, "c", kT0);
    EXPECT_EQ(next.step_base, last);
    ASSERT_TRUE(l->Complete("c", next.unit.id, next.lease_epoch, next.unit.end, 0, kT0, 1).ok());
    EXPECT_EQ(l->JobSteps(), last + 1);
    last = l->JobSteps();
  }
  EXPECT_EQ(last, 8 + 2 + 5);  // epoch 0's last two units, then epoch 1's five
  EXPECT_EQ(l->StepBase(99).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WorkLeasesTest, ReleaseAndReRegisterGiveUnitsBackAtTheFront) {
  auto leases = MakeLeases(SmallPlan(), 1);
  ASSERT_TRUE(leases->RegisterTrainer("t", kT0).ok());
  const Lease a = MustAcquire(leases.get(), "t", kT0);
  const Lease b = MustAcquire(leases.get(), "t", kT0);
  EXPECT_EQ(leases->LeasesOf("t").size(), 2u);
  ASSERT_TRUE(leases->Commit("t", b.unit.id, b.lease_epoch, 6, 2, kT0).ok());
  ASSERT_TRUE(leases->Release("t").ok());
  EXPECT_EQ(leases->Release("t").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(leases->LeasesOf("t").empty());
  ASSERT_TRUE(leases->RegisterTrainer("u", kT0).ok());
  const Lease a2 = MustAcquire(leases.get(), "u", kT0);
  const Lease b2 = MustAcquire(leases.get(), "u", kT0);
  EXPECT_EQ(a2.unit.id, a.unit.id);
  EXPECT_EQ(b2.unit.id, b.unit.id);
  EXPECT_EQ(b2.resume_offset, 6u);
  // Registering again (a restarted process) takes back what it held.
  ASSERT_TRUE(leases->RegisterTrainer("u", kT0).ok());
  EXPECT_TRUE(leases->LeasesOf("u").empty());
  EXPECT_EQ(leases->Stats().releases, 4u);
  EXPECT_EQ(leases->Stats().units_pending, 5u);
}

TEST(WorkLeasesTest, BadOffsetsAreRefusedAndChangeNothing) {
  auto leases = MakeLeases(SmallPlan(), 1);
  ASSERT_TRUE(leases->RegisterTrainer("t", kT0).ok());
  const Lease l = MustAcquire(leases.get(), "t", kT0);  // unit 0: [0, 4)
  ASSERT_TRUE(leases->Commit("t", 0, l.lease_epoch, 2, 2, kT0).ok());
  const v1::WorkLeasesState before = WorkLeasesCodec::ToState(*leases);

  EXPECT_EQ(leases->Commit("t", 0, l.lease_epoch, 1, 0, kT0).code(),
            absl::StatusCode::kFailedPrecondition);  // backwards
  EXPECT_EQ(leases->Commit("t", 0, l.lease_epoch, 5, 3, kT0).code(),
            absl::StatusCode::kFailedPrecondition);  // past the end
  EXPECT_EQ(leases->Complete("t", 0, l.lease_epoch, 3, 1, kT0).code(),
            absl::StatusCode::kFailedPrecondition);  // not at the end
  EXPECT_EQ(leases->Commit("t", 0, l.lease_epoch, 3, 2, kT0).code(),
            absl::StatusCode::kInvalidArgument);  // more examples than records
  EXPECT_EQ(leases->Commit("t", 99, l.lease_epoch, 3, 1, kT0).code(),
            absl::StatusCode::kInvalidArgument);  // unknown unit
  EXPECT_EQ(leases->Commit("t", 1, 1, 5, 1, kT0).code(),
            absl::StatusCode::kFailedPrecondition);  // not leased
  EXPECT_EQ(leases->Commit("other", 0, l.lease_epoch, 3, 1, kT0).code(),
            absl::StatusCode::kFailedPrecondition);                    // someone else's lease
  EXPECT_TRUE(leases->Commit("t", 0, l.lease_epoch, 2, 2, kT0).ok());  // a repeat: no effect

  EXPECT_EQ(WorkLeasesCodec::ToState(*leases).SerializeAsString(), before.SerializeAsString());
  EXPECT_EQ(leases->Stats().examples_per_epoch, std::vector<uint64_t>{2});
}

TEST(WorkLeasesTest, UnitOfUnknownEndLearnsItOnComplete) {
  auto leases = MakeLeases({{.id = 7, .path = "f", .begin = 0, .end = 0}}, 2);
  ASSERT_TRUE(leases->RegisterTrainer("t", kT0).ok());
  Lease l = MustAcquire(leases.get(), "t", kT0);
  EXPECT_EQ(l.unit.end, 0u);
  ASSERT_TRUE(leases->Commit("t", 7, l.lease_epoch, 100, 90, kT0).ok());  // no end to check
  ASSERT_TRUE(leases->Complete("t", 7, l.lease_epoch, 120, 20, kT0).ok());
  l = MustAcquire(leases.get(), "t", kT0);
  EXPECT_EQ(l.epoch, 1);
  EXPECT_EQ(l.unit.end, 120u);
  EXPECT_EQ(leases->Commit("t", 7, l.lease_epoch, 121, 1, kT0).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(leases->Complete("t", 7, l.lease_epoch, 120, 120, kT0).ok());
  EXPECT_TRUE(leases->finished());
  EXPECT_EQ(leases->Stats().examples_per_epoch, (std::vector<uint64_t>{110, 120}));
}

TEST(WorkLeasesTest, RoundTripMidJobContinuesToTheSameEnd) {
  // Drives two tables in lockstep, one of them restored from its proto (also
  // through bytes) half way; both end in the same state.
  auto plain = MakeLeases(SmallPlan(), 2);
  auto restored = MakeLeases(SmallPlan(), 2);
  absl::Time now = kT0;
  auto step = [&](WorkLeases* leases, int i) {
    const std::string t = i % 2 ? "odd" : "even";
    // A unit left half done earlier is finished first.
    if (const std::vector<Lease> held = leases->LeasesOf(t); !held.empty()) {
      const Lease& l = held.front();
      ASSERT_TRUE(
          leases
              ->Complete(t, l.unit.id, l.lease_epoch, l.unit.end, l.unit.end - l.resume_offset, now)
              .ok());
      return;
    }
    auto got = leases->Acquire(t, now);
    ASSERT_TRUE(got.ok()) << got.status();
    if (!got->has_value()) return;
    const Lease l = **got;
    const uint64_t mid = (l.resume_offset + l.unit.end) / 2;
    ASSERT_TRUE(leases->Commit(t, l.unit.id, l.lease_epoch, mid, mid - l.resume_offset, now).ok());
    if (i % 3 != 0) {
      ASSERT_TRUE(
          leases->Complete(t, l.unit.id, l.lease_epoch, l.unit.end, l.unit.end - mid, now).ok());
    }
  };
  for (WorkLeases* leases : {plain.get(), restored.get()}) {
    ASSERT_TRUE(leases->RegisterTrainer("even", now).ok());
    ASSERT_TRUE(leases->RegisterTrainer("odd", now).ok());
  }
  int i = 0;
  for (; i < 5; ++i) {
    step(plain.get(), i);
    step(restored.get(), i);
  }
  ASSERT_FALSE(plain->finished());
  std::string bytes = WorkLeasesCodec::ToState(*restored).SerializeAsString();
  v1::WorkLeasesState parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  auto back = WorkLeasesCodec::FromState(parsed, now);
  ASSERT_TRUE(back.ok()) << back.status();
  restored = std::move(back).value();
  EXPECT_EQ(WorkLeasesCodec::ToState(*restored).SerializeAsString(), bytes);

  // Units left half done (i % 3 == 0) are still leased: expire both trainers
  // past the lease so everything left gets re-leased.
  now += absl::Minutes(1);
  for (WorkLeases* leases : {plain.get(), restored.get()}) {
    EXPECT_EQ(leases->Expire(now).size(), 2u);
    ASSERT_TRUE(leases->RegisterTrainer("even", now).ok());
    ASSERT_TRUE(leases->RegisterTrainer("odd", now).ok());
  }
  for (; i < 200 && !plain->finished(); ++i) {
    step(plain.get(), i + 1);  // + 1: i % 3 == 0 completes now and then
    step(restored.get(), i + 1);
    now += absl::Seconds(1);
    if (i % 7 == 0) {
      for (WorkLeases* leases : {plain.get(), restored.get()}) {
        ASSERT_TRUE(leases->Heartbeat("even", now).ok());
        ASSERT_TRUE(leases->Heartbeat("odd", now).ok());
      }
    }
  }
  EXPECT_TRUE(plain->finished());
  EXPECT_TRUE(restored->finished());
  EXPECT_EQ(WorkLeasesCodec::ToState(*restored).SerializeAsString(),
            WorkLeasesCodec::ToState(*plain).SerializeAsString());
  EXPECT_EQ(restored->Stats().examples_per_epoch, (std::vector<uint64_t>{15, 15}));
}

TEST(WorkLeasesTest, RestoreKeepsLeasesAndRestartsHeartbeatClocks) {
  auto leases = MakeLeases(SmallPlan(), 1, absl::Seconds(10));
  ASSERT_TRUE(leases->RegisterTrainer("t", kT0).ok());
  const Lease l = MustAcquire(leases.get(), "t", kT0);
  // The chief was down for a minute: the restored one does not expire "t" at once.
  const absl::Time restart = kT0 + absl::Minutes(1);
  auto back = WorkLeasesCodec::FromState(WorkLeasesCodec::ToState(*leases), restart);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE((*back)->Expire(restart + absl::Seconds(5)).empty());
  EXPECT_TRUE((*back)->Commit("t", l.unit.id, l.lease_epoch, 1, 1, restart).ok());
  EXPECT_EQ((*back)->Expire(restart + absl::Seconds(20)), std::vector<std::string>{"t"});
}

TEST(WorkLeasesTest, FromProtoRefusesInconsistentState) {
  auto leases = MakeLeases(SmallPlan(), 1);
  ASSERT_TRUE(leases->RegisterTrainer("t", kT0).ok());
  MustAcquire(leases.get(), "t", kT0);
  const v1::WorkLeasesState good = WorkLeasesCodec::ToState(*leases);
  ASSERT_TRUE(WorkLeasesCodec::FromState(good, kT0).ok());

  v1::WorkLeasesState bad = good;
  bad.clear_trainers();  // unit 0's holder is unknown
  EXPECT_EQ(WorkLeasesCodec::FromState(bad, kT0).status().code(), absl::StatusCode::kDataLoss);
  bad = good;
  bad.add_queue(0);  // leased and queued
  EXPECT_EQ(WorkLeasesCodec::FromState(bad, kT0).status().code(), absl::StatusCode::kDataLoss);
  bad = good;
  bad.mutable_units(1)->set_committed(99);
  EXPECT_EQ(WorkLeasesCodec::FromState(bad, kT0).status().code(), absl::StatusCode::kDataLoss);
  bad = good;
  bad.set_epoch(3);
  EXPECT_EQ(WorkLeasesCodec::FromState(bad, kT0).status().code(), absl::StatusCode::kDataLoss);
  bad = good;
  bad.set_lease_duration_ms(0);
  EXPECT_EQ(WorkLeasesCodec::FromState(bad, kT0).status().code(), absl::StatusCode::kDataLoss);
}

// ---------------------------------------------------------------------------
// Randomized simulation: trainers acquire and commit in random steps, some go
// silent and come back later with stale reports, the chief is persisted and
// restored at random points. The ledger of accepted commits must tile every
// unit exactly once per epoch.

struct SimTrainer {
  std::string id;
  bool registered = false;  // as far as this trainer knows
  bool silent = false;      // stopped heartbeating ("paused" or dead)
  bool expired = false;     // the chief said so (Expire returned it)
  struct Held {
    Lease lease;
    uint64_t local = 0;  // what this trainer believes is committed
    uint64_t last_examples = 0;
  };
  std::vector<Held> held;
};

struct Range {
  uint64_t begin, end;
  bool operator<(const Range& o) const { return begin < o.begin; }
};

struct SimTotals {
  uint64_t refused_stale = 0, restores = 0, releases = 0, expired = 0;
  SimTotals& operator+=(const SimTotals& o) {
    refused_stale += o.refused_stale;
    restores += o.restores;
    releases += o.releases;
    expired += o.expired;
    return *this;
  }
};

void RunSimulation(uint32_t seed, SimTotals* totals) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  auto uniform = [&](uint64_t lo, uint64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };

  // Data: 1-4 files of 1-40 records; some files of unknown size (one unit).
  std::vector<sharding::DataFile> files;
  std::map<std::string, uint64_t> true_size;
  const int num_files = static_cast<int>(uniform(1, 4));
  uint64_t dataset = 0;
  for (int f = 0; f < num_files; ++f) {
    const std::string path = "file" + std::to_string(f);
    const uint64_t records = uniform(1, 40);
    true_size[path] = records;
    dataset += records;
    files.push_back({.path = path, .records = chance(0.2) ? 0 : records});
  }
  const std::vector<WorkUnit> units = sharding::PlanWorkUnits(files, uniform(1, 12));
  auto unit_end = [&](const WorkUnit& u) { return u.end != 0 ? u.end : true_size[u.path]; };
  const int epochs = static_cast<int>(uniform(1, 3));
  const absl::Duration lease = absl::Seconds(10);
  auto leases = MakeLeases(units, epochs, lease);

  std::vector<SimTrainer> trainers(uniform(1, 5));
  for (size_t i = 0; i < trainers.size(); ++i) trainers[i].id = "trainer-" + std::to_string(i);

  std::map<std::pair<int64_t, uint32_t>, std::vector<Range>> ledger;  // accepted commits only
  std::vector<uint64_t> examples(epochs, 0);
  absl::Time now = kT0;
  int64_t highest_epoch_leased = 0;
  uint64_t refused_stale = 0;
  uint64_t restores = 0;

  // Where the accepted commits of a unit got to in the lease's epoch.
  auto committed_in_ledger = [&](const Lease& l) {
    uint64_t at = l.unit.begin;
    for (const Range& r : ledger[{l.epoch, l.unit.id}]) at = std::max(at, r.end);
    return at;
  };
  auto ledger_complete = [&](int64_t epoch) {
    for (const WorkUnit& u : units) {
      std::vector<Range> r = ledger[{epoch, u.id}];
      std::sort(r.begin(), r.end());
      uint64_t at = u.begin;
      for (const Range& x : r) {
        if (x.begin != at) return false;
        at = x.end;
      }
      if (at != unit_end(u)) return false;
    }
    return true;
  };

  // A lease handed to trainer t.
  auto take = [&](SimTrainer& t, const Lease& l) {
    if (l.epoch > highest_epoch_leased) {
      // Barrier: the previous epoch is wholly committed before any unit of this one.
      ASSERT_EQ(l.epoch, highest_epoch_leased + 1);
      ASSERT_TRUE(ledger_complete(highest_epoch_leased));
      highest_epoch_leased = l.epoch;
    }
    ASSERT_EQ(l.epoch, highest_epoch_leased);
    ASSERT_EQ(l.resume_offset, committed_in_ledger(l));
    t.held.push_back({.lease = l, .local = l.resume_offset, .last_examples = 0});
  };

  // Reports the next step of held lease h; `stale` says the chief must refuse it.
  auto report = [&](SimTrainer& t, SimTrainer::Held& h, bool stale) {
    const uint64_t end = unit_end(h.lease.unit);
    if (h.local == end) return;
    const uint64_t to = std::min(end, h.local + uniform(1, 6));
    const uint64_t n = to - h.local;
    const bool complete = to == end && (h.lease.unit.end == 0 || chance(0.5));
    const absl::Status s =
        complete ? leases->Complete(t.id, h.lease.unit.id, h.lease.lease_epoch, to, n, now)
                 : leases->Commit(t.id, h.lease.unit.id, h.lease.lease_epoch, to, n, now);
    if (stale) {
      ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      ++refused_stale;
      return;
    }
    ASSERT_TRUE(s.ok()) << s;
    ledger[{h.lease.epoch, h.lease.unit.id}].push_back({h.local, to});
    examples[h.lease.epoch] += n;
    h.local = to;
    h.last_examples = n;
    // Now and then, the transport delivers the same report twice.
    if (chance(0.1)) {
      ASSERT_TRUE(leases->Commit(t.id, h.lease.unit.id, h.lease.lease_epoch, to, n, now).ok());
    }
  };

  int iterations = 0;
  while (!leases->finished()) {
    ASSERT_LT(++iterations, 100'000) << "no progress";
    now += absl::Milliseconds(uniform(0, 3000));
    for (const std::string& id : leases->Expire(now)) {
      for (SimTrainer& t : trainers) {
        if (t.id == id) t.expired = true;
      }
    }
    if (chance(0.01)) {  // the chief restarts from its persisted state
      v1::WorkLeasesState state;
      ASSERT_TRUE(state.ParseFromString(WorkLeasesCodec::ToState(*leases).SerializeAsString()));
      auto back = WorkLeasesCodec::FromState(state, now);
      ASSERT_TRUE(back.ok()) << back.status();
      leases = std::move(back).value();
      ++restores;
    }
    SimTrainer& t = trainers[uniform(0, trainers.size() - 1)];
    if (t.silent) {
      if (!chance(0.05)) continue;
      // Back from a pause. If the chief expired it meanwhile, every report it
      // still had in flight is a zombie's and must be refused.
      t.silent = false;
      if (t.expired) {
        std::vector<SimTrainer::Held> stale = std::move(t.held);
        t.held.clear();
        if (chance(0.5)) {
          // It registers again and leases first (maybe the very unit it had),
          // then the old reports arrive: only the lease epoch tells them apart.
          ASSERT_TRUE(leases->RegisterTrainer(t.id, now).ok());
          t.expired = false;
          auto got = leases->Acquire(t.id, now);
          ASSERT_TRUE(got.ok() || got.status().code() == absl::StatusCode::kOutOfRange);
          if (got.ok() && got->has_value()) take(t, **got);
          if (::testing::Test::HasFatalFailure()) return;
          for (SimTrainer::Held& h : stale) {
            report(t, h, /*stale=*/true);
            if (::testing::Test::HasFatalFailure()) return;
          }
          continue;
        }
        for (SimTrainer::Held& h : stale) {
          report(t, h, /*stale=*/true);
          if (::testing::Test::HasFatalFailure()) return;
        }
        EXPECT_EQ(leases->Heartbeat(t.id, now).code(), absl::StatusCode::kNotFound);
        t.held.clear();
        t.registered = false;
      }
      continue;
    }
    if (!t.registered) {
      ASSERT_TRUE(leases->RegisterTrainer(t.id, now).ok());
      t.registered = true;
      t.expired = false;
      continue;
    }
    if (t.expired) {  // alive but too slow: it finds out on its next call
      ASSERT_EQ(leases->Heartbeat(t.id, now).code(), absl::StatusCode::kNotFound);
      for (SimTrainer::Held& h : t.held) {
        report(t, h, /*stale=*/true);
        if (::testing::Test::HasFatalFailure()) return;
      }
      t.held.clear();
      t.registered = false;
      continue;
    }
    const uint64_t action = uniform(0, 99);
    if (action < 3) {
      t.silent = true;  // pauses, maybe long enough to be expired
    } else if (action < 5) {
      ASSERT_TRUE(leases->Release(t.id).ok());
      t.held.clear();
      t.registered = false;
    } else if (action < 25) {
      ASSERT_TRUE(leases->Heartbeat(t.id, now).ok());
    } else if (action < 50 || t.held.empty()) {
      auto got = leases->Acquire(t.id, now);
      if (!got.ok()) {
        ASSERT_EQ(got.status().code(), absl::StatusCode::kOutOfRange) << got.status();
        ASSERT_TRUE(leases->finished());
        continue;
      }
      if (!got->has_value()) continue;
      take(t, **got);
      if (::testing::Test::HasFatalFailure()) return;
    } else {
      const size_t k = uniform(0, t.held.size() - 1);
      report(t, t.held[k], /*stale=*/false);
      if (::testing::Test::HasFatalFailure()) return;
      if (t.held[k].local == unit_end(t.held[k].lease.unit)) t.held.erase(t.held.begin() + k);
    }
  }

  // The data ledger: every record of every unit exactly once per epoch.
  for (int64_t e = 0; e < epochs; ++e) {
    for (const WorkUnit& u : units) {
      std::vector<Range> r = ledger[{e, u.id}];
      std::sort(r.begin(), r.end());
      uint64_t at = u.begin;
      for (const Range& x : r) {
        ASSERT_EQ(x.begin, at) << "epoch " << e << " unit " << u.id
                               << (x.begin < at ? ": overlap" : ": gap");
        ASSERT_LT(x.begin, x.end);
        at = x.end;
      }
      ASSERT_EQ(at, unit_end(u)) << "epoch " << e << " unit " << u.id;
    }
    ASSERT_EQ(examples[e], dataset);
  }
  const WorkLeasesStats stats = leases->Stats();
  EXPECT_EQ(stats.examples_per_epoch, std::vector<uint64_t>(epochs, dataset));
  EXPECT_EQ(stats.records_per_epoch, std::vector<uint64_t>(epochs, dataset));
  EXPECT_EQ(leases->Acquire(trainers[0].id, now).status().code(),
            trainers[0].registered && !trainers[0].expired ? absl::StatusCode::kOutOfRange
                                                           : absl::StatusCode::kNotFound);
  *totals += {.refused_stale = refused_stale,
              .restores = restores,
              .releases = stats.releases,
              .expired = stats.expired_trainers};
}

TEST(WorkLeasesSimulation, EveryRecordOncePerEpochUnderFailuresAndRestarts) {
  SimTotals totals;
  for (uint32_t seed = 1; seed <= 500; ++seed) {
    RunSimulation(seed, &totals);
    if (HasFatalFailure()) return;
  }
  // The failure paths really ran.
  EXPECT_GT(totals.refused_stale, 100u);
  EXPECT_GT(totals.restores, 100u);
  EXPECT_GT(totals.expired, 100u);
  std::cout << "simulation: " << totals.refused_stale << " stale reports refused, "
            << totals.restores << " chief restores, " << totals.releases << " units re-leased, "
            << totals.expired << " trainers expired\n";
}

}  // namespace
}  // namespace brook::chief
