#include "ps/internal/change_log.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"

namespace brook::ps::internal {
namespace {

// What a held name costs besides its characters: the map entry and the
// Name (a rough figure; the budget is a bound, not an exact count).
constexpr uint64_t kNameOverhead = 64;
// A record's deque slot and allocator headers, besides sizeof(Record).
constexpr uint64_t kRecordOverhead = 32;

}  // namespace

uint32_t ChangeLog::InternLocked(std::string_view name) {
  auto it = ids_.find(AbslView(name));
  uint32_t id;
  if (it != ids_.end()) {
    id = it->second;
  } else {
    if (free_ids_.empty()) {
      id = static_cast<uint32_t>(names_.size());
      names_.emplace_back();
    } else {
      id = free_ids_.back();
      free_ids_.pop_back();
    }
    names_[id].name = std::string(name);
    ids_.emplace(names_[id].name, id);
    bytes_ += name.size() + kNameOverhead;
  }
  ++names_[id].refs;
  return id;
}

void ChangeLog::ReleaseLocked(const Record& r) {
  bytes_ -= r.bytes;
  for (const Part& p : r.parts) {
    Name& n = names_[p.name];
    if (--n.refs > 0) continue;
    bytes_ -= n.name.size() + kNameOverhead;
    ids_.erase(n.name);
    n.name.clear();
    n.name.shrink_to_fit();
    free_ids_.push_back(p.name);
  }
}

void ChangeLog::TrimLocked(std::vector<Record>* dropped) {
  while (bytes_ > max_bytes_ && !records_.empty()) {
    Record& r = records_.front();
    ReleaseLocked(r);
    dropped_through_ = r.sequence;
    dropped->push_back(std::move(r));
    records_.pop_front();
  }
}

void ChangeLog::Append(absl::Span<const ChangePart> parts) {
  if (!enabled()) return;
  // The keys are copied before the lock is taken: the lock covers only the
  // names and the deque.
  Record r;
  size_t keys = 0;
  for (const ChangePart& p : parts) keys += p.keys.size();
  r.keys.reserve(keys);
  for (const ChangePart& p : parts) {
    if (!p.dense && p.keys.empty()) continue;
    Part part;
    part.dense = p.dense;
    part.begin = static_cast<uint32_t>(r.keys.size());
    r.keys.insert(r.keys.end(), p.keys.begin(), p.keys.end());
    part.end = static_cast<uint32_t>(r.keys.size());
    r.parts.push_back(part);
  }
  if (r.parts.empty()) return;
  r.bytes = sizeof(Record) + kRecordOverhead + r.keys.capacity() * sizeof(uint64_t) +
            (r.parts.size() > 1 ? r.parts.size() * sizeof(Part) : 0);
  std::vector<Record> dropped;
  MutexLock lock(&mu_);
  size_t named = 0;
  for (const ChangePart& p : parts) {
    if (!p.dense && p.keys.empty()) continue;
    r.parts[named++].name = InternLocked(p.name);
  }
  r.sequence = next_++;
  bytes_ += r.bytes;
  records_.push_back(std::move(r));
  TrimLocked(&dropped);
  // `dropped` is freed after the lock (declared before it).
}

void ChangeLog::Reset() {
  if (!enabled()) return;
  std::deque<Record> gone;
  MutexLock lock(&mu_);
  for (const Record& r : records_) ReleaseLocked(r);
  gone.swap(records_);
  // A sequence of its own, so that a follower that had read everything
  // (its position == next_) is behind the reset too.
  dropped_through_ = next_++;
}

absl::StatusOr<Changes> ChangeLog::Since(std::string_view prefix, uint64_t since,
                                         uint64_t max_keys) const {
  if (!enabled()) {
    return absl::FailedPreconditionError(
        "this PS keeps no change log (brook ps --change-log-mib 0): a follower cannot learn what "
        "changed; start the PS with a change log");
  }
  // Under the lock: the matching keys are copied, per name id. Sorting and
  // merging happen after it.
  absl::flat_hash_map<uint32_t, std::vector<uint64_t>> by_table;
  absl::flat_hash_set<uint32_t> dense_ids;
  absl::flat_hash_map<uint32_t, std::string> names;
  Changes out;
  {
    MutexLock lock(&mu_);
    if (since > next_) {
      return absl::OutOfRangeError(absl::StrCat("change log: position ", since,
                                                " is past the next sequence ", next_,
                                                " (a cursor of another PS process?)"));
    }
    if (dropped_through_ > 0 && since <= dropped_through_) {
      return absl::OutOfRangeError(absl::StrCat(
          "change log: position ", since, " is no longer held (records through ", dropped_through_,
          " were dropped: the log's byte budget, or a restore or import); copy everything again"));
    }
    auto it = std::lower_bound(records_.begin(), records_.end(), since,
                               [](const Record& r, uint64_t s) { return r.sequence < s; });
    out.next = it == records_.end() ? next_ : it->sequence;
    uint64_t taken = 0;
    for (; it != records_.end(); ++it) {
      const Record& r = *it;
      uint64_t matching = 0;
      for (const Part& p : r.parts) {
        if (!absl::StartsWith(names_[p.name].name, AbslView(prefix))) continue;
        matching += p.dense ? 1 : p.end - p.begin;
      }
      // Whole records; the first with keys is taken even past max_keys
      // (unless that is 0), so a follower always moves on.
      if (matching > 0 && taken + matching > max_keys && (taken > 0 || max_keys == 0)) {
        out.more = true;
        break;
      }
      taken += matching;
      for (const Part& p : r.parts) {
        const std::string& name = names_[p.name].name;
        if (!absl::StartsWith(name, AbslView(prefix))) continue;
        if (!names.contains(p.name)) names.emplace(p.name, name);
        if (p.dense) {
          dense_ids.insert(p.name);
        } else {
          std::vector<uint64_t>& keys = by_table[p.name];
          keys.insert(keys.end(), r.keys.begin() + p.begin, r.keys.begin() + p.end);
        }
      }
      out.next = r.sequence + 1;
    }
  }
  out.tables.reserve(by_table.size());
  for (auto& [id, keys] : by_table) {
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    out.tables.emplace_back(names[id], std::move(keys));
  }
  std::sort(out.tables.begin(), out.tables.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // Tables and dense variables have separate names on a PS, so one id may
  // be both a table and a dense variable here.
  for (uint32_t id : dense_ids) out.dense.push_back(names[id]);
  std::sort(out.dense.begin(), out.dense.end());
  return out;
}

uint64_t ChangeLog::head() const {
  MutexLock lock(&mu_);
  return next_;
}

ChangeLogStats ChangeLog::Stats() const {
  MutexLock lock(&mu_);
  ChangeLogStats s;
  s.budget_bytes = max_bytes_;
  s.bytes = bytes_;
  s.records = records_.size();
  s.next_sequence = next_;
  s.oldest_sequence = records_.empty() ? next_ : records_.front().sequence;
  return s;
}

}  // namespace brook::ps::internal
