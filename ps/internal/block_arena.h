// BlockArena: hands out fixed-size blocks carved from large mmap'd chunks,
// and frees them all at once on destruction (leveldb util/arena.h, with
// fixed blocks). Chunks start at 64 KiB and double up to 2 MiB, aligned to
// 2 MiB and madvise(MADV_HUGEPAGE)'d once they are that big, so a table of a
// million rows is mapped by huge pages (random gathers ~1.5x faster here,
// NOTES.md) while a tiny table costs kilobytes.
//
// Thread-safe: AllocateBlock and allocated_bytes may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "ps/internal/mutex.h"

namespace brook::ps::internal {

class BlockArena {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kFirstChunk = size_t{64} << 10;

  // REQUIRES: block_bytes > 0 and a multiple of 8.
  BlockArena(size_t block_bytes, bool huge_pages);
  ~BlockArena();
  BlockArena(const BlockArena&) = delete;
  BlockArena& operator=(const BlockArena&) = delete;

  // A block of block_bytes() bytes, 8-byte aligned, contents unspecified
  // (zero on first use); nullptr if the OS refuses memory.
  char* AllocateBlock() ABSL_LOCKS_EXCLUDED(mu_);

  size_t block_bytes() const { return block_bytes_; }
  // Bytes mapped for chunks (including the unused tail of the last one).
  uint64_t allocated_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Chunk {
    char* base;
    size_t bytes;
  };
  bool NewChunk() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const size_t block_bytes_;
  const bool huge_pages_;

  mutable Mutex mu_;
  std::vector<Chunk> chunks_ ABSL_GUARDED_BY(mu_);
  char* next_ ABSL_GUARDED_BY(mu_) = nullptr;  // next free byte of the last chunk
  size_t left_ ABSL_GUARDED_BY(mu_) = 0;       // bytes left in it
  uint64_t total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace brook::ps::internal
