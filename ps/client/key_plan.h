// The routing of one pull or push, shared by every PsClient: the caller's
// keys deduplicated (first occurrence wins the order) and grouped by shard
// with sharding::PartitionKeys, plus the map back from each input position to
// (shard, index in that shard's request). Built once per call, O(keys): one
// probe of a per-thread open-addressing table per key, one shard hash per
// unique key, and no allocation beyond the plan's own vectors.
//
// Thread-compatible (build one per call).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace brook::ps {

class KeyPlan {
 public:
  // REQUIRES: num_shards > 0; keys.size() < 2^32.
  KeyPlan(uint64_t table_id, absl::Span<const uint64_t> keys, int32_t num_shards);

  int32_t num_shards() const { return static_cast<int32_t>(shard_keys_.size()); }
  size_t num_keys() const { return shard_of_.size(); }
  size_t num_unique() const { return num_unique_; }
  // The unique keys that live on `shard`, in first-occurrence order: the keys
  // of that shard's request.
  absl::Span<const uint64_t> shard_keys(int32_t shard) const { return shard_keys_[shard]; }

  // For each of shard_keys(shard): the position of its first occurrence in
  // the caller's keys, so a pull reply's rows can go straight to their place.
  absl::Span<const uint32_t> shard_first_inputs(int32_t shard) const {
    return shard_first_inputs_[shard];
  }
  // Pull, after row first_input of every unique key is in `out`: copies it
  // to the key's later occurrences. REQUIRES: out.size() == num_keys() * dim.
  void CopyDuplicateRows(size_t dim, absl::Span<float> out) const;

  // Pull: shard_rows[s] holds shard_keys(s).size() x dim floats (shard s's
  // reply). Writes row i of `out` for every input key i.
  // REQUIRES: sizes as described; out.size() == num_keys() * dim.
  void ExpandRows(absl::Span<const absl::Span<const float>> shard_rows, size_t dim,
                  absl::Span<float> out) const;

  // Push: sums the gradient rows of equal keys (in input order) into one row
  // per unique key; shard_out[s] (overwritten) receives shard s's
  // shard_keys(s).size() x dim floats, e.g. straight into a request buffer.
  // REQUIRES: grads.size() == num_keys() * dim; shard_out sized as described.
  void SumGradients(absl::Span<const float> grads, size_t dim,
                    absl::Span<const absl::Span<float>> shard_out) const;

 private:
  std::vector<std::vector<uint64_t>> shard_keys_;
  std::vector<std::vector<uint32_t>> shard_first_inputs_;
  // Per input key: its shard and its index in that shard's keys.
  std::vector<int32_t> shard_of_;
  std::vector<uint32_t> local_of_;
  size_t num_unique_ = 0;
};

}  // namespace brook::ps
