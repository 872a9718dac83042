#include "datatools/space_saving.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace brook::datatools {

SpaceSaving::SpaceSaving(size_t capacity) : capacity_(capacity) {
  assert(capacity >= 1);
  heap_.reserve(capacity);
}

void SpaceSaving::Swap(size_t a, size_t b) {
  std::swap(heap_[a], heap_[b]);
  index_[heap_[a].value] = a;
  index_[heap_[b].value] = b;
}

void SpaceSaving::SiftUp(size_t i) {
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (heap_[parent].count <= heap_[i].count) return;
    Swap(parent, i);
    i = parent;
  }
}

void SpaceSaving::SiftDown(size_t i) {
  const size_t n = heap_.size();
  while (true) {
    size_t smallest = i;
    const size_t l = 2 * i + 1;
    const size_t r = l + 1;
    if (l < n && heap_[l].count < heap_[smallest].count) smallest = l;
    if (r < n && heap_[r].count < heap_[smallest].count) smallest = r;
    if (smallest == i) return;
    Swap(i, smallest);
    i = smallest;
  }
}

void SpaceSaving::Add(std::string_view value, uint64_t count) {
  total_ += count;
  // Debian's abseil hashes its own string_view type, not std's.
  auto it = index_.find(absl::string_view(value.data(), value.size()));
  if (it != index_.end()) {
    const size_t i = it->second;
    heap_[i].count += count;
    SiftDown(i);
    return;
  }
  if (heap_.size() < capacity_) {
    heap_.push_back(Entry{std::string(value), count, 0});
    index_[heap_.back().value] = heap_.size() - 1;
    SiftUp(heap_.size() - 1);
    return;
  }
  // Evict the smallest counter; the newcomer inherits its count as error.
  Entry& root = heap_[0];
  index_.erase(root.value);
  root.error = root.count;
  root.count += count;
  root.value.assign(value);
  index_[root.value] = 0;
  SiftDown(0);
}

std::vector<SpaceSaving::Entry> SpaceSaving::Top(size_t k) const {
  std::vector<Entry> out = heap_;
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return a.count != b.count ? a.count > b.count : a.value < b.value;
  });
  if (out.size() > k) out.resize(k);
  return out;
}

}  // namespace brook::datatools
