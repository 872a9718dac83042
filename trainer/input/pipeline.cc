// The consumer side of the input pipeline: Create, Next (ordered output,
// exact re-batching, provenance, epoch ends, cache filling), the autotuner,
// stats and shutdown. The producer stages are in pipeline_stages.cc.
#include "trainer/input/pipeline.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/usable_cpus.h"
#include "trainer/input/autotune.h"
#include "trainer/input/batch_rows.h"
#include "trainer/input/pipeline_stages.h"
#include "trainer/input/sources.h"

namespace brook::input {

using internal::NowNanos;

absl::Status PipelineOptions::Validate() const {
  auto bad = [](auto... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (cycle_length < 1) return bad("cycle_length must be >= 1, got ", cycle_length);
  if (block_length < 1) return bad("block_length must be >= 1, got ", block_length);
  if (max_parse_threads < 1) return bad("max_parse_threads must be >= 1, got ", max_parse_threads);
  if (parse_threads < 0 || parse_threads > max_parse_threads) {
    return bad("parse_threads must be in [0, max_parse_threads=", max_parse_threads, "], got ",
               parse_threads);
  }
  if (read_queue_depth < 0) return bad("read_queue_depth must be >= 0, got ", read_queue_depth);
  if (batch_size < 1) return bad("batch_size must be >= 1, got ", batch_size);
  if (max_prefetch < 1) return bad("max_prefetch must be >= 1, got ", max_prefetch);
  if (prefetch < 0 || prefetch > max_prefetch) {
    return bad("prefetch must be in [0, max_prefetch=", max_prefetch, "], got ", prefetch);
  }
  if (epochs < 0) return bad("epochs must be >= 0 (0 = forever), got ", epochs);
  return absl::OkStatus();
}

// ---- Pipeline.

Pipeline::Pipeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pipeline::~Pipeline() = default;

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(const FeatureSpec& spec,
                                                           const PipelineOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(ExampleParser parser, ExampleParser::Create(spec));
  ASSIGN_OR_RETURN(std::vector<sharding::WorkUnit> units,
                   internal::ResolveUnits(options.files, options.glob, options.units));
  auto impl = std::make_unique<Impl>(spec, std::move(parser), options, std::move(units));
  impl->Start();
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(impl)));
}

absl::StatusOr<std::optional<Batch>> Pipeline::Next() { return impl_->Next(); }
PipelineStats Pipeline::stats() const { return impl_->stats(); }
void Pipeline::Cancel() { impl_->Cancel(); }
const std::vector<sharding::WorkUnit>& Pipeline::units() const { return impl_->units(); }

// ---- Impl: lifetime.

Pipeline::Impl::Impl(const FeatureSpec& spec, ExampleParser parser, const PipelineOptions& options,
                     std::vector<sharding::WorkUnit> units)
    : spec_(spec),
      parser_(std::move(parser)),
      options_(options),
      units_(std::move(units)),
      batch_size_(static_cast<size_t>(options.batch_size)),
      tune_parse_threads_(options.parse_threads == 0),
      tune_max_parse_threads_(std::clamp(UsableCpus(), 1, options.max_parse_threads)),
      tune_prefetch_(options.prefetch == 0),
      collect_cache_(options.cache && options.epochs != 1),
      read_queue_(static_cast<size_t>(options.read_queue_depth > 0 ? options.read_queue_depth
                                                                   : options.max_parse_threads)),
      window_(static_cast<size_t>(options.prefetch > 0 ? options.prefetch
                                                       : std::min(2, options.max_prefetch))),
      read_(1),
      parse_(static_cast<size_t>(options.max_parse_threads)),
      consumer_(1) {
  for (const sharding::WorkUnit& u : units_) unit_by_id_[u.id] = &u;
  prefetch_.store(options.prefetch > 0 ? options.prefetch : std::min(2, options.max_prefetch));
  parser_.InitStats(&parse_stats_);
  parser_.InitBatch(&pending_);
}

void Pipeline::Impl::Start() {
  const int workers = tune_parse_threads_ ? 1 : options_.parse_threads;
  for (int i = 0; i < workers; ++i) StartParseWorker();
  reader_ = std::thread([this] { ReadLoop(); });
  tune_start_ns_ = NowNanos();
}

Pipeline::Impl::~Impl() {
  Stop();
  if (reader_.joinable()) reader_.join();
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(workers_mu_);
    workers.swap(workers_);  // final: no worker starts after Stop
  }
  for (std::thread& t : workers) t.join();
}

void Pipeline::Impl::Stop() {
  cancelled_.store(true);
  read_queue_.Cancel();
  window_.Cancel();
  {
    std::lock_guard<std::mutex> lock(cache_mu_);  // so the read thread cannot miss the wake-up
    cache_cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(workers_mu_);
  stopped_ = true;
}

void Pipeline::Impl::Cancel() {
  user_cancelled_.store(true);
  Stop();
}

// ---- Impl: the consumer.

// A batch leaves ready_ only once the chunk after it was absorbed (or it is
// its epoch's last): the epoch's trailing provenance (dropped remainder,
// unit ends found at end of file) can then ride on it instead of on a batch
// of 0 rows. It costs one chunk of latency, not throughput.
bool Pipeline::Impl::Releasable() const {
  return ready_.size() >= 2 || (!ready_.empty() && ready_.front().epoch_last);
}

absl::StatusOr<std::optional<Batch>> Pipeline::Impl::Next() {
  if (user_cancelled_.load() && !absl::IsCancelled(sticky_)) {
    sticky_ = absl::CancelledError("input pipeline cancelled");  // wins over anything pending
    ready_.clear();
  }
  const uint64_t start = NowNanos();
  uint64_t waited = 0;
  while (sticky_.ok() && !end_ && !Releasable()) {
    std::optional<std::unique_ptr<ParsedChunk>> chunk = consumer_.Waiting(
        0, internal::StageCounters::kInput, &waited, [&] { return window_.Take(); });
    if (!chunk.has_value()) {
      sticky_ = absl::CancelledError("input pipeline cancelled");
      ready_.clear();
      break;
    }
    if (!(*chunk)->error.ok()) {
      // Complete batches before the error still go out, then the error.
      sticky_ = (*chunk)->error;
      Stop();  // nothing after an error is delivered: stop reading and parsing now
      break;
    }
    if (collect_cache_ && (*chunk)->epoch == 0) AddToCache(**chunk);
    Absorb(*std::move(chunk));
  }
  consumer_.AddBusy(NowNanos() - start - waited);
  if (ready_.empty()) {
    if (!sticky_.ok()) return sticky_;
    return std::optional<Batch>();  // end of the last epoch
  }
  Ready ready = std::move(ready_.front());
  ready_.pop_front();
  ready.batch.provenance.sequence = next_sequence_++;
  consumer_.AddItems(1);
  rows_returned_.fetch_add(ready.batch.data.num_rows, std::memory_order_relaxed);
  if (ready.epoch_last) epochs_completed_.fetch_add(1, std::memory_order_relaxed);
  Autotune();
  return std::optional<Batch>(std::move(ready.batch));
}

// Takes a parsed chunk (in stream order) and cuts exact batch_size batches:
// a full chunk with nothing pending passes through without a copy; otherwise
// (after skipped examples, or the cache's chunks) rows are copied over.
void Pipeline::Impl::Absorb(std::unique_ptr<ParsedChunk> chunk) {
  const int epoch = chunk->epoch;
  pending_discarded_.insert(pending_discarded_.end(), chunk->discarded.begin(),
                            chunk->discarded.end());
  pending_ends_.insert(pending_ends_.end(), chunk->unit_ends.begin(), chunk->unit_ends.end());
  const size_t rows = chunk->data.num_rows;
  if (pending_.num_rows == 0 && rows == batch_size_) {
    std::swap(pending_, chunk->data);
    pending_ids_.swap(chunk->row_ids);
    EmitPending(epoch);
  } else {
    size_t taken = 0;
    while (taken < rows) {
      const size_t n = std::min(batch_size_ - pending_.num_rows, rows - taken);
      internal::AppendRows(spec_, chunk->data, taken, taken + n, &pending_);
      pending_ids_.insert(pending_ids_.end(), chunk->row_ids.begin() + taken,
                          chunk->row_ids.begin() + taken + n);
      taken += n;
      if (pending_.num_rows == batch_size_) EmitPending(epoch);
    }
  }
  if (chunk->last_in_epoch) FinishEpoch(epoch);
  if (chunk->end_of_stream) end_ = true;
}

void Pipeline::Impl::EmitPending(int epoch) {
  Ready ready;
  ready.batch.provenance.epoch = epoch;
  ready.batch.provenance.discarded = pending_discarded_.size();
  pending_ids_.insert(pending_ids_.end(), pending_discarded_.begin(), pending_discarded_.end());
  internal::AppendRanges(&pending_ids_, &ready.batch.provenance.ranges);
  ready.batch.provenance.unit_ends = std::move(pending_ends_);
  ready.batch.data = std::move(pending_);
  pending_ = ColumnarBatch();
  parser_.InitBatch(&pending_);
  pending_ids_.clear();
  pending_discarded_.clear();
  pending_ends_.clear();
  ready_.push_back(std::move(ready));
}

// The epoch's last chunk was absorbed: the remainder goes out (or is
// dropped), and records discarded since the last batch ride on this epoch's
// last batch still waiting in ready_, or on a batch of 0 rows.
void Pipeline::Impl::FinishEpoch(int epoch) {
  if (pending_.num_rows > 0) {
    if (options_.drop_remainder) {
      remainder_dropped_.fetch_add(pending_.num_rows, std::memory_order_relaxed);
      pending_discarded_.insert(pending_discarded_.end(), pending_ids_.begin(), pending_ids_.end());
      pending_ids_.clear();
      pending_.Clear();
    } else {
      EmitPending(epoch);
    }
  }
  if (!pending_discarded_.empty() || !pending_ends_.empty()) {
    if (!ready_.empty() && ready_.back().batch.epoch() == epoch) {
      BatchProvenance& p = ready_.back().batch.provenance;
      p.discarded += pending_discarded_.size();
      internal::AppendRanges(&pending_discarded_, &p.ranges);
      p.unit_ends.insert(p.unit_ends.end(), pending_ends_.begin(), pending_ends_.end());
      pending_discarded_.clear();
      pending_ends_.clear();
    } else {
      EmitPending(epoch);  // 0 rows: provenance only
    }
  }
  if (!ready_.empty() && ready_.back().batch.epoch() == epoch) {
    ready_.back().epoch_last = true;
  } else {
    epochs_completed_.fetch_add(1, std::memory_order_relaxed);  // an epoch without records
  }
}

void Pipeline::Impl::AddToCache(const ParsedChunk& chunk) {
  cache_.push_back(chunk);
  cache_bytes_.fetch_add(internal::BatchBytes(chunk.data) +
                             (chunk.row_ids.size() + chunk.discarded.size()) * sizeof(RecordId),
                         std::memory_order_relaxed);
  if (chunk.last_in_epoch) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    cache_complete_ = true;
    cache_cv_.notify_all();
  }
}

void Pipeline::Impl::Autotune() {
  if (!tune_parse_threads_ && !tune_prefetch_) return;
  if (++batches_since_tune_ < internal::kAutotuneEveryBatches) return;
  const uint64_t now = NowNanos();
  const uint64_t consumer_wait = consumer_.wait_input_ns.load(std::memory_order_relaxed);
  const uint64_t parse_busy = parse_.busy_ns.load(std::memory_order_relaxed);
  const uint64_t parse_blocked = parse_.wait_output_ns.load(std::memory_order_relaxed);
  const internal::AutotuneSignals signals{
      .interval_ns = now - tune_start_ns_,
      .consumer_wait_ns = consumer_wait - tune_consumer_wait_ns_,
      .parse_busy_ns = parse_busy - tune_parse_busy_ns_,
      .parse_wait_output_ns = parse_blocked - tune_parse_wait_output_ns_,
      .parse_threads = parse_threads_.load(std::memory_order_relaxed),
      .tune_parse_threads = tune_parse_threads_,
      .max_parse_threads = tune_max_parse_threads_,
      .tune_prefetch = tune_prefetch_,
      .prefetch = prefetch_.load(std::memory_order_relaxed),
      .max_prefetch = options_.max_prefetch,
  };
  switch (internal::DecideAutotune(signals)) {
    case internal::AutotuneAction::kAddParseThread:
      StartParseWorker();
      autotune_steps_.fetch_add(1, std::memory_order_relaxed);
      break;
    case internal::AutotuneAction::kGrowPrefetch:
      window_.SetCapacity(static_cast<size_t>(prefetch_.fetch_add(1) + 1));
      autotune_steps_.fetch_add(1, std::memory_order_relaxed);
      break;
    case internal::AutotuneAction::kNone:
      break;
  }
  batches_since_tune_ = 0;
  tune_start_ns_ = now;
  tune_consumer_wait_ns_ = consumer_wait;
  tune_parse_busy_ns_ = parse_busy;
  tune_parse_wait_output_ns_ = parse_blocked;
}

PipelineStats Pipeline::Impl::stats() const {
  PipelineStats s;
  auto get = [](const auto& a) { return a.load(std::memory_order_relaxed); };
  s.parse_threads = get(parse_threads_);
  s.prefetch = get(prefetch_);
  s.read = read_.Snapshot(1);
  s.parse = parse_.Snapshot(s.parse_threads);
  s.consumer = consumer_.Snapshot(1);
  s.files_opened = get(files_opened_);
  s.bytes_read = get(bytes_read_);
  s.corrupt_regions = get(corrupt_regions_);
  s.corrupt_bytes = get(corrupt_bytes_);
  s.examples_parsed = get(examples_parsed_);
  s.bad_examples = get(bad_examples_);
  s.remainder_dropped = get(remainder_dropped_);
  s.rows_returned = get(rows_returned_);
  s.batches_from_cache = get(batches_from_cache_);
  s.cache_bytes = get(cache_bytes_);
  s.epochs_completed = get(epochs_completed_);
  s.autotune_steps = get(autotune_steps_);
  std::lock_guard<std::mutex> lock(parse_stats_mu_);
  s.parse_policy = parse_stats_;
  return s;
}

}  // namespace brook::input
