// MemRowStore: the in-memory RowStore. Rows live in a BlockArena; each of
// the 2^stripe_bits stripes has its own lock, open-addressing index and list
// of arena blocks.
//
// Layout (per stripe):
//   index_: uint32 entries, linear probing, load <= 1/2, grown by 1.5x.
//     entry = tag (8 bits of the key's hash, 1..255) << 24 | local row id;
//     0 = empty. Home slot = fastrange(low 32 bits of hash, capacity).
//   blocks_: arena blocks of 2^block_shift rows each; local row id r lives at
//     blocks_[r >> block_shift] + (r & mask) * stride.
//   Freed rows (Erase) form a free list threaded through their headers.
// Memory per row = stride (16 B header + 4 B/float, 8-aligned) + 4 B / load
// of index (8-12 B) + the partly used last block per stripe and chunk; about
// 1.22x of the floats for a 32-float row at a million rows.
//
// Thread safety: as RowStore. Invariants, per stripe, under its lock:
//   * size == number of non-empty index entries == rows reachable by key;
//   * every local id in the index is < next_local and not on the free list;
//   * a key appears at most once, and between its home slot and its entry
//     there is no empty entry (linear probing; Erase shifts entries back).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "ps/internal/block_arena.h"
#include "ps/row_store.h"

namespace brook::ps::internal {

struct MemRowStoreOptions {
  int row_floats = 0;
  // Floats at the start of a row that reads use (the weights); Read-side
  // FindBatch prefetches the header and these, Write-side the whole row.
  int hot_floats = 0;
  int stripe_bits = 8;  // 256 stripes: 16 keys per stripe in a 4096-key pull
  bool huge_pages = true;
};

class MemRowStore final : public RowStore {
 public:
  // REQUIRES: row_floats > 0, 0 <= hot_floats <= row_floats, 0 <= stripe_bits <= 12.
  explicit MemRowStore(const MemRowStoreOptions& options);
  ~MemRowStore() override;

  int row_floats() const override { return options_.row_floats; }
  int num_stripes() const override { return 1 << options_.stripe_bits; }
  int StripeOf(uint64_t hash) const override {
    return options_.stripe_bits == 0 ? 0 : static_cast<int>(hash >> (64 - options_.stripe_bits));
  }
  void Read(int stripe, absl::FunctionRef<void(const Reader&)> fn) const override;
  void Write(int stripe, absl::FunctionRef<void(Writer&)> fn) override;
  RowStoreStats Stats() const override;

  size_t stride() const { return stride_; }
  // Entries in stripe `stripe`'s index (it holds at most half of that).
  uint32_t index_capacity(int stripe) const;
  int rows_per_block() const { return 1 << block_shift_; }

  // Largest local row id + 1 a stripe can hold (24-bit ids).
  static constexpr uint32_t kMaxRowsPerStripe = 1u << 24;

 private:
  struct Stripe;
  class StripeReader;
  class StripeWriter;

  // Constant after construction.
  const MemRowStoreOptions options_;
  const size_t stride_;
  const int block_shift_;
  const size_t read_prefetch_bytes_;
  mutable BlockArena arena_;  // internally synchronized
  std::unique_ptr<Stripe[]> stripes_;
};

}  // namespace brook::ps::internal
