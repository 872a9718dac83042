#include "chief/core/work_leases.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace brook::chief {

absl::Status WorkLeasesOptions::Validate() const {
  if (epochs < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("epochs must be >= 0 (0 = unbounded), got ", epochs));
  }
  if (lease_duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("lease_duration must be positive, got ",
                                                   absl::FormatDuration(lease_duration)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WorkLeases>> WorkLeases::Create(
    std::vector<sharding::WorkUnit> units, const WorkLeasesOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<WorkLeases> leases(new WorkLeases(options));
  RETURN_IF_ERROR(leases->AddUnits(std::move(units)));
  leases->StartEpoch();
  return leases;
}

absl::Status WorkLeases::AddUnits(std::vector<sharding::WorkUnit> units) {
  if (units.empty()) return absl::InvalidArgumentError("a job needs at least one work unit");
  units_.reserve(units.size());
  for (sharding::WorkUnit& unit : units) {
    if (unit.end != 0 && unit.end <= unit.begin) {
      return absl::InvalidArgumentError(absl::StrCat("work unit ", unit.id, " (", unit.path,
                                                     ") has an empty range [", unit.begin, ", ",
                                                     unit.end, ")"));
    }
    if (!index_of_.emplace(unit.id, units_.size()).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate work unit id ", unit.id));
    }
    UnitState state;
    state.end_known = unit.end != 0;
    state.unit = std::move(unit);
    units_.push_back(std::move(state));
  }
  return absl::OkStatus();
}

void WorkLeases::EnsureCounters() {
  const size_t want = static_cast<size_t>(epoch_) + 1;
  if (examples_per_epoch_.size() < want) examples_per_epoch_.resize(want, 0);
  if (records_per_epoch_.size() < want) records_per_epoch_.resize(want, 0);
}

void WorkLeases::StartEpoch() {
  queue_.clear();
  done_ = 0;
  for (size_t i = 0; i < units_.size(); ++i) {
    UnitState& u = units_[i];
    u.committed = u.unit.begin;
    u.committed_steps = 0;
    u.done = false;
    u.holder.clear();
    queue_.push_back(i);
  }
  EnsureCounters();
}

absl::Status WorkLeases::RegisterTrainer(const std::string& trainer_id, absl::Time now) {
  if (trainer_id.empty()) return absl::InvalidArgumentError("empty trainer id");
  auto it = trainers_.find(trainer_id);
  if (it != trainers_.end()) {
    TakeBack(&it->second);
  } else {
    it = trainers_.emplace(trainer_id, Trainer{}).first;
  }
  it->second.last_seen = now;
  return absl::OkStatus();
}

absl::Status WorkLeases::Heartbeat(const std::string& trainer_id, absl::Time now) {
  auto it = trainers_.find(trainer_id);
  if (it == trainers_.end()) {
    return absl::NotFoundError(
        absl::StrCat("trainer '", trainer_id, "' is not registered (or expired): register again"));
  }
  it->second.last_seen = std::max(it->second.last_seen, now);
  return absl::OkStatus();
}

Lease WorkLeases::LeaseFor(size_t index) const {
  const UnitState& u = units_[index];
  return Lease{.unit = u.unit,
               .resume_offset = u.committed,
               .resume_step = u.committed_steps,
               .epoch = epoch_,
               .lease_epoch = u.lease_epoch,
               .step_base = JobSteps() - static_cast<int64_t>(u.committed_steps.value_or(0))};
}

absl::StatusOr<std::optional<Lease>> WorkLeases::Acquire(const std::string& trainer_id,
                                                         absl::Time now) {
  RETURN_IF_ERROR(Heartbeat(trainer_id, now));
  if (finished_) {
    return absl::OutOfRangeError(absl::StrCat("all ", options_.epochs, " epochs are done"));
  }
  if (queue_.empty()) return std::optional<Lease>();
  const size_t index = queue_.front();
  queue_.pop_front();
  UnitState& u = units_[index];
  ++u.lease_epoch;
  u.holder = trainer_id;
  trainers_[trainer_id].units.insert(index);
  return std::optional<Lease>(LeaseFor(index));
}

absl::Status WorkLeases::Commit(const std::string& trainer_id, uint32_t unit_id,
                                uint64_t lease_epoch, uint64_t committed_offset, uint64_t examples,
                                absl::Time now, std::optional<uint64_t> steps) {
  return Report(trainer_id, unit_id, lease_epoch, committed_offset, examples, /*complete=*/false,
                now, steps);
}

absl::Status WorkLeases::Complete(const std::string& trainer_id, uint32_t unit_id,
                                  uint64_t lease_epoch, uint64_t end_offset, uint64_t examples,
                                  absl::Time now, std::optional<uint64_t> steps) {
  return Report(trainer_id, unit_id, lease_epoch, end_offset, examples, /*complete=*/true, now,
                steps);
}

int64_t WorkLeases::JobSteps() const {
  uint64_t steps = steps_done_;
  for (const UnitState& u : units_) {
    if (!u.done) steps += u.committed_steps.value_or(0);
  }
  return static_cast<int64_t>(steps);
}

absl::StatusOr<int64_t> WorkLeases::StepBase(uint32_t unit_id) const {
  auto found = index_of_.find(unit_id);
  if (found == index_of_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown work unit ", unit_id));
  }
  const UnitState& u = units_[found->second];
  return JobSteps() - (u.done ? 0 : static_cast<int64_t>(u.committed_steps.value_or(0)));
}

absl::Status WorkLeases::Report(const std::string& trainer_id, uint32_t unit_id,
                                uint64_t lease_epoch, uint64_t offset, uint64_t examples,
                                bool complete, absl::Time now, std::optional<uint64_t> steps) {
  auto found = index_of_.find(unit_id);
  if (found == index_of_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown work unit ", unit_id));
  }
  const size_t index = found->second;
  UnitState& u = units_[index];
  const std::string what = absl::StrCat("work unit ", unit_id, " (", u.unit.path, ")");
  // A repeat of the report that finished the unit under this very lease.
  if (lease_epoch != 0 && lease_epoch == u.done_lease_epoch && u.end_known &&
      offset == u.unit.end) {
    return absl::OkStatus();
  }
  if (u.holder != trainer_id || u.lease_epoch != lease_epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " is not leased to trainer '", trainer_id, "' under lease epoch ", lease_epoch,
        " (current lease epoch ", u.lease_epoch, u.holder.empty() ? ", not leased" : "",
        "): a late report from a lease that was taken back"));
  }
  if (offset < u.committed) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": committed offset ", offset, " goes backwards (committed ", u.committed, ")"));
  }
  if (u.end_known && offset > u.unit.end) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": committed offset ", offset, " is past its end ", u.unit.end));
  }
  if (complete && u.end_known && offset != u.unit.end) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": completed at offset ", offset, " but its end is ", u.unit.end));
  }
  const uint64_t records = offset - u.committed;
  if (records == 0 && !complete) {
    // A repeated report (at-least-once delivery): nothing new.
    trainers_[trainer_id].last_seen = std::max(trainers_[trainer_id].last_seen, now);
    return absl::OkStatus();
  }
  if (examples > records) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", examples, " examples in ", records, " new records"));
  }
  // Accepted: nothing below fails.
  Trainer& trainer = trainers_[trainer_id];
  trainer.last_seen = std::max(trainer.last_seen, now);
  u.committed = offset;
  // A completion that does not count its steps keeps the last count.
  if (steps.has_value() || !complete) u.committed_steps = steps;
  examples_per_epoch_[epoch_] += examples;
  records_per_epoch_[epoch_] += records;
  if (complete && !u.end_known) {
    u.unit.end = offset;
    u.end_known = true;
  }
  if (u.end_known && u.committed == u.unit.end) {
    trainer.units.erase(index);
    FinishUnit(index);
  }
  return absl::OkStatus();
}

void WorkLeases::FinishUnit(size_t index) {
  UnitState& u = units_[index];
  u.done = true;
  u.done_lease_epoch = u.lease_epoch;
  steps_done_ += u.committed_steps.value_or(0);
  u.holder.clear();
  if (++done_ < units_.size()) return;
  ++epoch_;
  if (options_.epochs != 0 && epoch_ >= options_.epochs) {
    finished_ = true;
    return;
  }
  StartEpoch();
}

void WorkLeases::TakeBack(Trainer* trainer) {
  // Front of the queue, lowest unit index first.
  for (auto it = trainer->units.rbegin(); it != trainer->units.rend(); ++it) {
    units_[*it].holder.clear();
    queue_.push_front(*it);
    ++releases_;
  }
  trainer->units.clear();
}

std::vector<std::string> WorkLeases::Expire(absl::Time now) {
  std::vector<std::string> expired;
  for (auto it = trainers_.begin(); it != trainers_.end();) {
    if (now - it->second.last_seen > options_.lease_duration) {
      TakeBack(&it->second);
      expired.push_back(it->first);
      ++expired_trainers_;
      it = trainers_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

absl::Status WorkLeases::Release(const std::string& trainer_id) {
  auto it = trainers_.find(trainer_id);
  if (it == trainers_.end()) {
    return absl::NotFoundError(absl::StrCat("trainer '", trainer_id, "' is not registered"));
  }
  TakeBack(&it->second);
  trainers_.erase(it);
  return absl::OkStatus();
}

std::vector<Lease> WorkLeases::LeasesOf(const std::string& trainer_id) const {
  std::vector<Lease> leases;
  auto it = trainers_.find(trainer_id);
  if (it == trainers_.end()) return leases;
  for (size_t index : it->second.units) leases.push_back(LeaseFor(index));
  return leases;
}

WorkLeasesStats WorkLeases::Stats() const {
  WorkLeasesStats stats;
  stats.epoch = epoch_;
  stats.finished = finished_;
  stats.units_total = units_.size();
  stats.units_done = finished_ ? units_.size() : done_;
  for (const UnitState& u : units_) {
    if (!u.holder.empty()) ++stats.units_leased;
  }
  stats.units_pending = queue_.size();
  stats.examples_per_epoch = examples_per_epoch_;
  stats.records_per_epoch = records_per_epoch_;
  stats.releases = releases_;
  stats.expired_trainers = expired_trainers_;
  stats.live_trainers = trainers_.size();
  stats.steps = JobSteps();
  return stats;
}

}  // namespace brook::chief
