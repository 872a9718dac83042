// Pipeline::Impl: the stages behind pipeline.h. The consumer side (Next,
// re-batching, cache filling, autotuning, stats) is in pipeline.cc; the read
// thread and the parse workers in pipeline_stages.cc. Internal to
// trainer/input.
//
// Threads: one read thread; 1..max_parse_threads parse workers (started by
// Create or by the autotuner on the consumer's thread); the consumer (the
// caller of Next). Whoever starts a thread is the Impl; ~Impl cancels and
// joins them all.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "trainer/input/bounded_queue.h"
#include "trainer/input/example_parser.h"
#include "trainer/input/pipeline.h"
#include "trainer/input/pipeline_chunks.h"

namespace brook::input {

class Pipeline::Impl {
 public:
  Impl(const FeatureSpec& spec, ExampleParser parser, const PipelineOptions& options,
       std::vector<sharding::WorkUnit> units);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void Start();
  absl::StatusOr<std::optional<Batch>> Next();
  PipelineStats stats() const;
  void Cancel();
  const std::vector<sharding::WorkUnit>& units() const { return units_; }

 private:
  using RecordId = internal::RecordId;
  using RecordChunk = internal::RecordChunk;
  using ParsedChunk = internal::ParsedChunk;

  // ---- Read thread (pipeline_stages.cc).
  void ReadLoop();
  // Each returns false when the stream must stop (cancelled, or an error
  // was sent downstream).
  bool ReadEpoch(int epoch, bool last_epoch);
  bool ReplayCache(int epoch, bool last_epoch);
  // Numbers `chunk` and queues it. *busy_start: when the read thread's
  // current busy period began; the push's blocked time is not busy.
  bool Emit(std::unique_ptr<RecordChunk> chunk, uint64_t* busy_start);
  void EmitError(absl::Status status);
  std::unique_ptr<RecordChunk> NewChunk(int epoch);

  // ---- Parse workers (pipeline_stages.cc).
  void StartParseWorker();
  void ParseLoop(size_t slot);  // slot: the worker's index, for live wait stats
  std::unique_ptr<ParsedChunk> Parse(RecordChunk* chunk, ParseStats* stats);
  std::unique_ptr<ParsedChunk> FromCache(const RecordChunk& chunk) const;
  absl::Status BadExample(const absl::Status& status, RecordId id) const;

  // ---- Consumer (pipeline.cc).
  bool Releasable() const;
  void Absorb(std::unique_ptr<ParsedChunk> chunk);
  void EmitPending(int epoch);
  void FinishEpoch(int epoch);
  void AddToCache(const ParsedChunk& chunk);
  void Autotune();
  void Stop();  // cancels the queues and wakes every thread

  // ---- Constant after construction.
  const FeatureSpec spec_;
  const ExampleParser parser_;
  const PipelineOptions options_;
  const std::vector<sharding::WorkUnit> units_;
  absl::flat_hash_map<uint32_t, const sharding::WorkUnit*> unit_by_id_;
  const size_t batch_size_;
  const bool tune_parse_threads_;
  const int tune_max_parse_threads_;  // max_parse_threads, at most one per core
  const bool tune_prefetch_;
  const bool collect_cache_;  // cache on and more than one epoch

  // ---- Thread-safe.
  std::atomic<bool> cancelled_{false};       // Stop() ran: every stage winds down
  std::atomic<bool> user_cancelled_{false};  // Cancel() ran: Next() says CANCELLED
  internal::BoundedQueue<std::unique_ptr<RecordChunk>> read_queue_;
  internal::OrderedWindow<std::unique_ptr<ParsedChunk>> window_;
  internal::StageCounters read_;
  internal::StageCounters parse_;
  internal::StageCounters consumer_;
  std::atomic<uint64_t> files_opened_{0};
  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint64_t> corrupt_regions_{0};
  std::atomic<uint64_t> corrupt_bytes_{0};
  std::atomic<uint64_t> examples_parsed_{0};
  std::atomic<uint64_t> bad_examples_{0};
  std::atomic<uint64_t> remainder_dropped_{0};
  std::atomic<uint64_t> rows_returned_{0};
  std::atomic<uint64_t> batches_from_cache_{0};
  std::atomic<uint64_t> cache_bytes_{0};
  std::atomic<int> epochs_completed_{0};
  std::atomic<int> autotune_steps_{0};
  std::atomic<int> parse_threads_{0};
  std::atomic<int> prefetch_{0};

  // ---- Protected by workers_mu_.
  std::mutex workers_mu_;
  std::vector<std::thread> workers_;
  bool stopped_ = false;  // no new workers after Stop

  // ---- Protected by parse_stats_mu_.
  mutable std::mutex parse_stats_mu_;
  ParseStats parse_stats_;

  // ---- Cache: filled by the consumer during epoch 0; read-only (and read
  // by the read thread without the lock) once cache_complete_.
  std::mutex cache_mu_;
  std::condition_variable cache_cv_;
  bool cache_complete_ = false;  // protected by cache_mu_
  std::vector<ParsedChunk> cache_;

  // ---- Read thread only.
  std::thread reader_;
  uint64_t next_seq_ = 0;
  size_t last_chunk_bytes_ = 0;  // largest record batch so far, to reserve the next

  // ---- Consumer only (Next's caller).
  absl::Status sticky_;  // an error or CANCELLED, returned by every later Next
  bool end_ = false;
  uint64_t next_sequence_ = 0;
  ColumnarBatch pending_;  // < batch_size rows
  std::vector<RecordId> pending_ids_;
  std::vector<RecordId> pending_discarded_;
  std::vector<UnitEnd> pending_ends_;
  struct Ready {
    Batch batch;
    bool epoch_last = false;
  };
  std::deque<Ready> ready_;
  // Autotuner: totals at the start of the interval.
  int batches_since_tune_ = 0;
  uint64_t tune_start_ns_ = 0;
  uint64_t tune_consumer_wait_ns_ = 0;
  uint64_t tune_parse_busy_ns_ = 0;
  uint64_t tune_parse_wait_output_ns_ = 0;
};

}  // namespace brook::input
