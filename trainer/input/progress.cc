#include "trainer/input/progress.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace brook::input {

uint64_t BatchProvenance::num_records() const {
  uint64_t n = 0;
  for (const RecordRange& r : ranges) n += r.end - r.begin;
  return n;
}

UnitProgress::UnitProgress(absl::Span<const sharding::WorkUnit> units, int epoch) : epoch_(epoch) {
  for (const sharding::WorkUnit& u : units) {
    Unit& unit = units_[u.id];
    unit.committed = u.begin;
    unit.end = u.end;
  }
}

UnitProgress::Unit& UnitProgress::UnitFor(uint32_t unit_id) { return units_[unit_id]; }

void UnitProgress::AddAcked(Unit* unit, uint64_t begin, uint64_t end) {
  begin = std::max(begin, unit->committed);
  if (begin >= end) return;  // already below the mark (a repeated ack)
  auto& acked = unit->acked;
  // Merge with every interval that overlaps or touches [begin, end).
  auto it = acked.upper_bound(begin);
  if (it != acked.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= begin) {
      begin = prev->first;
      end = std::max(end, prev->second);
      it = acked.erase(prev);
    }
  }
  while (it != acked.end() && it->first <= end) {
    end = std::max(end, it->second);
    it = acked.erase(it);
  }
  if (begin == unit->committed) {
    unit->committed = end;  // the mark moves over the contiguous prefix
  } else {
    acked.emplace(begin, end);
  }
}

absl::Status UnitProgress::Track(const BatchProvenance& p) {
  if (p.epoch != epoch_) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", p.sequence, " is from epoch ", p.epoch,
                                                   ", this progress tracks epoch ", epoch_));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.contains(p.sequence)) {
    return absl::AlreadyExistsError(absl::StrCat("batch ", p.sequence, " is already tracked"));
  }
  for (const UnitEnd& e : p.unit_ends) UnitFor(e.unit_id).end = e.end;
  for (const RecordRange& r : p.ranges) UnitFor(r.unit_id);  // a unit seen is listed
  pending_.emplace(p.sequence, p.ranges);
  return absl::OkStatus();
}

absl::Status UnitProgress::Ack(uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(sequence);
  if (it == pending_.end()) {
    return absl::NotFoundError(
        absl::StrCat("batch ", sequence, " is not tracked (or was acked already)"));
  }
  for (const RecordRange& r : it->second) AddAcked(&UnitFor(r.unit_id), r.begin, r.end);
  pending_.erase(it);
  return absl::OkStatus();
}

absl::Status UnitProgress::AckStep(absl::Span<const uint64_t> sequences) {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t sequence : sequences) {
    if (!pending_.contains(sequence)) {
      return absl::NotFoundError(
          absl::StrCat("batch ", sequence, " is not tracked (or was acked already)"));
    }
  }
  for (uint64_t sequence : sequences) {
    auto it = pending_.find(sequence);
    for (const RecordRange& r : it->second) AddAcked(&UnitFor(r.unit_id), r.begin, r.end);
    pending_.erase(it);
  }
  ++steps_;
  return absl::OkStatus();
}

void UnitProgress::AddSteps(uint64_t steps) {
  std::lock_guard<std::mutex> lock(mu_);
  steps_ += steps;
}

UnitProgress::StepMark UnitProgress::CommittedSteps(uint32_t unit_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = units_.find(unit_id);
  return {.committed = it == units_.end() ? 0 : it->second.committed, .steps = steps_};
}

uint64_t UnitProgress::Committed(uint32_t unit_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = units_.find(unit_id);
  return it == units_.end() ? 0 : it->second.committed;
}

bool UnitProgress::Complete(uint32_t unit_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = units_.find(unit_id);
  if (it == units_.end()) return false;
  return it->second.end != 0 && it->second.committed >= it->second.end;
}

std::vector<RecordRange> UnitProgress::AckedAboveMark(uint32_t unit_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RecordRange> out;
  auto it = units_.find(unit_id);
  if (it == units_.end()) return out;
  for (const auto& [begin, end] : it->second.acked) out.push_back({unit_id, begin, end});
  return out;
}

std::vector<UnitOffset> UnitProgress::Offsets() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<UnitOffset> out;
  out.reserve(units_.size());
  for (const auto& [id, u] : units_) {
    out.push_back({.unit_id = id,
                   .committed = u.committed,
                   .end = u.end,
                   .complete = u.end != 0 && u.committed >= u.end});
  }
  return out;
}

size_t UnitProgress::pending_batches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

namespace internal {

void AppendRanges(std::vector<RecordId>* ids, std::vector<RecordRange>* out) {
  auto less = [](const RecordId& a, const RecordId& b) {
    return a.unit_id != b.unit_id ? a.unit_id < b.unit_id : a.index < b.index;
  };
  // Without shuffling ids arrive sorted (cycle_length 1) or nearly so.
  if (!std::is_sorted(ids->begin(), ids->end(), less)) std::sort(ids->begin(), ids->end(), less);
  const size_t before = out->size();
  for (const RecordId& id : *ids) {
    if (out->size() > before && out->back().unit_id == id.unit_id && out->back().end == id.index) {
      ++out->back().end;
    } else {
      out->push_back({id.unit_id, id.index, id.index + 1});
    }
  }
  if (before == 0) return;
  std::sort(out->begin(), out->end(), [](const RecordRange& a, const RecordRange& b) {
    return a.unit_id != b.unit_id ? a.unit_id < b.unit_id : a.begin < b.begin;
  });
  size_t w = 0;
  for (size_t r = 0; r < out->size(); ++r) {
    const RecordRange cur = (*out)[r];
    if (w > 0 && (*out)[w - 1].unit_id == cur.unit_id && (*out)[w - 1].end >= cur.begin) {
      (*out)[w - 1].end = std::max((*out)[w - 1].end, cur.end);
    } else {
      (*out)[w++] = cur;
    }
  }
  out->resize(w);
}

}  // namespace internal
}  // namespace brook::input
