// The chunks that travel between the input pipeline's stages (read thread ->
// parse workers -> consumer), and what the stages share: their counters and
// the shuffle generator. Internal to trainer/input (pipeline_stages.h and its
// two halves, pipeline.cc and pipeline_stages.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "trainer/input/bounded_queue.h"
#include "trainer/input/columnar_batch.h"
#include "trainer/input/pipeline.h"
#include "trainer/input/progress.h"

namespace brook::input::internal {

// Parse worker -> consumer (through the ordered window); also a cache entry.
struct ParsedChunk {
  int epoch = 0;
  bool last_in_epoch = false;  // the epoch's final chunk (may hold no rows)
  bool end_of_stream = false;  // the final chunk of the last epoch
  absl::Status error;          // !ok: the stream ends here with this error
  ColumnarBatch data;
  std::vector<RecordId> row_ids;    // parallel to data's rows
  std::vector<RecordId> discarded;  // bad examples skipped
  std::vector<UnitEnd> unit_ends;
};

// Read thread -> parse workers: up to batch_size serialized records, or rows
// to take from the cache (later epochs), or an error.
struct RecordChunk {
  uint64_t seq = 0;  // position in the stream; the window restores this order
  int epoch = 0;
  bool last_in_epoch = false;
  bool end_of_stream = false;
  absl::Status error;
  std::string bytes;          // the records, back to back
  std::vector<size_t> ends;   // record i is bytes[ends[i-1], ends[i])
  std::vector<RecordId> ids;  // parallel to ends
  std::vector<UnitEnd> unit_ends;
  // Cache replay: no bytes; the worker builds the chunk from the complete
  // (immutable) cache: a copy of cached chunk `cache_chunk` (>= 0), or the
  // rows `cache_rows` (chunk, row) gathered; with `cache_side_info` also
  // every cached chunk's discarded records and unit ends.
  bool from_cache = false;
  int64_t cache_chunk = -1;
  std::vector<std::pair<uint32_t, uint32_t>> cache_rows;
  bool cache_side_info = false;

  size_t size() const { return ends.size(); }
  std::string_view record(size_t i) const {
    const size_t begin = i == 0 ? 0 : ends[i - 1];
    return std::string_view(bytes).substr(begin, ends[i] - begin);
  }
  void Add(std::string_view record, RecordId id) {
    bytes.append(record);
    ends.push_back(bytes.size());
    ids.push_back(id);
  }
};

// Time and item counters of one stage, summed over its threads. Relaxed
// atomics: they are statistics, read by stats() while stages run. A wait in
// progress counts live (a consumer blocked for a minute shows a minute now,
// not when it wakes): each thread slot publishes when its current wait began.
class StageCounters {
 public:
  enum WaitKind { kInput = 0, kOutput = 1 };

  explicit StageCounters(size_t max_threads) : since_(2 * max_threads) {}

  void Add(std::atomic<uint64_t>& c, uint64_t v) { c.fetch_add(v, std::memory_order_relaxed); }
  void AddItems(uint64_t n) { Add(items, n); }
  void AddBusy(uint64_t ns) { Add(busy_ns, ns); }

  // Runs the blocking call `f` on thread slot `slot`, counting its time as a
  // wait of `kind`. Returns f's result and adds the time to *waited_ns.
  template <typename F>
  auto Waiting(size_t slot, WaitKind kind, uint64_t* waited_ns, F&& f) {
    std::atomic<uint64_t>& since = since_[2 * slot + kind];
    const uint64_t start = NowNanos();
    since.store(start, std::memory_order_relaxed);
    auto result = f();
    const uint64_t waited = NowNanos() - start;
    since.store(0, std::memory_order_relaxed);  // before adding: never counted twice
    Add(kind == kInput ? wait_input_ns : wait_output_ns, waited);
    if (waited_ns != nullptr) *waited_ns += waited;
    return result;
  }

  StageStats Snapshot(int threads) const {
    const uint64_t now = NowNanos();
    uint64_t live[2] = {0, 0};
    for (size_t i = 0; i < since_.size(); ++i) {
      const uint64_t t = since_[i].load(std::memory_order_relaxed);
      if (t != 0 && now > t) live[i % 2] += now - t;
    }
    auto sec = [](uint64_t ns) { return static_cast<double>(ns) * 1e-9; };
    return {.items = items.load(std::memory_order_relaxed),
            .busy_seconds = sec(busy_ns.load(std::memory_order_relaxed)),
            .wait_input_seconds = sec(wait_input_ns.load(std::memory_order_relaxed) + live[0]),
            .wait_output_seconds = sec(wait_output_ns.load(std::memory_order_relaxed) + live[1]),
            .threads = threads};
  }

  std::atomic<uint64_t> items{0};
  std::atomic<uint64_t> busy_ns{0};
  std::atomic<uint64_t> wait_input_ns{0};   // finished waits only
  std::atomic<uint64_t> wait_output_ns{0};  // finished waits only

 private:
  std::vector<std::atomic<uint64_t>> since_;  // [2 * slot + kind]: start of the wait, 0 = none
};

// A small deterministic generator (splitmix64) for the shuffles: the same
// (seed, epoch, stream) gives the same sequence on every platform, which
// std::uniform_int_distribution does not promise.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t epoch, uint64_t stream);
  uint64_t Next();
  // Uniform in [0, n). REQUIRES: n > 0. (Modulo bias below 2^-40 for n < 2^24.)
  uint64_t Uniform(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

// Rng streams, so the unit order, the record shuffle and the cache shuffle of
// one epoch are independent.
inline constexpr uint64_t kUnitOrderStream = 1;
inline constexpr uint64_t kRecordShuffleStream = 2;
inline constexpr uint64_t kCacheShuffleStream = 3;

}  // namespace brook::input::internal
