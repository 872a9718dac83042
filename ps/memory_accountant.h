// MemoryAccountant: the bytes of rows that all tables of one PS hold in
// memory, against a node-wide limit (`brook ps --memory-limit`), so that a
// job of many tables cannot take its per-table budget once per table.
//
// Every table charges its in-memory rows here (Table::charged_row_bytes()
// each: the stored row plus its index entry) besides its own
// memory_budget_bytes. Past the limit a table with a RocksDB tier moves rows
// there; one without refuses the pushes that would create rows
// (RESOURCE_EXHAUSTED). Restored and imported rows are charged
// unconditionally (used may then exceed the limit until rows go).
//
// Thread-safe: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace brook::ps {

class MemoryAccountant {
 public:
  // limit_bytes 0: no limit (used bytes are still counted).
  explicit MemoryAccountant(uint64_t limit_bytes) : limit_(limit_bytes) {}
  MemoryAccountant(const MemoryAccountant&) = delete;
  MemoryAccountant& operator=(const MemoryAccountant&) = delete;

  // Adds `bytes` unless that would take used() past the limit; false (and
  // nothing changes) then.
  bool TryCharge(uint64_t bytes) {
    uint64_t u = used_.load(std::memory_order_relaxed);
    do {
      if (limit_ != 0 && (bytes > limit_ || u > limit_ - bytes)) return false;
    } while (!used_.compare_exchange_weak(u, u + bytes, std::memory_order_relaxed));
    return true;
  }
  // Adds `bytes` even past the limit.
  void Charge(uint64_t bytes) { used_.fetch_add(bytes, std::memory_order_relaxed); }
  // REQUIRES: bytes were charged before.
  void Release(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  // Bytes by which charging `more` would pass the limit (0: it fits).
  uint64_t Excess(uint64_t more) const {
    if (limit_ == 0) return 0;
    const uint64_t after = used_.load(std::memory_order_relaxed) + more;
    return after > limit_ ? after - limit_ : 0;
  }
  // Keys of rows spilled while changed since the last checkpoint, kept by
  // the tiered tables for their next incremental checkpoint (8 bytes each),
  // are charged like rows, but together at most an eighth of the limit, so
  // they cannot crowd out the rows nor grow past the limit between
  // checkpoints. False (nothing charged) past that: the caller drops its
  // lists and takes a full checkpoint next. No limit: always true.
  bool TryChargeBookkeeping(uint64_t bytes) {
    uint64_t b = bookkeeping_.load(std::memory_order_relaxed);
    do {
      if (limit_ != 0 && b + bytes > limit_ / 8) return false;
    } while (!bookkeeping_.compare_exchange_weak(b, b + bytes, std::memory_order_relaxed));
    Charge(bytes);
    return true;
  }
  // REQUIRES: bytes were charged by TryChargeBookkeeping.
  void ReleaseBookkeeping(uint64_t bytes) {
    bookkeeping_.fetch_sub(bytes, std::memory_order_relaxed);
    Release(bytes);
  }
  uint64_t bookkeeping() const { return bookkeeping_.load(std::memory_order_relaxed); }

  // A push refused for the limit (the tables count, for the metric).
  void CountRejection() { rejections_.fetch_add(1, std::memory_order_relaxed); }

  uint64_t limit() const { return limit_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t rejections() const { return rejections_.load(std::memory_order_relaxed); }

 private:
  const uint64_t limit_;  // constant after construction
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> rejections_{0};
  std::atomic<uint64_t> bookkeeping_{0};  // of used_
};

}  // namespace brook::ps
