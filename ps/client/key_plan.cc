#include "ps/client/key_plan.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "sharding/sharding.h"

namespace brook::ps {
namespace {

// The dedup table's slot for a key: the high bits of a multiplicative hash
// (keys are often small consecutive ids; the multiply spreads them).
inline size_t Slot(uint64_t key, int shift) {
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift);
}

}  // namespace

KeyPlan::KeyPlan(uint64_t table_id, absl::Span<const uint64_t> keys, int32_t num_shards) {
  const size_t n = keys.size();
  // Dedup: unique_of[i] is keys[i]'s index among the unique keys. An open
  // addressing table of unique-key index + 1 (0 = empty) at load <= 1/2,
  // reused by this thread's calls: a pull or push of 4096 keys spent ~25 ns a
  // key in a general hash map (allocation, rehash checks), a third of the
  // client's CPU per call (BENCHMARKS.md, issue 3).
  thread_local std::vector<uint32_t> table;
  thread_local std::vector<uint64_t> unique;
  thread_local std::vector<uint32_t> unique_of;
  thread_local std::vector<uint32_t> first_of_unique;
  const size_t cap = std::bit_ceil(std::max<size_t>(16, 2 * n));
  const int shift = 64 - std::countr_zero(cap);
  table.assign(cap, 0);
  unique.clear();
  first_of_unique.clear();
  unique_of.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t key = keys[i];
    size_t p = Slot(key, shift);
    for (;;) {
      const uint32_t e = table[p];
      if (e == 0) {
        unique.push_back(key);
        first_of_unique.push_back(static_cast<uint32_t>(i));
        table[p] = static_cast<uint32_t>(unique.size());
        unique_of[i] = table[p] - 1;
        break;
      }
      if (unique[e - 1] == key) {
        unique_of[i] = e - 1;
        break;
      }
      p = (p + 1) & (cap - 1);
    }
  }
  num_unique_ = unique.size();

  // Route the unique keys: a stable counting sort by shard, so each shard's
  // keys keep their first-occurrence order.
  thread_local std::vector<int32_t> shard_of_unique;
  thread_local std::vector<uint32_t> local_of_unique;
  shard_of_unique.resize(num_unique_);
  local_of_unique.resize(num_unique_);
  std::vector<uint32_t> counts(num_shards, 0);
  for (size_t u = 0; u < num_unique_; ++u) {
    const int32_t s = num_shards == 1 ? 0 : sharding::ShardForKey(table_id, unique[u], num_shards);
    shard_of_unique[u] = s;
    local_of_unique[u] = counts[s]++;
  }
  shard_keys_.resize(num_shards);
  shard_first_inputs_.resize(num_shards);
  for (int32_t s = 0; s < num_shards; ++s) {
    shard_keys_[s].resize(counts[s]);
    shard_first_inputs_[s].resize(counts[s]);
  }
  for (size_t u = 0; u < num_unique_; ++u) {
    shard_keys_[shard_of_unique[u]][local_of_unique[u]] = unique[u];
    shard_first_inputs_[shard_of_unique[u]][local_of_unique[u]] = first_of_unique[u];
  }

  shard_of_.resize(n);
  local_of_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    shard_of_[i] = shard_of_unique[unique_of[i]];
    local_of_[i] = local_of_unique[unique_of[i]];
  }
}

void KeyPlan::CopyDuplicateRows(size_t dim, absl::Span<float> out) const {
  if (num_unique_ == shard_of_.size()) return;
  const size_t row_bytes = dim * sizeof(float);
  for (size_t i = 0; i < shard_of_.size(); ++i) {
    const uint32_t first = shard_first_inputs_[shard_of_[i]][local_of_[i]];
    if (first != i) std::memcpy(out.data() + i * dim, out.data() + size_t{first} * dim, row_bytes);
  }
}

void KeyPlan::ExpandRows(absl::Span<const absl::Span<const float>> shard_rows, size_t dim,
                         absl::Span<float> out) const {
  const size_t row_bytes = dim * sizeof(float);
  for (size_t i = 0; i < shard_of_.size(); ++i) {
    std::memcpy(out.data() + i * dim, shard_rows[shard_of_[i]].data() + local_of_[i] * dim,
                row_bytes);
  }
}

void KeyPlan::SumGradients(absl::Span<const float> grads, size_t dim,
                           absl::Span<const absl::Span<float>> shard_out) const {
  if (num_unique_ == shard_of_.size()) {
    // No duplicates: every destination row is written once; copy, no zero-fill.
    const size_t row_bytes = dim * sizeof(float);
    for (size_t i = 0; i < shard_of_.size(); ++i) {
      std::memcpy(shard_out[shard_of_[i]].data() + local_of_[i] * dim, grads.data() + i * dim,
                  row_bytes);
    }
    return;
  }
  for (absl::Span<float> out : shard_out) std::fill(out.begin(), out.end(), 0.0f);
  for (size_t i = 0; i < shard_of_.size(); ++i) {
    float* dst = shard_out[shard_of_[i]].data() + local_of_[i] * dim;
    const float* src = grads.data() + i * dim;
    for (size_t d = 0; d < dim; ++d) dst[d] += src[d];
  }
}

}  // namespace brook::ps
