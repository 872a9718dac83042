#include "ps/internal/block_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>

namespace brook::ps::internal {
namespace {

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Maps `bytes` (a multiple of `align`, itself a power of two >= the page
// size) at an `align`-aligned address: over-map, then trim both ends.
char* MapAligned(size_t bytes, size_t align) {
  const size_t span = bytes + align;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const auto raw = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (raw + align - 1) & ~(static_cast<uintptr_t>(align) - 1);
  if (aligned > raw) munmap(p, aligned - raw);
  const uintptr_t end = raw + span;
  if (end > aligned + bytes)
    munmap(reinterpret_cast<void*>(aligned + bytes), end - aligned - bytes);
  return reinterpret_cast<char*>(aligned);
}

}  // namespace

BlockArena::BlockArena(size_t block_bytes, bool huge_pages)
    : block_bytes_(block_bytes), huge_pages_(huge_pages) {}

BlockArena::~BlockArena() {
  MutexLock lock(&mu_);
  for (const Chunk& c : chunks_) munmap(c.base, c.bytes);
}

bool BlockArena::NewChunk() {
  // Doubling up to a huge page keeps small tables small and bounds the
  // unused tail to the last chunk: < 2 MiB, ~1.5% of a 1M x 128 B table.
  size_t want = chunks_.empty() ? kFirstChunk : std::min(chunks_.back().bytes * 2, kHugePage);
  want = std::max(want, block_bytes_);
  const bool huge = huge_pages_ && want >= kHugePage;
  const size_t bytes = RoundUp(want, huge ? kHugePage : size_t{4096});
  char* base = MapAligned(bytes, huge ? kHugePage : size_t{4096});
  if (base == nullptr) return false;
#ifdef MADV_HUGEPAGE
  // Advisory: the kernel gives huge pages only on request here (THP
  // "madvise" mode). Failure just means 4 KiB pages.
  if (huge) madvise(base, bytes, MADV_HUGEPAGE);
#endif
  chunks_.push_back({base, bytes});
  next_ = base;
  left_ = bytes;
  total_ += bytes;
  return true;
}

char* BlockArena::AllocateBlock() {
  MutexLock lock(&mu_);
  if (left_ < block_bytes_ && !NewChunk()) return nullptr;
  char* b = next_;
  next_ += block_bytes_;
  left_ -= block_bytes_;
  return b;
}

uint64_t BlockArena::allocated_bytes() const {
  MutexLock lock(&mu_);
  return total_;
}

}  // namespace brook::ps::internal
