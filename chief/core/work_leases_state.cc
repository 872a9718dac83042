// WorkLeases <-> brook.v1.WorkLeasesState: the persisted form of a lease table.
#include <utility>

#include "absl/strings/str_cat.h"
#include "brook/v1/chief.pb.h"
#include "chief/core/work_leases_state.h"
#include "common/status_macros.h"

namespace brook::chief {

v1::WorkLeasesState WorkLeasesCodec::ToState(const WorkLeases& leases) {
  v1::WorkLeasesState state;
  state.set_epochs(leases.options_.epochs);
  state.set_lease_duration_ms(absl::ToInt64Milliseconds(leases.options_.lease_duration));
  state.set_epoch(leases.epoch_);
  state.set_finished(leases.finished_);
  for (const WorkLeases::UnitState& u : leases.units_) {
    v1::WorkUnitLeaseState* out = state.add_units();
    out->set_id(u.unit.id);
    out->set_path(u.unit.path);
    out->set_begin(u.unit.begin);
    out->set_end(u.unit.end);
    out->set_end_known(u.end_known);
    out->set_committed(u.committed);
    if (u.committed_steps.has_value()) out->set_committed_steps(*u.committed_steps);
    out->set_lease_epoch(u.lease_epoch);
    out->set_holder(u.holder);
    out->set_done(u.done);
    out->set_done_lease_epoch(u.done_lease_epoch);
  }
  for (size_t index : leases.queue_) state.add_queue(leases.units_[index].unit.id);
  for (const auto& [id, trainer] : leases.trainers_) state.add_trainers(id);
  for (uint64_t n : leases.examples_per_epoch_) state.add_examples_per_epoch(n);
  for (uint64_t n : leases.records_per_epoch_) state.add_records_per_epoch(n);
  state.set_releases(leases.releases_);
  state.set_expired_trainers(leases.expired_trainers_);
  state.set_steps_done(leases.steps_done_);
  return state;
}

namespace {

absl::Status Corrupt(const std::string& why) {
  return absl::DataLossError(absl::StrCat("work lease state: ", why));
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkLeases>> WorkLeasesCodec::FromState(
    const v1::WorkLeasesState& state, absl::Time now) {
  WorkLeasesOptions options;
  options.epochs = state.epochs();
  options.lease_duration = absl::Milliseconds(state.lease_duration_ms());
  if (absl::Status s = options.Validate(); !s.ok()) return Corrupt(std::string(s.message()));
  std::unique_ptr<WorkLeases> leases(new WorkLeases(options));

  std::vector<sharding::WorkUnit> units;
  for (const v1::WorkUnitLeaseState& u : state.units()) {
    units.push_back(sharding::WorkUnit{.id = u.id(),
                                       .path = u.path(),
                                       .begin = u.begin(),
                                       .end = 0});  // set below, with end_known
  }
  if (absl::Status s = leases->AddUnits(std::move(units)); !s.ok()) {
    return Corrupt(std::string(s.message()));
  }
  if (state.epoch() < 0 || (options.epochs != 0 && state.epoch() > options.epochs) ||
      state.finished() != (options.epochs != 0 && state.epoch() == options.epochs)) {
    return Corrupt(absl::StrCat("epoch ", state.epoch(), " of ", options.epochs,
                                state.finished() ? " (finished)" : ""));
  }
  leases->epoch_ = state.epoch();
  leases->finished_ = state.finished();
  const size_t counters = static_cast<size_t>(state.epoch()) + (state.finished() ? 0 : 1);
  if (static_cast<size_t>(state.examples_per_epoch_size()) != counters ||
      static_cast<size_t>(state.records_per_epoch_size()) != counters) {
    return Corrupt(absl::StrCat("per-epoch counters for ", counters, " epochs expected"));
  }
  leases->examples_per_epoch_.assign(state.examples_per_epoch().begin(),
                                     state.examples_per_epoch().end());
  leases->records_per_epoch_.assign(state.records_per_epoch().begin(),
                                    state.records_per_epoch().end());
  leases->releases_ = state.releases();
  leases->expired_trainers_ = state.expired_trainers();
  leases->steps_done_ = state.steps_done();

  for (const std::string& id : state.trainers()) {
    if (id.empty() ||
        !leases->trainers_.emplace(id, WorkLeases::Trainer{.last_seen = now, .units = {}}).second) {
      return Corrupt(absl::StrCat("empty or duplicate trainer id '", id, "'"));
    }
  }
  std::vector<bool> queued(leases->units_.size(), false);
  for (uint32_t id : state.queue()) {
    auto it = leases->index_of_.find(id);
    if (it == leases->index_of_.end() || queued[it->second]) {
      return Corrupt(absl::StrCat("queue holds unknown or repeated unit ", id));
    }
    queued[it->second] = true;
    leases->queue_.push_back(it->second);
  }
  for (size_t i = 0; i < leases->units_.size(); ++i) {
    const v1::WorkUnitLeaseState& in = state.units(static_cast<int>(i));
    WorkLeases::UnitState& u = leases->units_[i];
    const std::string what = absl::StrCat("unit ", in.id());
    u.end_known = in.end_known();
    u.unit.end = in.end();
    u.committed = in.committed();
    // State written before steps were kept: known only where nothing was
    // committed yet.
    u.committed_steps = in.has_committed_steps() ? std::optional<uint64_t>(in.committed_steps())
                        : in.committed() == in.begin() ? std::optional<uint64_t>(0)
                                                       : std::nullopt;
    u.lease_epoch = in.lease_epoch();
    u.done_lease_epoch = in.done_lease_epoch();
    u.holder = in.holder();
    u.done = in.done();
    if (u.end_known ? u.unit.end < u.unit.begin : u.unit.end != 0) {
      return Corrupt(
          absl::StrCat(what, ": end ", u.unit.end, u.end_known ? " before begin" : " not known"));
    }
    if (u.committed < u.unit.begin || (u.end_known && u.committed > u.unit.end)) {
      return Corrupt(absl::StrCat(what, ": committed offset ", u.committed, " outside its range"));
    }
    if (u.done_lease_epoch > u.lease_epoch) return Corrupt(what + ": lease epochs out of order");
    if (leases->finished_) continue;
    const int roles = int{u.done} + int{queued[i]} + int{!u.holder.empty()};
    if (roles != 1) return Corrupt(what + ": must be exactly one of done, queued or leased");
    if (u.done && !(u.end_known && u.committed == u.unit.end)) {
      return Corrupt(what + ": done but not committed to its end");
    }
    if (!u.holder.empty()) {
      auto holder = leases->trainers_.find(u.holder);
      if (holder == leases->trainers_.end() || u.lease_epoch == 0) {
        return Corrupt(absl::StrCat(what, ": leased to unknown trainer '", u.holder, "'"));
      }
      holder->second.units.insert(i);
    }
    if (u.done) ++leases->done_;
  }
  if (!leases->finished_ && leases->done_ == leases->units_.size()) {
    return Corrupt("every unit is done but the epoch did not advance");
  }
  return leases;
}

}  // namespace brook::chief
