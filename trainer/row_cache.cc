#include "trainer/row_cache.h"

#include <cstring>

namespace brook::trainer {

RowCache::RowCache(int dim, int64_t capacity, int64_t refresh_steps)
    : dim_(dim), capacity_(capacity), refresh_steps_(refresh_steps) {}

void RowCache::Lookup(absl::Span<const uint64_t> keys, int64_t step, absl::Span<float> out,
                      std::vector<uint32_t>* missing) {
  const size_t row_bytes = static_cast<size_t>(dim_) * sizeof(float);
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = index_.find(keys[i]);
    if (it != index_.end()) {
      Slot& slot = slots_[it->second];
      // Fresh while younger than refresh_steps (a step before the row's own
      // pull, as a stale batch may be, is fresh too).
      if (step - slot.pulled_step < refresh_steps_) {
        std::memcpy(out.data() + i * dim_, rows_.data() + size_t{it->second} * dim_, row_bytes);
        slot.referenced = true;
        ++hits_;
        continue;
      }
    }
    missing->push_back(static_cast<uint32_t>(i));
    ++misses_;
  }
}

uint32_t RowCache::ClaimSlot() {
  if (static_cast<int64_t>(slots_.size()) < capacity_) {
    slots_.emplace_back();
    rows_.resize(slots_.size() * static_cast<size_t>(dim_));
    return static_cast<uint32_t>(slots_.size() - 1);
  }
  for (;;) {
    Slot& slot = slots_[hand_];
    const uint32_t at = hand_;
    hand_ = static_cast<uint32_t>((hand_ + 1) % slots_.size());
    if (slot.referenced) {
      slot.referenced = false;  // a second chance
      continue;
    }
    index_.erase(slot.key);
    return at;
  }
}

void RowCache::Insert(absl::Span<const uint64_t> keys, absl::Span<const float> rows, int64_t step) {
  const size_t row_bytes = static_cast<size_t>(dim_) * sizeof(float);
  for (size_t i = 0; i < keys.size(); ++i) {
    uint32_t at;
    auto it = index_.find(keys[i]);
    if (it != index_.end()) {
      at = it->second;
    } else {
      at = ClaimSlot();
      index_.emplace(keys[i], at);
      slots_[at].key = keys[i];
      slots_[at].referenced = false;
    }
    slots_[at].pulled_step = step;
    std::memcpy(rows_.data() + size_t{at} * dim_, rows.data() + i * dim_, row_bytes);
  }
}

}  // namespace brook::trainer
