// RowCache: a trainer's copy of one embedding table's hot rows, with bounded
// staleness. A row pulled from the PS at step s is served for steps s + 1 ..
// s + refresh_steps - 1 and pulled again at step s + refresh_steps: the cache
// never serves a row older than refresh_steps - 1 steps. Gradients are still
// pushed every step (the trainer does not touch its copy), so the PS's row
// stays exact and the cache only delays what this trainer sees of it, as
// `staleness` does for whole batches.
//
// At most `capacity` rows; past it, CLOCK replacement (a row served since the
// hand last passed it gets a second chance), so Zipf-hot rows stay while the
// long tail cycles through.
//
// Thread-compatible: the trainer's pull thread owns it.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace brook::trainer {

class RowCache {
 public:
  // REQUIRES: dim >= 1, capacity >= 1, refresh_steps >= 1.
  RowCache(int dim, int64_t capacity, int64_t refresh_steps);

  // For each of `keys` (unique): a row fresh at `step` is copied to row i of
  // `out` (keys.size() x dim); the indices of the others are appended to
  // `missing`, in order.
  void Lookup(absl::Span<const uint64_t> keys, int64_t step, absl::Span<float> out,
              std::vector<uint32_t>* missing);
  // Rows just pulled (rows.size() == keys.size() x dim) at `step`.
  void Insert(absl::Span<const uint64_t> keys, absl::Span<const float> rows, int64_t step);

  int64_t size() const { return static_cast<int64_t>(index_.size()); }
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  struct Slot {
    uint64_t key = 0;
    int64_t pulled_step = 0;
    bool referenced = false;
  };
  uint32_t ClaimSlot();  // a free slot, or the CLOCK victim's (unindexed)

  const int dim_;
  const int64_t capacity_;
  const int64_t refresh_steps_;
  std::vector<float> rows_;  // capacity x dim, grown as slots are used
  std::vector<Slot> slots_;
  absl::flat_hash_map<uint64_t, uint32_t> index_;  // key -> slot
  uint32_t hand_ = 0;
  int64_t hits_ = 0, misses_ = 0;
};

}  // namespace brook::trainer
