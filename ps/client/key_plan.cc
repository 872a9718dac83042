#include "ps/client/key_plan.h"

#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "sharding/sharding.h"

namespace brook::ps {

KeyPlan::KeyPlan(uint64_t table_id, absl::Span<const uint64_t> keys, int32_t num_shards) {
  const size_t n = keys.size();
  // Dedup: unique_of[i] is keys[i]'s index among the unique keys.
  absl::flat_hash_map<uint64_t, uint32_t> index;
  index.reserve(n);
  std::vector<uint64_t> unique;
  unique.reserve(n);
  std::vector<uint32_t> unique_of(n);
  for (size_t i = 0; i < n; ++i) {
    auto [it, inserted] = index.try_emplace(keys[i], static_cast<uint32_t>(unique.size()));
    if (inserted) unique.push_back(keys[i]);
    unique_of[i] = it->second;
  }
  num_unique_ = unique.size();

  // Route the unique keys.
  std::vector<std::vector<uint32_t>> by_shard;
  sharding::PartitionKeys(table_id, unique, num_shards, &by_shard);
  by_shard.resize(num_shards);
  std::vector<int32_t> shard_of_unique(unique.size());
  std::vector<uint32_t> local_of_unique(unique.size());
  shard_keys_.resize(num_shards);
  for (int32_t s = 0; s < num_shards; ++s) {
    const std::vector<uint32_t>& positions = by_shard[s];
    shard_keys_[s].resize(positions.size());
    for (size_t j = 0; j < positions.size(); ++j) {
      shard_keys_[s][j] = unique[positions[j]];
      shard_of_unique[positions[j]] = s;
      local_of_unique[positions[j]] = static_cast<uint32_t>(j);
    }
  }

  shard_of_.resize(n);
  local_of_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    shard_of_[i] = shard_of_unique[unique_of[i]];
    local_of_[i] = local_of_unique[unique_of[i]];
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
  for (absl::Span<float> out : shard_out) std::fill(out.begin(), out.end(), 0.0f);
  for (size_t i = 0; i < shard_of_.size(); ++i) {
    float* dst = shard_out[shard_of_[i]].data() + local_of_[i] * dim;
    const float* src = grads.data() + i * dim;
    for (size_t d = 0; d < dim; ++d) dst[d] += src[d];
  }
}

}  // namespace brook::ps
