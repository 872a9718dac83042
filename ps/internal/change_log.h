// ChangeLog: a bounded in-memory record of which rows of which tables, and
// which dense variables, a PS changed, so that a follower (a serving replica
// of a job's model) can copy only what changed since it last looked
// (ParameterServer::ChangesSince, docs/architecture.md "Change log").
//
// Each append is one record: every key one push call changed, of every table
// it touched, with one sequence number (1, 2, ...). Records are kept oldest
// first; past the byte budget the oldest are dropped, and a follower whose
// position is older than what is held is told OUT_OF_RANGE (it copies
// everything again). Keys are held as the push gave them, so the cost of a
// push is one copy of its keys and one allocation, under no lock but this
// log's for a moment.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/internal/mutex.h"
#include "ps/parameter_server.h"

namespace brook::ps::internal {

// One part of a change record: keys of a table, or (dense) a dense variable.
struct ChangePart {
  std::string_view name;
  absl::Span<const uint64_t> keys;
  bool dense = false;
};

class ChangeLog {
 public:
  // max_bytes 0: off (appends do nothing; Since is FAILED_PRECONDITION).
  explicit ChangeLog(uint64_t max_bytes) : max_bytes_(max_bytes) {}
  ChangeLog(const ChangeLog&) = delete;
  ChangeLog& operator=(const ChangeLog&) = delete;

  bool enabled() const { return max_bytes_ > 0; }

  // Appends one record holding `parts` (empty table parts are left out; a
  // call with nothing left appends nothing), then drops the oldest records
  // while the log is over its budget (the new one too, if it alone is).
  void Append(absl::Span<const ChangePart> parts) ABSL_LOCKS_EXCLUDED(mu_);
  void Append(const ChangePart& part) { Append(absl::MakeConstSpan(&part, 1)); }

  // Forgets everything: a follower at any position before now is told
  // OUT_OF_RANGE (a restore or an import changed rows it cannot list).
  void Reset() ABSL_LOCKS_EXCLUDED(mu_);

  // The records with sequence >= since, of names starting with `prefix`
  // (names as held: the prefix is not stripped), whole records while their
  // keys add up to at most max_keys (a dense part counts as one key; the
  // first record with keys is taken even when it alone has more, unless
  // max_keys is 0, so a follower always moves on). Keys merged per table, sorted and distinct;
  // tables and dense names sorted. Changes::incarnation is left 0 (the PS's). OUT_OF_RANGE when a
  // record at or after `since` was dropped, or `since` is past next; FAILED_PRECONDITION when the
  // log is off. since 0 on a log that never dropped anything reads from its first record.
  absl::StatusOr<Changes> Since(std::string_view prefix, uint64_t since, uint64_t max_keys) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // The sequence the next record will get.
  uint64_t head() const ABSL_LOCKS_EXCLUDED(mu_);
  ChangeLogStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Part {
    uint32_t name = 0;  // id in names_
    bool dense = false;
    uint32_t begin = 0, end = 0;  // keys of the record
  };
  struct Record {
    uint64_t sequence = 0;
    uint64_t bytes = 0;
    absl::InlinedVector<Part, 1> parts;
    std::vector<uint64_t> keys;
  };
  struct Name {
    std::string name;
    uint64_t refs = 0;  // parts of held records naming it
  };

  uint32_t InternLocked(std::string_view name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the oldest records while over budget into *dropped (freed by the
  // caller, outside the lock).
  void TrimLocked(std::vector<Record>* dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseLocked(const Record& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t max_bytes_;

  mutable Mutex mu_;
  std::deque<Record> records_ ABSL_GUARDED_BY(mu_);  // sequence order
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;
  // Every sequence <= this is gone (0: none ever was).
  uint64_t dropped_through_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Names of the held records, interned: a record holds 4-byte ids.
  absl::flat_hash_map<std::string, uint32_t> ids_ ABSL_GUARDED_BY(mu_);
  std::vector<Name> names_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> free_ids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace brook::ps::internal
