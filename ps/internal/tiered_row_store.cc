#include "ps/internal/tiered_row_store.h"

#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/memory_accountant.h"
#include "storage/rocks_db.h"

namespace brook::ps::internal {
namespace {

constexpr int kEvictionSamples = 8;
// Past the node-wide limit a push also evicts up to this many rows beyond
// its own, so that a node over its limit (restored rows, races) comes back.
constexpr uint64_t kMaxExtraEvictions = 256;

// Older first: step, then time. Rows never pushed since they were restored
// have step 0 and go first.
bool LessRecentlyUpdated(const RowHeader& a, const RowHeader& b) {
  if (a.last_step != b.last_step) return a.last_step < b.last_step;
  return a.last_time() < b.last_time();
}

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// MultiGet writes values back to back; rows need 8-byte alignment, so a
// value size that is not a multiple of 8 is spread out in place (backwards).
void AlignRows(char* base, size_t n, size_t value_bytes, size_t stride) {
  if (stride == value_bytes) return;
  for (size_t i = n; i-- > 0;) std::memmove(base + i * stride, base + i * value_bytes, value_bytes);
}

}  // namespace

// Rows read from RocksDB for one lookup, 8-byte aligned so they can be
// handed out as RowHeader*. Per thread: lookups of one thread do not overlap.
struct TieredRowStore::ColdScratch {
  std::vector<uint64_t> keys;
  std::vector<uint32_t> index;  // position in the caller's batch
  std::vector<uint64_t> rows;   // value bytes rounded up to 8, per key
  std::unique_ptr<bool[]> found;
  size_t found_size = 0;
  void Prepare(size_t n, size_t words_per_row) {
    rows.resize(n * words_per_row);
    if (found_size < n) {
      found.reset(new bool[n]);
      found_size = n;
    }
  }
};

TieredRowStore::ColdScratch& TieredRowStore::ThreadColdScratch() {
  thread_local ColdScratch scratch;
  return scratch;
}

// Past this many keys of checkpoint bookkeeping per stripe (a PS that is
// never checkpointed), the lists are dropped and the next incremental
// checkpoint is taken as a full one instead.
constexpr size_t kMaxDeltaKeysPerStripe = size_t{1} << 20;

// With a MemoryAccountant the lists are charged there (in steps of this many
// keys), within its bookkeeping share of the node's limit.
constexpr size_t kDeltaChargeKeys = 4096;

struct TieredRowStore::StripeTier {
  bool cold_possible = false;
  bool delta_overflow = false;
  uint64_t rng = 0;
  MemoryAccountant* accountant = nullptr;
  size_t charged_keys = 0;  // keys charged to the accountant for the lists
  std::vector<uint64_t> evicted_dirty;
  std::vector<uint64_t> erased;

  void NoteEvictedDirty(uint64_t key) { Note(&evicted_dirty, key); }
  void NoteErased(uint64_t key) { Note(&erased, key); }
  void Note(std::vector<uint64_t>* list, uint64_t key) {
    if (delta_overflow) return;
    const size_t keys = evicted_dirty.size() + erased.size();
    if (keys >= kMaxDeltaKeysPerStripe || (keys >= charged_keys && !ChargeMore())) {
      delta_overflow = true;
      DropLists();
      return;
    }
    list->push_back(key);
  }
  bool ChargeMore() {
    if (accountant == nullptr) {
      charged_keys = kMaxDeltaKeysPerStripe;  // nothing to charge: the stripe bound only
      return true;
    }
    if (!accountant->TryChargeBookkeeping(kDeltaChargeKeys * sizeof(uint64_t))) return false;
    charged_keys += kDeltaChargeKeys;
    return true;
  }
  // Empties the lists (their memory too) and returns their charge.
  void DropLists() {
    std::vector<uint64_t>().swap(evicted_dirty);
    std::vector<uint64_t>().swap(erased);
    ReleaseCharge();
  }
  void ReleaseCharge() {
    if (accountant != nullptr && charged_keys > 0) {
      accountant->ReleaseBookkeeping(charged_keys * sizeof(uint64_t));
    }
    charged_keys = 0;
  }
};

template <typename Row>
bool TieredRowStore::ReadMisses(const StripeTier& tier, absl::Span<const uint64_t> keys,
                                absl::Span<Row*> rows, ColdScratch* s, bool* ok) const {
  if (!tier.cold_possible) {
    hot_hits_.fetch_add(keys.size(), std::memory_order_relaxed);
    return false;
  }
  s->keys.clear();
  s->index.clear();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (rows[i] == nullptr) {
      s->keys.push_back(keys[i]);
      s->index.push_back(static_cast<uint32_t>(i));
    }
  }
  hot_hits_.fetch_add(keys.size() - s->keys.size(), std::memory_order_relaxed);
  if (s->keys.empty()) return false;
  s->Prepare(s->keys.size(), (value_bytes_ + 7) / 8);
  absl::Status st = options_.db->MultiGet(options_.column_family, s->keys, value_bytes_,
                                          reinterpret_cast<char*>(s->rows.data()), s->found.get());
  if (!st.ok()) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    *ok = false;
    return false;
  }
  return true;
}

class TieredRowStore::TierReader final : public RowStore::Reader {
 public:
  TierReader(const TieredRowStore* store, const StripeTier* tier, const Reader* inner)
      : store_(store), tier_(tier), inner_(inner) {}

  void FindBatch(absl::Span<const uint64_t> keys, absl::Span<const uint64_t> hashes,
                 absl::Span<const RowHeader*> rows) const override {
    inner_->FindBatch(keys, hashes, rows);
    TieredRowStore::ColdScratch& s = ThreadColdScratch();
    if (!store_->ReadMisses(*tier_, keys, rows, &s, &ok_)) return;
    const size_t vb = store_->value_bytes_;
    const size_t words = (vb + 7) / 8;
    char* base = reinterpret_cast<char*>(s.rows.data());
    AlignRows(base, s.keys.size(), vb, words * 8);
    uint64_t hits = 0;
    for (size_t j = 0; j < s.keys.size(); ++j) {
      if (!s.found[j]) continue;
      rows[s.index[j]] = reinterpret_cast<const RowHeader*>(base + j * words * 8);
      ++hits;
    }
    store_->cold_hits_.fetch_add(hits, std::memory_order_relaxed);
    store_->cold_misses_.fetch_add(s.keys.size() - hits, std::memory_order_relaxed);
  }
  void ForEach(absl::FunctionRef<void(const RowHeader&)> fn) const override { inner_->ForEach(fn); }
  bool ok() const override { return ok_; }

 private:
  const TieredRowStore* store_;
  const StripeTier* tier_;
  const Reader* inner_;
  mutable bool ok_ = true;
};

class TieredRowStore::TierWriter final : public RowStore::Writer {
 public:
  TierWriter(TieredRowStore* store, StripeTier* tier, Writer* inner)
      : store_(store), tier_(tier), inner_(inner) {}

  // Deletes of erased rows are batched into one write at the end.
  void Finish() {
    if (deletes_.empty()) return;
    absl::Status st = store_->options_.db->Write(store_->options_.column_family, {}, nullptr,
                                                 store_->value_bytes_, deletes_);
    if (!st.ok()) store_->errors_.fetch_add(1, std::memory_order_relaxed);
  }

  void FindBatch(absl::Span<const uint64_t> keys, absl::Span<const uint64_t> hashes,
                 absl::Span<RowHeader*> rows) override {
    FindBatchInMemory(keys, hashes, rows);
    TieredRowStore::ColdScratch& s = ThreadColdScratch();
    if (!store_->ReadMisses(*tier_, keys, rows, &s, &ok_)) return;
    const size_t vb = store_->value_bytes_;
    char* base = reinterpret_cast<char*>(s.rows.data());
    uint64_t hits = 0;
    for (size_t j = 0; j < s.keys.size(); ++j) {
      if (!s.found[j]) continue;
      const uint32_t i = s.index[j];
      RowHeader* r = inner_->Insert(keys[i], hashes[i]);
      if (r == nullptr) {  // the arena itself is out of memory
        store_->errors_.fetch_add(1, std::memory_order_relaxed);
        ok_ = false;
        return;
      }
      std::memcpy(static_cast<void*>(r), base + j * vb, vb);
      // Equal to the stored copy now; whether it changed since the last
      // checkpoint is tracked by evicted_dirty, not by this row.
      r->time_flags = (r->time_flags & RowHeader::kTimeMask) | RowHeader::kSynced;
      rows[i] = r;
      ++hits;
    }
    store_->cold_hits_.fetch_add(hits, std::memory_order_relaxed);
    store_->cold_misses_.fetch_add(s.keys.size() - hits, std::memory_order_relaxed);
    store_->promotions_.fetch_add(hits, std::memory_order_relaxed);
  }

  // Makes room for the batch (the stripe's row cap, the node's limit), then
  // finds the rows in memory.
  void FindBatchInMemory(absl::Span<const uint64_t> keys, absl::Span<const uint64_t> hashes,
                         absl::Span<RowHeader*> rows) override {
    const uint64_t want = uint64_t{inner_->size()} + keys.size();
    uint64_t out = want > store_->stripe_cap_ ? want - store_->stripe_cap_ : 0;
    if (MemoryAccountant* a = store_->options_.accountant; a != nullptr) {
      const uint64_t c = store_->options_.charged_row_bytes;
      const uint64_t excess = a->Excess(keys.size() * c);
      if (excess > 0) {
        out = std::max(out,
                       std::min<uint64_t>((excess + c - 1) / c, keys.size() + kMaxExtraEvictions));
      }
    }
    if (out > 0) MakeRoom(out, keys);
    inner_->FindBatch(keys, hashes, rows);
  }

  // Past the node-wide limit after a write: moves up to n of the stripe's
  // rows out, the ones just written included (they are done with).
  void EvictForLimit(uint64_t n) { MakeRoom(n, {}); }

  RowHeader* Insert(uint64_t key, uint64_t hash) override { return inner_->Insert(key, hash); }
  // Memory holds at most stripe_cap_ rows of the stripe: no room past that.
  void Reserve(uint32_t more_rows) override {
    const uint64_t held = inner_->size();
    const uint64_t room = store_->stripe_cap_ > held ? store_->stripe_cap_ - held : 0;
    inner_->Reserve(static_cast<uint32_t>(std::min<uint64_t>(more_rows, room)));
  }

  void Erase(uint64_t key, uint64_t hash) override {
    inner_->Erase(key, hash);
    // A stale copy in RocksDB would bring the row back on the next miss.
    if (tier_->cold_possible) deletes_.push_back(key);
    tier_->NoteErased(key);
  }

  void ForEach(absl::FunctionRef<void(RowHeader&)> fn) override { inner_->ForEach(fn); }
  RowHeader* SampleRow(uint64_t random) override { return inner_->SampleRow(random); }
  uint32_t size() const override { return inner_->size(); }
  bool ok() const override { return ok_; }

 private:
  // Evicts up to n rows, none of them in `keep`.
  void MakeRoom(uint64_t n, absl::Span<const uint64_t> keep) {
    std::vector<uint64_t>& sorted_keep = keep_;
    sorted_keep.assign(keep.begin(), keep.end());
    std::sort(sorted_keep.begin(), sorted_keep.end());
    // Victims chosen so far are kept out of later samples through a set: a
    // linear search of them made a large eviction quadratic.
    victim_set_.clear();
    auto kept = [&](uint64_t key) {
      return std::binary_search(sorted_keep.begin(), sorted_keep.end(), key) ||
             victim_set_.contains(key);
    };
    victims_.clear();
    writes_.clear();
    write_keys_.clear();
    size_t dirty_noted = 0;
    const size_t vb = store_->value_bytes_;
    // Each round samples a few rows and takes the oldest; a stripe made
    // mostly of the batch's own keys gives up rather than spin.
    for (uint64_t round = 0; victims_.size() < n && round < 4 * n + 16; ++round) {
      RowHeader* best = nullptr;
      for (int k = 0; k < kEvictionSamples; ++k) {
        RowHeader* r = inner_->SampleRow(SplitMix(&tier_->rng));
        if (r == nullptr) return;
        if (kept(r->key)) continue;
        if (best == nullptr || LessRecentlyUpdated(*r, *best)) best = r;
      }
      if (best == nullptr) continue;
      victims_.push_back(best->key);
      victim_set_.insert(best->key);
      if (!best->synced()) {
        write_keys_.push_back(best->key);
        const size_t at = writes_.size();
        writes_.resize(at + vb);
        std::memcpy(writes_.data() + at, best, vb);
        // Stored with kSynced set: a row read back equals its stored copy.
        RowHeader stored;
        std::memcpy(&stored, writes_.data() + at, sizeof(stored));
        stored.time_flags |= RowHeader::kSynced;
        std::memcpy(writes_.data() + at, &stored, sizeof(stored));
      }
      if (best->dirty()) {
        tier_->NoteEvictedDirty(best->key);
        ++dirty_noted;
      }
    }
    if (victims_.empty()) return;
    if (!write_keys_.empty()) {
      absl::Status st = store_->EnsureFamily();
      if (st.ok()) {
        st = store_->options_.db->Write(store_->options_.column_family, write_keys_, writes_.data(),
                                        vb, {});
      }
      if (!st.ok()) {
        // Nothing leaves memory: the stripe runs over budget instead.
        store_->errors_.fetch_add(1, std::memory_order_relaxed);
        tier_->evicted_dirty.resize(tier_->evicted_dirty.size() -
                                    std::min(dirty_noted, tier_->evicted_dirty.size()));
        return;
      }
    }
    tier_->cold_possible = true;
    for (uint64_t key : victims_) inner_->Erase(key, HashKey(key));
    store_->evictions_.fetch_add(victims_.size(), std::memory_order_relaxed);
    store_->evict_writes_.fetch_add(write_keys_.size(), std::memory_order_relaxed);
  }

  TieredRowStore* store_;
  StripeTier* tier_;
  Writer* inner_;
  bool ok_ = true;
  std::vector<uint64_t> deletes_;
  std::vector<uint64_t> keep_, victims_, write_keys_;
  absl::flat_hash_set<uint64_t> victim_set_;
  std::vector<char> writes_;
};

TieredRowStore::TieredRowStore(const TieredRowStoreOptions& options)
    : options_(options),
      value_bytes_(sizeof(RowHeader) + static_cast<size_t>(options.mem.row_floats) * sizeof(float)),
      stripe_cap_(static_cast<uint32_t>(std::clamp<uint64_t>(
          options.max_hot_rows >> options.mem.stripe_bits, 1, MemRowStore::kMaxRowsPerStripe))),
      mem_(options.mem),
      tiers_(new StripeTier[size_t{1} << options.mem.stripe_bits]),
      family_ready_(options.cold_rows_exist) {
  for (int s = 0; s < mem_.num_stripes(); ++s) {
    tiers_[s].cold_possible = options.cold_rows_exist;
    tiers_[s].rng = options.seed ^ (0x5bd1e995ULL * static_cast<uint64_t>(s + 1));
    tiers_[s].accountant = options.accountant;
  }
}

absl::Status TieredRowStore::EnsureFamily() {
  if (family_ready_.load(std::memory_order_acquire)) return absl::OkStatus();
  MutexLock lock(&family_mu_);
  if (family_ready_.load(std::memory_order_relaxed)) return absl::OkStatus();
  if (retired_) {
    return absl::FailedPreconditionError(absl::StrCat("RocksDB family ", options_.column_family,
                                                      ": its table was dropped; not creating it"));
  }
  RETURN_IF_ERROR(options_.db->CreateColumnFamily(options_.column_family));
  family_ready_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

void TieredRowStore::Retire() {
  MutexLock lock(&family_mu_);
  retired_ = true;
}

TieredRowStore::~TieredRowStore() {
  for (int s = 0; s < mem_.num_stripes(); ++s) tiers_[s].ReleaseCharge();
  if (options_.accountant != nullptr) {
    options_.accountant->Release(mem_.Stats().rows * options_.charged_row_bytes);
  }
}

void TieredRowStore::Read(int stripe, absl::FunctionRef<void(const Reader&)> fn) const {
  mem_.Read(stripe, [&](const Reader& inner) {
    const TierReader reader(this, &tiers_[stripe], &inner);
    fn(reader);
  });
}

void TieredRowStore::Write(int stripe, absl::FunctionRef<void(Writer&)> fn) {
  mem_.Write(stripe, [&](Writer& inner) {
    const uint32_t before = inner.size();
    TierWriter writer(this, &tiers_[stripe], &inner);
    fn(writer);
    if (MemoryAccountant* a = options_.accountant; a != nullptr) {
      // Rows in memory are charged as they come and go, under the stripe
      // lock; a node past its limit moves this stripe's rows out at once,
      // so that it is over only while writes are in flight.
      const uint64_t c = options_.charged_row_bytes;
      const uint32_t written = inner.size();
      if (written > before) a->Charge(uint64_t{written - before} * c);
      if (written < before) a->Release(uint64_t{before - written} * c);
      if (const uint64_t excess = a->Excess(0); excess > 0 && written > 0) {
        writer.EvictForLimit(std::min<uint64_t>((excess + c - 1) / c, written));
        a->Release(uint64_t{written - inner.size()} * c);
      }
    }
    writer.Finish();
  });
}

RowStoreStats TieredRowStore::Stats() const { return mem_.Stats(); }

TierStats TieredRowStore::tier_stats() const {
  TierStats t;
  t.hot_hits = hot_hits_.load(std::memory_order_relaxed);
  t.cold_hits = cold_hits_.load(std::memory_order_relaxed);
  t.cold_misses = cold_misses_.load(std::memory_order_relaxed);
  t.evictions = evictions_.load(std::memory_order_relaxed);
  t.evict_writes = evict_writes_.load(std::memory_order_relaxed);
  t.promotions = promotions_.load(std::memory_order_relaxed);
  t.errors = errors_.load(std::memory_order_relaxed);
  t.has_family = has_family();
  t.cold_rows = t.has_family ? options_.db->ApproximateKeys(options_.column_family) : 0;
  return t;
}

bool TieredRowStore::TakeCheckpointDelta(int stripe, std::vector<uint64_t>* evicted_dirty,
                                         std::vector<uint64_t>* erased) {
  StripeTier& t = tiers_[stripe];
  const bool complete = !t.delta_overflow;
  t.delta_overflow = false;
  evicted_dirty->insert(evicted_dirty->end(), t.evicted_dirty.begin(), t.evicted_dirty.end());
  erased->insert(erased->end(), t.erased.begin(), t.erased.end());
  t.DropLists();
  return complete;
}

absl::Status TieredRowStore::ForEachCold(
    absl::FunctionRef<absl::Status(const RowHeader&)> fn) const {
  if (!has_family()) return absl::OkStatus();         // never spilled: every row is in memory
  std::vector<uint64_t> row((value_bytes_ + 7) / 8);  // aligned copy
  return options_.db->ForEach(
      options_.column_family, [&](uint64_t key, std::string_view value) -> absl::Status {
        if (value.size() != value_bytes_) {
          return absl::DataLossError(absl::StrCat("RocksDB family ", options_.column_family,
                                                  " key ", key, " holds ", value.size(),
                                                  " bytes, expected ", value_bytes_));
        }
        std::memcpy(row.data(), value.data(), value_bytes_);
        return fn(*reinterpret_cast<const RowHeader*>(row.data()));
      });
}

absl::Status TieredRowStore::ReadCold(absl::Span<const uint64_t> keys, char* rows,
                                      bool* found) const {
  if (!has_family()) {
    std::fill(found, found + keys.size(), false);
    return absl::OkStatus();
  }
  return options_.db->MultiGet(options_.column_family, keys, value_bytes_, rows, found);
}

}  // namespace brook::ps::internal
