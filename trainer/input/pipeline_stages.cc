// The producer side of the input pipeline: the read thread (interleave,
// shuffle buffer, record batches; cache replay in later epochs) and the parse
// workers.
#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "trainer/input/batch_rows.h"
#include "trainer/input/pipeline_stages.h"
#include "trainer/input/sources.h"

namespace brook::input {

using internal::NowNanos;

namespace internal {

Rng::Rng(uint64_t seed, uint64_t epoch, uint64_t stream)
    : state_(Mix64(Mix64(seed, epoch), stream)) {}

uint64_t Rng::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace internal

namespace {

// Fisher-Yates with our Rng.
template <typename T>
void Permute(std::vector<T>* v, internal::Rng* rng) {
  for (size_t i = v->size(); i > 1; --i) std::swap((*v)[i - 1], (*v)[rng->Uniform(i)]);
}

}  // namespace

std::unique_ptr<internal::RecordChunk> Pipeline::Impl::NewChunk(int epoch) {
  auto chunk = std::make_unique<RecordChunk>();
  chunk->epoch = epoch;
  chunk->bytes.reserve(last_chunk_bytes_);  // records are similar in size: no regrowth
  chunk->ends.reserve(batch_size_);
  chunk->ids.reserve(batch_size_);
  return chunk;
}

bool Pipeline::Impl::Emit(std::unique_ptr<RecordChunk> chunk, uint64_t* busy_start) {
  chunk->seq = next_seq_++;
  if (!chunk->from_cache) last_chunk_bytes_ = std::max(last_chunk_bytes_, chunk->bytes.size());
  read_.AddBusy(NowNanos() - *busy_start);
  const bool ok = read_.Waiting(0, internal::StageCounters::kOutput, nullptr,
                                [&] { return read_queue_.Push(std::move(chunk)); });
  *busy_start = NowNanos();
  return ok && !cancelled_.load(std::memory_order_relaxed);
}

void Pipeline::Impl::EmitError(absl::Status status) {
  auto chunk = std::make_unique<RecordChunk>();
  chunk->error = std::move(status);
  uint64_t busy_start = NowNanos();
  Emit(std::move(chunk), &busy_start);
}

void Pipeline::Impl::ReadLoop() {
  for (int epoch = 0; options_.epochs == 0 || epoch < options_.epochs; ++epoch) {
    const bool last = options_.epochs != 0 && epoch == options_.epochs - 1;
    const bool ok = epoch > 0 && collect_cache_ ? ReplayCache(epoch, last) : ReadEpoch(epoch, last);
    if (!ok) break;
  }
  // Workers drain what is queued, then exit.
  read_queue_.Close();
}

bool Pipeline::Impl::ReadEpoch(int epoch, bool last_epoch) {
  uint64_t busy_start = NowNanos();
  std::vector<sharding::WorkUnit> order = units_;
  if (options_.shuffle_buffer > 0 && options_.shuffle_units) {
    internal::Rng rng(options_.seed, static_cast<uint64_t>(epoch), internal::kUnitOrderStream);
    Permute(&order, &rng);
  }
  internal::InterleavedReader reader(std::move(order),
                                     {.cycle_length = options_.cycle_length,
                                      .block_length = options_.block_length,
                                      .compression = options_.compression,
                                      .skip_corrupt = options_.skip_corrupt_records,
                                      .cancelled = &cancelled_});
  const internal::ReaderCounters base{.files_opened = files_opened_.load(),
                                      .bytes = bytes_read_.load(),
                                      .corrupt_regions = corrupt_regions_.load(),
                                      .corrupt_bytes = corrupt_bytes_.load()};
  uint64_t records_published = 0;
  auto publish = [&] {
    const internal::ReaderCounters c = reader.counters();
    files_opened_.store(base.files_opened + c.files_opened, std::memory_order_relaxed);
    bytes_read_.store(base.bytes + c.bytes, std::memory_order_relaxed);
    corrupt_regions_.store(base.corrupt_regions + c.corrupt_regions, std::memory_order_relaxed);
    corrupt_bytes_.store(base.corrupt_bytes + c.corrupt_bytes, std::memory_order_relaxed);
    read_.AddItems(c.records - records_published);
    records_published = c.records;
  };

  // The shuffle buffer (tf.data's algorithm): fill it to shuffle_buffer
  // records, then each new record replaces a uniformly chosen one, which goes
  // out. Slots keep their string capacity, so once warm nothing allocates.
  struct Slot {
    std::string bytes;
    RecordId id;
  };
  std::vector<Slot> buffer;
  size_t held = 0;
  const size_t shuffle = options_.shuffle_buffer;
  internal::Rng rng(options_.seed, static_cast<uint64_t>(epoch), internal::kRecordShuffleStream);

  std::unique_ptr<RecordChunk> chunk = NewChunk(epoch);
  auto add = [&](std::string_view record, RecordId id) {
    chunk->Add(record, id);
    if (chunk->size() < batch_size_) return true;
    reader.TakeFinished(&chunk->unit_ends);
    publish();
    const bool ok = Emit(std::move(chunk), &busy_start);
    chunk = NewChunk(epoch);
    return ok;
  };

  std::string_view record;
  RecordId id;
  while (true) {
    if (cancelled_.load(std::memory_order_relaxed)) return false;
    absl::StatusOr<bool> more = reader.Next(&record, &id);
    if (!more.ok()) {
      publish();
      EmitError(more.status());
      return false;
    }
    if (!*more) break;
    if (shuffle == 0) {
      if (!add(record, id)) return false;
    } else if (held < shuffle) {
      if (buffer.size() == held) buffer.emplace_back();
      buffer[held].bytes.assign(record);
      buffer[held].id = id;
      ++held;
    } else {
      Slot& out = buffer[rng.Uniform(held)];
      if (!add(out.bytes, out.id)) return false;
      out.bytes.assign(record);
      out.id = id;
    }
  }
  // End of the epoch's records: drain the buffer in random order.
  while (held > 0) {
    const size_t j = rng.Uniform(held);
    if (!add(buffer[j].bytes, buffer[j].id)) return false;
    std::swap(buffer[j], buffer[held - 1]);
    --held;
  }
  reader.TakeFinished(&chunk->unit_ends);
  publish();
  chunk->last_in_epoch = true;
  chunk->end_of_stream = last_epoch;
  return Emit(std::move(chunk), &busy_start);
}

// Later epochs with the cache: the read thread only plans which cached rows
// go into which chunk; parse workers copy them out in parallel.
bool Pipeline::Impl::ReplayCache(int epoch, bool last_epoch) {
  const bool ready = read_.Waiting(0, internal::StageCounters::kOutput, nullptr, [&] {
    std::unique_lock<std::mutex> lock(cache_mu_);
    cache_cv_.wait(lock, [&] { return cache_complete_ || cancelled_.load(); });
    return !cancelled_.load();
  });
  if (!ready) return false;
  // cache_ is complete and immutable from here on.
  uint64_t busy_start = NowNanos();
  auto emit = [&](std::unique_ptr<RecordChunk> chunk, bool last) {
    chunk->epoch = epoch;
    chunk->from_cache = true;
    chunk->last_in_epoch = last;
    chunk->end_of_stream = last && last_epoch;
    batches_from_cache_.fetch_add(1, std::memory_order_relaxed);
    return Emit(std::move(chunk), &busy_start);
  };

  if (options_.shuffle_buffer == 0) {  // the same chunks in the same order
    for (size_t i = 0; i < cache_.size(); ++i) {
      auto chunk = std::make_unique<RecordChunk>();
      chunk->cache_chunk = static_cast<int64_t>(i);
      if (!emit(std::move(chunk), i + 1 == cache_.size())) return false;
    }
    return true;
  }
  // Shuffled: a uniform permutation of every cached row, cut into
  // batch_size chunks. Discarded records and unit ends ride on the first.
  std::vector<std::pair<uint32_t, uint32_t>> rows;  // (chunk, row)
  for (size_t c = 0; c < cache_.size(); ++c) {
    for (size_t r = 0; r < cache_[c].data.num_rows; ++r) {
      rows.emplace_back(static_cast<uint32_t>(c), static_cast<uint32_t>(r));
    }
  }
  internal::Rng rng(options_.seed, static_cast<uint64_t>(epoch), internal::kCacheShuffleStream);
  Permute(&rows, &rng);
  size_t next = 0;
  do {
    if (cancelled_.load(std::memory_order_relaxed)) return false;
    const size_t n = std::min(batch_size_, rows.size() - next);
    auto chunk = std::make_unique<RecordChunk>();
    chunk->cache_rows.assign(rows.begin() + static_cast<ptrdiff_t>(next),
                             rows.begin() + static_cast<ptrdiff_t>(next + n));
    chunk->cache_side_info = next == 0;
    next += n;
    if (!emit(std::move(chunk), next == rows.size())) return false;
  } while (next < rows.size());
  return true;
}

std::unique_ptr<internal::ParsedChunk> Pipeline::Impl::FromCache(const RecordChunk& chunk) const {
  if (chunk.cache_chunk >= 0) {
    return std::make_unique<ParsedChunk>(cache_[static_cast<size_t>(chunk.cache_chunk)]);
  }
  auto out = std::make_unique<ParsedChunk>();
  parser_.InitBatch(&out->data);
  out->row_ids.reserve(chunk.cache_rows.size());
  for (const auto& [c, r] : chunk.cache_rows) {
    internal::AppendRows(spec_, cache_[c].data, r, r + 1, &out->data);
    out->row_ids.push_back(cache_[c].row_ids[r]);
  }
  if (chunk.cache_side_info) {
    for (const ParsedChunk& c : cache_) {
      out->discarded.insert(out->discarded.end(), c.discarded.begin(), c.discarded.end());
      out->unit_ends.insert(out->unit_ends.end(), c.unit_ends.begin(), c.unit_ends.end());
    }
  }
  return out;
}

// ---- Parse workers.

void Pipeline::Impl::StartParseWorker() {
  std::lock_guard<std::mutex> lock(workers_mu_);
  if (stopped_ || workers_.size() >= static_cast<size_t>(options_.max_parse_threads)) return;
  const size_t slot = workers_.size();
  workers_.emplace_back([this, slot] { ParseLoop(slot); });
  parse_threads_.fetch_add(1, std::memory_order_relaxed);
}

absl::Status Pipeline::Impl::BadExample(const absl::Status& status, RecordId id) const {
  auto it = unit_by_id_.find(id.unit_id);
  const std::string& path = it == unit_by_id_.end() ? std::string() : it->second->path;
  return absl::Status(status.code(),
                      absl::StrCat(path, ": bad tf.train.Example at record index ", id.index,
                                   " (work unit ", id.unit_id, "): ", status.message()));
}

std::unique_ptr<internal::ParsedChunk> Pipeline::Impl::Parse(RecordChunk* chunk,
                                                             ParseStats* stats) {
  auto out = std::make_unique<ParsedChunk>();
  parser_.InitBatch(&out->data);
  out->row_ids.reserve(chunk->size());
  uint64_t bad = 0;
  for (size_t i = 0; i < chunk->size(); ++i) {
    absl::Status s = parser_.Append(chunk->record(i), &out->data, stats);
    if (s.ok()) {
      out->row_ids.push_back(chunk->ids[i]);
    } else if (options_.skip_bad_examples) {
      out->discarded.push_back(chunk->ids[i]);
      ++bad;
    } else {
      out->error = BadExample(s, chunk->ids[i]);
      break;
    }
  }
  examples_parsed_.fetch_add(out->data.num_rows, std::memory_order_relaxed);
  if (bad > 0) bad_examples_.fetch_add(bad, std::memory_order_relaxed);
  return out;
}

void Pipeline::Impl::ParseLoop(size_t slot) {
  using internal::StageCounters;
  ParseStats local;
  parser_.InitStats(&local);
  while (true) {
    std::optional<std::unique_ptr<RecordChunk>> item =
        parse_.Waiting(slot, StageCounters::kInput, nullptr, [&] { return read_queue_.Pop(); });
    if (!item.has_value()) return;  // closed and drained, or cancelled
    const uint64_t start = NowNanos();
    RecordChunk& chunk = **item;
    std::unique_ptr<ParsedChunk> out;
    if (chunk.from_cache) {
      out = FromCache(chunk);
    } else if (!chunk.error.ok()) {
      out = std::make_unique<ParsedChunk>();
      out->error = std::move(chunk.error);
    } else {
      if (options_.TEST_before_parse) options_.TEST_before_parse();
      out = Parse(&chunk, &local);
      parse_.AddItems(1);
      std::lock_guard<std::mutex> lock(parse_stats_mu_);
      parse_stats_.examples += local.examples;
      parse_stats_.rejected += local.rejected;
      parse_stats_.unknown_features += local.unknown_features;
      for (size_t f = 0; f < local.missing.size(); ++f) {
        parse_stats_.missing[f] += local.missing[f];
        parse_stats_.mismatched[f] += local.mismatched[f];
      }
      local.examples = local.rejected = local.unknown_features = 0;
      std::fill(local.missing.begin(), local.missing.end(), 0);
      std::fill(local.mismatched.begin(), local.mismatched.end(), 0);
    }
    out->epoch = chunk.epoch;
    out->last_in_epoch = chunk.last_in_epoch;
    out->end_of_stream = chunk.end_of_stream;
    if (out->unit_ends.empty()) out->unit_ends = std::move(chunk.unit_ends);
    parse_.AddBusy(NowNanos() - start);
    const bool ok = parse_.Waiting(slot, StageCounters::kOutput, nullptr,
                                   [&] { return window_.Put(chunk.seq, std::move(out)); });
    if (!ok) return;
  }
}

}  // namespace brook::input
