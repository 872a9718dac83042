#include "ps/internal/key_batch.h"

#include <algorithm>
#include <bit>

namespace brook::ps::internal {

void KeyBatch::Group(const RowStore& store, absl::Span<const uint64_t> request) {
  const size_t n = request.size();
  const int stripes = store.num_stripes();
  raw_hashes_.resize(n);
  raw_stripes_.resize(n);
  begin.assign(stripes + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = RowStore::HashKey(request[i]);
    const auto s = static_cast<uint32_t>(store.StripeOf(h));
    raw_hashes_[i] = h;
    raw_stripes_[i] = s;
    ++begin[s + 1];
  }
  for (int s = 0; s < stripes; ++s) begin[s + 1] += begin[s];
  fill_.assign(begin.begin(), begin.end() - 1);
  keys.resize(n);
  hashes.resize(n);
  original.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t j = fill_[raw_stripes_[i]]++;
    keys[j] = request[i];
    hashes[j] = raw_hashes_[i];
    original[j] = static_cast<uint32_t>(i);
  }
}

bool KeyBatch::HasDuplicateKeys() {
  const size_t n = hashes.size();
  if (n < 2) return false;
  // Open addressing on the (well mixed) hash; 0 marks empty, so hash 0 is
  // tracked on the side.
  const size_t cap = std::bit_ceil(2 * n);
  const size_t mask = cap - 1;
  seen_.assign(cap, 0);
  bool zero_seen = false;
  for (uint64_t h : hashes) {
    if (h == 0) {
      if (zero_seen) return true;
      zero_seen = true;
      continue;
    }
    size_t p = h & mask;
    while (seen_[p] != 0) {
      if (seen_[p] == h) return true;
      p = (p + 1) & mask;
    }
    seen_[p] = h;
  }
  return false;
}

KeyBatch& ThreadKeyBatch() {
  thread_local KeyBatch batch;
  return batch;
}

}  // namespace brook::ps::internal
