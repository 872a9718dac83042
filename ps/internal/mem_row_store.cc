#include "ps/internal/mem_row_store.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

#include "ps/internal/mutex.h"

namespace brook::ps::internal {
namespace {

constexpr uint32_t kIdBits = 24;
constexpr uint32_t kIdMask = (1u << kIdBits) - 1;
constexpr uint32_t kNoRow = 0xFFFFFFFFu;
// FindBatch's pipeline distance: keys between prefetching a key's index line
// and reading it, and between prefetching its row and verifying it. About
// 2 x kAhead lookups' misses are in flight, enough to keep the memory
// system busy without overrunning the core's miss buffers.
constexpr size_t kAhead = 8;
constexpr size_t kRing = 32;  // > 2 x kAhead: pos[] slots live from stage 1 to 3
static_assert(kRing > 2 * kAhead && (kRing & (kRing - 1)) == 0);
constexpr uint32_t kMinCapacity = 16;
// The index's load bound, kMaxLoadNum / kMaxLoadDen. FindBatch runs ahead on
// the predicted exit of its probe loop; a key displaced from its home entry
// makes that guess wrong, and the work issued past it, the next keys'
// prefetches included, is redone once the entry arrives. At 1/2 instead of
// 4/5, fewer keys are displaced: a 1 M-row dim-16 pull ran 13-20% faster
// (BENCHMARKS.md, issue 3), for 8-12 B of index per row instead of 5-7.5.
constexpr uint64_t kMaxLoadNum = 1;
constexpr uint64_t kMaxLoadDen = 2;

inline uint32_t Home(uint64_t hash, uint32_t cap) {
  // Lemire's fastrange: any capacity, no modulo.
  return static_cast<uint32_t>((static_cast<uint64_t>(static_cast<uint32_t>(hash)) * cap) >> 32);
}

inline uint32_t Tag(uint64_t hash) {
  const uint32_t t = static_cast<uint32_t>(hash >> 40) & 0xFF;
  return t == 0 ? 1 : t;  // 0 marks an empty entry
}

inline uint32_t Next(uint32_t p, uint32_t cap) { return p + 1 == cap ? 0 : p + 1; }

inline void PrefetchRange(const void* p, size_t bytes, bool write) {
  const auto start = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
  const auto end = reinterpret_cast<uintptr_t>(p) + bytes;
  for (uintptr_t a = start; a < end; a += 64) {
    if (write) {
      __builtin_prefetch(reinterpret_cast<const void*>(a), 1, 3);
    } else {
      __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 3);
    }
  }
}

size_t Stride(int row_floats) {
  return (sizeof(RowHeader) + static_cast<size_t>(row_floats) * sizeof(float) + 7) & ~size_t{7};
}

// Rows per arena block: a power of two filling about 16 KiB, 1..64. Small
// blocks bound each stripe's partly used block (256 stripes x <16 KiB).
int BlockShift(size_t stride) {
  const size_t rows = std::clamp<size_t>((size_t{16} << 10) / stride, 1, 64);
  return std::bit_width(rows) - 1;  // floor(log2)
}

}  // namespace

struct alignas(64) MemRowStore::Stripe {
  mutable RwMutex mu;
  std::unique_ptr<uint32_t[]> index ABSL_GUARDED_BY(mu);
  uint32_t cap ABSL_GUARDED_BY(mu) = 0;
  uint32_t size ABSL_GUARDED_BY(mu) = 0;
  uint32_t grow_at ABSL_GUARDED_BY(mu) = 0;  // size that triggers growth
  uint32_t next_local ABSL_GUARDED_BY(mu) = 0;
  uint32_t free_head ABSL_GUARDED_BY(mu) = kNoRow;
  uint64_t grows ABSL_GUARDED_BY(mu) = 0;  // index rebuilds (RowStoreStats::index_grows)
  std::vector<char*> blocks ABSL_GUARDED_BY(mu);
};

// The stripe operations. One class serves both views; Read() hands it out as
// a const Reader. The stripe's lock is held by Read()/Write() around every
// use, which the thread-safety analysis cannot see through the callback.
class MemRowStore::StripeWriter final : public RowStore::Reader, public RowStore::Writer {
 public:
  StripeWriter(const MemRowStore* store, Stripe* st) : store_(store), st_(st) {}

  void FindBatch(absl::Span<const uint64_t> keys, absl::Span<const uint64_t> hashes,
                 absl::Span<const RowHeader*> rows) const override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Find(keys, hashes, const_cast<RowHeader**>(rows.data()), store_->read_prefetch_bytes_,
         /*write=*/false);
  }
  void FindBatch(absl::Span<const uint64_t> keys, absl::Span<const uint64_t> hashes,
                 absl::Span<RowHeader*> rows) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Find(keys, hashes, rows.data(), store_->stride_, /*write=*/true);
  }
  void ForEach(absl::FunctionRef<void(const RowHeader&)> fn) const override
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (uint32_t p = 0; p < st_->cap; ++p) {
      const uint32_t e = st_->index[p];
      if (e != 0) fn(*Row(e & kIdMask));
    }
  }
  void ForEach(absl::FunctionRef<void(RowHeader&)> fn) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (uint32_t p = 0; p < st_->cap; ++p) {
      const uint32_t e = st_->index[p];
      if (e != 0) fn(*Row(e & kIdMask));
    }
  }
  RowHeader* SampleRow(uint64_t random) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (st_->size == 0) return nullptr;
    // Linear probing keeps occupied entries dense enough (load >= 1/3 after
    // growth) that the walk to the next occupied entry is short.
    for (uint32_t p = Home(random, st_->cap);; p = Next(p, st_->cap)) {
      const uint32_t e = st_->index[p];
      if (e != 0) return Row(e & kIdMask);
    }
  }
  uint32_t size() const override ABSL_NO_THREAD_SAFETY_ANALYSIS { return st_->size; }
  RowHeader* Insert(uint64_t key, uint64_t hash) override ABSL_NO_THREAD_SAFETY_ANALYSIS;
  void Reserve(uint32_t more_rows) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    const uint64_t rows = std::min<uint64_t>(uint64_t{st_->size} + more_rows, kMaxRowsPerStripe);
    if (rows > st_->grow_at) (void)Grow(rows);  // on failure Insert grows (or fails) later
  }
  void Erase(uint64_t key, uint64_t hash) override ABSL_NO_THREAD_SAFETY_ANALYSIS;

 private:
  RowHeader* Row(uint32_t id) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    const int shift = store_->block_shift_;
    char* block = st_->blocks[id >> shift];
    return reinterpret_cast<RowHeader*>(block + (id & ((1u << shift) - 1)) * store_->stride_);
  }
  void Find(absl::Span<const uint64_t> keys, absl::Span<const uint64_t> hashes, RowHeader** rows,
            size_t prefetch_bytes, bool write) const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Probes from `p` comparing full keys; the index position of key, or kNoRow.
  uint32_t Probe(uint64_t key, uint32_t tag, uint32_t p) const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Replaces the index with one that holds `rows` rows within the load bound.
  bool Grow(uint64_t rows) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  const MemRowStore* store_;
  Stripe* st_;
};

uint32_t MemRowStore::StripeWriter::Probe(uint64_t key, uint32_t tag, uint32_t p) const {
  const uint32_t* idx = st_->index.get();
  const uint32_t cap = st_->cap;
  for (;;) {
    const uint32_t e = idx[p];
    if (e == 0) return kNoRow;
    if ((e >> kIdBits) == tag && Row(e & kIdMask)->key == key) return p;
    p = Next(p, cap);
  }
}

void MemRowStore::StripeWriter::Find(absl::Span<const uint64_t> keys,
                                     absl::Span<const uint64_t> hashes, RowHeader** rows,
                                     size_t prefetch_bytes, bool write) const {
  const size_t n = keys.size();
  if (st_->size == 0) {
    std::fill(rows, rows + n, nullptr);
    return;
  }
  const uint32_t* idx = st_->index.get();
  const uint32_t cap = st_->cap;
  // A three-stage software pipeline over the keys, kAhead keys apart: key i's
  // index line is prefetched; kAhead keys later its entry is read and its
  // candidate row (first tag match, not yet verified) prefetched; kAhead keys
  // after that the row's key is checked, which rarely (1/255 per probe) has
  // to probe further. Each stage reads lines prefetched a stage earlier, so
  // the misses of ~2 x kAhead keys overlap continuously, not batch by batch.
  uint32_t pos[kRing];
  for (size_t i = 0; i < n + 2 * kAhead; ++i) {
    if (i < n) {
      pos[i % kRing] = Home(hashes[i], cap);
      __builtin_prefetch(idx + pos[i % kRing], 0, 3);
    }
    if (i >= kAhead && i - kAhead < n) {
      const size_t j = i - kAhead;
      const uint32_t tag = Tag(hashes[j]);
      uint32_t p = pos[j % kRing];
      RowHeader* r = nullptr;
      for (;;) {
        const uint32_t e = idx[p];
        if (e == 0) break;
        if ((e >> kIdBits) == tag) {
          r = Row(e & kIdMask);
          break;
        }
        p = Next(p, cap);
      }
      pos[j % kRing] = p;
      rows[j] = r;
      if (r != nullptr) PrefetchRange(r, prefetch_bytes, write);
    }
    if (i >= 2 * kAhead) {
      const size_t k = i - 2 * kAhead;
      RowHeader* r = rows[k];
      if (r == nullptr || r->key == keys[k]) continue;
      const uint32_t p = Probe(keys[k], Tag(hashes[k]), Next(pos[k % kRing], cap));
      rows[k] = p == kNoRow ? nullptr : Row(idx[p] & kIdMask);
    }
  }
}

bool MemRowStore::StripeWriter::Grow(uint64_t rows) {
  const uint32_t old_cap = st_->cap;
  uint64_t cap = old_cap == 0 ? kMinCapacity : old_cap + old_cap / 2;
  while (rows * kMaxLoadDen > cap * kMaxLoadNum) cap += cap / 2;
  std::unique_ptr<uint32_t[]> fresh(new (std::nothrow) uint32_t[cap]());
  if (!fresh) return false;
  const auto new_cap = static_cast<uint32_t>(cap);
  for (uint32_t p = 0; p < old_cap; ++p) {
    const uint32_t e = st_->index[p];
    if (e == 0) continue;
    uint32_t q = Home(HashKey(Row(e & kIdMask)->key), new_cap);
    while (fresh[q] != 0) q = Next(q, new_cap);
    fresh[q] = e;
  }
  st_->index = std::move(fresh);
  st_->cap = new_cap;
  st_->grow_at = static_cast<uint32_t>(cap * kMaxLoadNum / kMaxLoadDen);
  ++st_->grows;
  return true;
}

RowHeader* MemRowStore::StripeWriter::Insert(uint64_t key, uint64_t hash) {
  if (st_->size + 1 > st_->grow_at && !Grow(uint64_t{st_->size} + 1)) return nullptr;
  uint32_t id;
  RowHeader* r;
  if (st_->free_head != kNoRow) {
    id = st_->free_head;
    r = Row(id);
    st_->free_head = static_cast<uint32_t>(r->key);
  } else {
    if (st_->next_local >= kMaxRowsPerStripe) return nullptr;
    if (st_->next_local == st_->blocks.size() << store_->block_shift_) {
      char* block = store_->arena_.AllocateBlock();
      if (block == nullptr) return nullptr;
      st_->blocks.push_back(block);
    }
    id = st_->next_local++;
    r = Row(id);
  }
  r->key = key;
  uint32_t p = Home(hash, st_->cap);
  while (st_->index[p] != 0) p = Next(p, st_->cap);
  st_->index[p] = Tag(hash) << kIdBits | id;
  ++st_->size;
  return r;
}

void MemRowStore::StripeWriter::Erase(uint64_t key, uint64_t hash) {
  if (st_->size == 0) return;
  uint32_t* idx = st_->index.get();
  const uint32_t cap = st_->cap;
  const uint32_t p = Probe(key, Tag(hash), Home(hash, cap));
  if (p == kNoRow) return;
  const uint32_t id = idx[p] & kIdMask;
  // Backward-shift deletion (no tombstones): move each later entry of the
  // run into the hole unless its home lies cyclically in (hole, j].
  uint32_t hole = p;
  for (uint32_t j = Next(p, cap);; j = Next(j, cap)) {
    const uint32_t e = idx[j];
    if (e == 0) break;
    const uint32_t home = Home(HashKey(Row(e & kIdMask)->key), cap);
    const bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!stays) {
      idx[hole] = e;
      hole = j;
    }
  }
  idx[hole] = 0;
  --st_->size;
  RowHeader* r = Row(id);
  r->key = st_->free_head;  // free list threaded through the header
  st_->free_head = id;
}

MemRowStore::MemRowStore(const MemRowStoreOptions& options)
    : options_(options),
      stride_(Stride(options.row_floats)),
      block_shift_(BlockShift(stride_)),
      read_prefetch_bytes_(sizeof(RowHeader) + static_cast<size_t>(options.hot_floats) * 4),
      arena_(stride_ << block_shift_, options.huge_pages),
      stripes_(new Stripe[size_t{1} << options.stripe_bits]) {}

MemRowStore::~MemRowStore() = default;

void MemRowStore::Read(int stripe, absl::FunctionRef<void(const Reader&)> fn) const {
  Stripe& st = stripes_[stripe];
  ReaderLock lock(&st.mu);
  const StripeWriter view(this, &st);
  fn(view);
}

void MemRowStore::Write(int stripe, absl::FunctionRef<void(Writer&)> fn) {
  Stripe& st = stripes_[stripe];
  WriterLock lock(&st.mu);
  StripeWriter view(this, &st);
  fn(view);
}

uint32_t MemRowStore::index_capacity(int stripe) const {
  const Stripe& st = stripes_[stripe];
  ReaderLock lock(&st.mu);
  return st.cap;
}

RowStoreStats MemRowStore::Stats() const {
  RowStoreStats s;
  s.memory_bytes = arena_.allocated_bytes() + sizeof(Stripe) * num_stripes();
  for (int i = 0; i < num_stripes(); ++i) {
    const Stripe& st = stripes_[i];
    ReaderLock lock(&st.mu);
    s.rows += st.size;
    s.index_grows += st.grows;
    s.memory_bytes += uint64_t{st.cap} * sizeof(uint32_t) + st.blocks.capacity() * sizeof(char*);
  }
  return s;
}

}  // namespace brook::ps::internal
