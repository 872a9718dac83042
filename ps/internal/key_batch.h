// KeyBatch: one request's keys grouped by RowStore stripe, so a Table takes
// one stripe lock per stripe per request and hands the store contiguous
// batches to prefetch. Per-thread scratch (ThreadKeyBatch) keeps the hot path
// free of per-request allocation once the vectors have grown.
//
// Thread-compatible: each thread uses its own.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "ps/row_store.h"

namespace brook::ps::internal {

struct KeyBatch {
  // In stripe order: stripe s holds [begin[s], begin[s + 1]).
  std::vector<uint64_t> keys;
  std::vector<uint64_t> hashes;    // RowStore::HashKey(keys[j])
  std::vector<uint32_t> original;  // index of keys[j] in the request
  std::vector<uint32_t> begin;     // num_stripes + 1 entries
  // Scratch for callers.
  std::vector<RowHeader*> rows;
  std::vector<const RowHeader*> const_rows;
  std::vector<uint32_t> misses;
  std::vector<uint64_t> victims;

  // Hashes and groups `request` by store.StripeOf.
  void Group(const RowStore& store, absl::Span<const uint64_t> request);
  // True if a key occurs twice (hashes are a bijection of keys, so equal
  // hashes mean equal keys). REQUIRES: Group() called.
  bool HasDuplicateKeys();

  size_t size() const { return keys.size(); }

 private:
  std::vector<uint64_t> raw_hashes_;
  std::vector<uint32_t> raw_stripes_;
  std::vector<uint32_t> fill_;
  std::vector<uint64_t> seen_;
};

// This thread's batch. Valid until the thread's next call; one request at a
// time per thread (no re-entry from callbacks).
KeyBatch& ThreadKeyBatch();

}  // namespace brook::ps::internal
