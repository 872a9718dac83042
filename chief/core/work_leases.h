// The work-unit lease table of one job (docs/architecture.md "Data sharding" and
// "Exactly once per epoch across trainer failure").
//
// The job's data is split into work units (sharding::PlanWorkUnits). A
// trainer Acquires a lease on a unit, reports its committed record offset
// (the first record whose pushes are not all acknowledged, UnitProgress) with
// Commit, and Completes it. A trainer that stops heartbeating is Expired: its
// units go back to the front of the queue and resume at their committed
// offset, so every record is committed exactly once per epoch.
//
// - Barrier between epochs: units of epoch e+1 are handed out only once every
//   unit of epoch e is done, so "once per epoch" has one meaning and the
//   per-epoch example count is exact.
// - Lease epoch: a per-unit counter that grows on every (re)lease. Every report
//   names the lease it was made under; a report from a paused ("zombie")
//   trainer whose unit was taken back carries an old lease epoch and is
//   refused, so it cannot double-count or move a new holder's offset.
// - Restore: WorkLeasesCodec (work_leases_state.h) carries everything but
//   the heartbeat clocks.
//   Leases stay with their holders and lease epochs; every trainer's clock
//   restarts at the restore time, so live trainers get a full lease duration
//   to heartbeat the new chief before they are expired.
//
// Time is always an argument (`now`); nothing here reads a clock. Commits,
// Expire and Release are the only things that move state.
//
// WorkLeases is thread-compatible: it requires external synchronization (the
// chief's service holds a mutex around it).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sharding/sharding.h"

namespace brook::chief {

struct WorkLeasesOptions {
  // Data epochs to run. 0: unbounded (the job stops at a step limit decided
  // elsewhere; Acquire never reports the end).
  int epochs = 1;
  // A trainer whose last heartbeat (or other call) is older than this loses
  // its leases at the next Expire. Several heartbeat intervals, so one late
  // heartbeat does not cost a re-lease.
  absl::Duration lease_duration = absl::Seconds(30);

  absl::Status Validate() const;
};

// A unit leased to a trainer: read records [resume_offset, unit.end) of
// unit.path (unit.end 0: to end of file) and report under `lease_epoch`.
struct Lease {
  sharding::WorkUnit unit;
  uint64_t resume_offset = 0;  // first record not yet committed
  // The optimizer steps of the unit's epoch that made resume_offset (the
  // next holder numbers its steps on from here, so the PS dedups a step the
  // last holder pushed but did not commit); nullopt when a report did not
  // say (an older trainer).
  std::optional<uint64_t> resume_step = 0;
  int64_t epoch = 0;         // data epoch, from 0
  uint64_t lease_epoch = 0;  // this lease; greater than any earlier lease of the unit
  // The job's step of this unit-epoch's step 0 now: StepBase(unit.id).
  int64_t step_base = 0;
};

struct WorkLeasesStats {
  int64_t epoch = 0;  // current data epoch (== epochs once finished)
  bool finished = false;
  // Units of the current epoch.
  size_t units_total = 0;
  size_t units_done = 0;
  size_t units_leased = 0;
  size_t units_pending = 0;  // neither done nor leased
  // Committed examples and records per data epoch (index = epoch).
  std::vector<uint64_t> examples_per_epoch;
  std::vector<uint64_t> records_per_epoch;
  uint64_t releases = 0;          // units taken back unfinished (expiry or Release)
  uint64_t expired_trainers = 0;  // trainers dropped for missing heartbeats
  size_t live_trainers = 0;
  int64_t steps = 0;  // the job's step: WorkLeases::JobSteps()
};

class WorkLeases {
 public:
  // INVALID_ARGUMENT for bad options, no units, duplicate unit ids or an
  // empty range (end != 0 and end <= begin). Units are queued in the given
  // order.
  static absl::StatusOr<std::unique_ptr<WorkLeases>> Create(std::vector<sharding::WorkUnit> units,
                                                            const WorkLeasesOptions& options);
  WorkLeases(const WorkLeases&) = delete;
  WorkLeases& operator=(const WorkLeases&) = delete;

  // Adds a trainer (heartbeat clock at `now`). An id already registered is a
  // restarted process: its leases are released first (it no longer knows
  // them). INVALID_ARGUMENT for an empty id.
  absl::Status RegisterTrainer(const std::string& trainer_id, absl::Time now);
  // Proof of life: the trainer keeps its leases until `now` + lease_duration.
  // NOT_FOUND for a trainer not registered or already expired: it has lost
  // its leases and must register again.
  absl::Status Heartbeat(const std::string& trainer_id, absl::Time now);

  // Leases the next unit to the trainer (also a heartbeat). nullopt: nothing
  // to hand out now (the rest of the epoch is leased to others; retry later).
  // OUT_OF_RANGE: every epoch is done, the job's data is finished.
  // NOT_FOUND: trainer not registered (or expired).
  absl::StatusOr<std::optional<Lease>> Acquire(const std::string& trainer_id, absl::Time now);

  // Progress report: every record of the unit before `committed_offset` is
  // trained on, `examples` of them became rows (the rest were skipped bad
  // examples). Also a heartbeat. Reaching a known end completes the unit.
  // - FAILED_PRECONDITION: the unit is not leased to this trainer under
  //   `lease_epoch` (a zombie's late report), or the offset goes backwards or
  //   past the unit's end. State is unchanged.
  // - OK with no effect: a repeat of the last accepted report (same lease,
  //   same offset): gRPC may deliver a report twice.
  // - INVALID_ARGUMENT: unknown unit, or more examples than new records.
  // `steps`: the optimizer steps of the unit's epoch that trained the records
  // before committed_offset (the next lease's resume_step).
  absl::Status Commit(const std::string& trainer_id, uint32_t unit_id, uint64_t lease_epoch,
                      uint64_t committed_offset, uint64_t examples, absl::Time now,
                      std::optional<uint64_t> steps = std::nullopt);
  // A final Commit at `end_offset`, the unit's end. For a unit of unknown end
  // (end 0) this is where the end is learned (and kept for later epochs);
  // otherwise FAILED_PRECONDITION unless end_offset equals the known end.
  // Completing the last unit of an epoch opens the next epoch. `steps`: the
  // unit-epoch's steps in all (unset: its last committed count).
  absl::Status Complete(const std::string& trainer_id, uint32_t unit_id, uint64_t lease_epoch,
                        uint64_t end_offset, uint64_t examples, absl::Time now,
                        std::optional<uint64_t> steps = std::nullopt);

  // The job's step (docs/reliability.md "Steps"): the optimizer steps of
  // every completed unit-epoch plus those committed on the units in
  // progress. It never goes backwards, and does not depend on which trainer
  // trained what or how often one restarted.
  int64_t JobSteps() const;
  // The job's step of unit `unit_id`'s step 0 in the current epoch: JobSteps()
  // without the unit's own committed steps. With one trainer it is constant
  // while the unit trains, so a unit's holders number its steps alike.
  // INVALID_ARGUMENT for an unknown unit.
  absl::StatusOr<int64_t> StepBase(uint32_t unit_id) const;

  // Drops every trainer whose last call is older than lease_duration; their
  // units go to the front of the queue (lowest id first) to resume at the
  // committed offset under a new lease epoch. Returns the expired ids.
  std::vector<std::string> Expire(absl::Time now);
  // Graceful leave: as expiry, at once. NOT_FOUND for an unknown trainer.
  absl::Status Release(const std::string& trainer_id);

  // The leases a trainer holds (e.g. to resend them on a heartbeat after a
  // lost Acquire reply). Empty for an unknown trainer.
  std::vector<Lease> LeasesOf(const std::string& trainer_id) const;
  WorkLeasesStats Stats() const;
  bool finished() const { return finished_; }

 private:
  friend class WorkLeasesCodec;  // work_leases_state.h: the persisted form

  struct UnitState {
    sharding::WorkUnit unit;  // end learned on Complete when it was 0
    bool end_known = false;   // unit.end != 0 at first; an empty file may end at 0
    uint64_t committed = 0;
    std::optional<uint64_t> committed_steps = 0;  // Lease::resume_step
    uint64_t lease_epoch = 0;
    uint64_t done_lease_epoch = 0;
    std::string holder;  // empty: not leased
    bool done = false;
  };
  struct Trainer {
    absl::Time last_seen;
    std::set<size_t> units;  // indexes into units_
  };

  explicit WorkLeases(const WorkLeasesOptions& options) : options_(options) {}
  absl::Status AddUnits(std::vector<sharding::WorkUnit> units);
  absl::Status Report(const std::string& trainer_id, uint32_t unit_id, uint64_t lease_epoch,
                      uint64_t offset, uint64_t examples, bool complete, absl::Time now,
                      std::optional<uint64_t> steps);
  Lease LeaseFor(size_t index) const;
  void TakeBack(Trainer* trainer);
  void FinishUnit(size_t index);
  void StartEpoch();
  void EnsureCounters();

  // Constant after construction.
  const WorkLeasesOptions options_;

  std::vector<UnitState> units_;
  absl::flat_hash_map<uint32_t, size_t> index_of_;  // unit id -> index in units_
  std::deque<size_t> queue_;                        // units waiting for a lease
  std::map<std::string, Trainer> trainers_;         // ordered: deterministic expiry
  int64_t epoch_ = 0;
  size_t done_ = 0;  // units done this epoch
  bool finished_ = false;
  std::vector<uint64_t> examples_per_epoch_;
  std::vector<uint64_t> records_per_epoch_;
  uint64_t releases_ = 0;
  uint64_t expired_trainers_ = 0;
  uint64_t steps_done_ = 0;  // steps of every completed unit-epoch
};

}  // namespace brook::chief
