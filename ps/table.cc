#include "ps/table.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/part_runner.h"
#include "common/status_macros.h"
#include "ps/internal/key_batch.h"
#include "ps/internal/mem_row_store.h"
#include "ps/internal/tiered_row_store.h"
#include "ps/memory_accountant.h"

namespace brook::ps {
namespace internal {

// Admission counts of keys seen but not yet admitted, for one stripe.
// ~17 bytes per key at absl's 7/8 load (8 B key, 2 B count, padding, 1 B
// control).
struct PendingStripe {
  absl::flat_hash_map<uint64_t, uint16_t> counts;
};

}  // namespace internal

namespace {

using internal::KeyBatch;

// 16 stripes: a 4096-key request looks up ~256 keys per lock, so the
// store's batched lookups keep 32 cache misses in flight (with 256 stripes a
// stripe saw ~16 keys and pulls of tables past the L3 cache ran 1.5-1.8x
// slower: BENCHMARKS.md). Pulls share stripe locks; pushes from a few
// threads still rarely meet on one of 16.
constexpr int kStripeBits = 4;

// IEEE-754 single: exponent all ones means Inf or NaN. Branch-free so the
// scan of a whole push vectorizes.
inline bool NonFinite(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return (bits & 0x7F800000u) == 0x7F800000u;
}

uint64_t CountNonFinite(absl::Span<const float> v) {
  uint64_t n = 0;
  for (float x : v) n += NonFinite(x) ? 1 : 0;
  return n;
}

uint32_t ClampStep(int64_t step) {
  if (step <= 0) return 0;
  if (step >= std::numeric_limits<uint32_t>::max()) return std::numeric_limits<uint32_t>::max();
  return static_cast<uint32_t>(step);
}

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

absl::Status TierError(const std::string& table) {
  return absl::UnavailableError(
      absl::StrCat("table '", table,
                   "': the RocksDB tier could not be read or written (disk error?); the "
                   "request was not answered from initial values"));
}

// Index entries are 4 B at a load of 1/3 to 1/2 (mem_row_store.h).
constexpr uint64_t kIndexBytesPerRow = 12;

uint64_t ChargedRowBytes(int row_floats) {
  const uint64_t stride =
      (sizeof(RowHeader) + static_cast<uint64_t>(row_floats) * sizeof(float) + 7) & ~uint64_t{7};
  return stride + kIndexBytesPerRow;
}

std::unique_ptr<RowStore> MakeStore(const TableOptions& options, int slot_floats, uint64_t max_rows,
                                    const TableTier* tier, MemoryAccountant* accountant) {
  const internal::MemRowStoreOptions mem{.row_floats = options.dim + slot_floats,
                                         .hot_floats = options.dim,
                                         .stripe_bits = kStripeBits,
                                         .huge_pages = true};
  if (tier == nullptr) return std::make_unique<internal::MemRowStore>(mem);
  return std::make_unique<internal::TieredRowStore>(
      internal::TieredRowStoreOptions{.mem = mem,
                                      .max_hot_rows = max_rows,
                                      .db = tier->db,
                                      .column_family = tier->column_family,
                                      .cold_rows_exist = tier->cold_rows_exist,
                                      .seed = options.seed,
                                      .accountant = accountant,
                                      .charged_row_bytes = ChargedRowBytes(mem.row_floats)});
}

}  // namespace

absl::StatusOr<std::unique_ptr<Table>> Table::Create(const TableOptions& options, Clock clock,
                                                     const TableTier* tier,
                                                     MemoryAccountant* accountant) {
  RETURN_IF_ERROR(options.Validate());
  if (tier != nullptr && tier->db == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", options.name, "': tier without a RocksDB"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, CreateOptimizer(options.optimizer));
  if (!clock) clock = SteadySeconds;
  return std::unique_ptr<Table>(
      new Table(options, std::move(optimizer), std::move(clock), tier, accountant));
}

Table::Table(const TableOptions& options, std::unique_ptr<Optimizer> optimizer, Clock clock,
             const TableTier* tier, MemoryAccountant* accountant)
    : options_(options),
      slot_floats_(optimizer->SlotFloats(options.dim)),
      max_rows_(options.memory_budget_bytes /
                (static_cast<uint64_t>(options.dim + slot_floats_) * sizeof(float))),
      accountant_(accountant),
      charge_(ChargedRowBytes(options.dim + slot_floats_)),
      pending_bound_(std::max<uint64_t>(1, options.max_pending_keys >> kStripeBits)),
      initializer_(options.initializer, options.seed),
      optimizer_(std::move(optimizer)),
      clock_(std::move(clock)),
      time_base_(clock_()),
      store_(MakeStore(options, slot_floats_, max_rows_, tier, accountant)),
      tier_(tier == nullptr ? nullptr : static_cast<internal::TieredRowStore*>(store_.get())),
      pending_(new internal::PendingStripe[store_->num_stripes()]) {}

Table::~Table() {
  // A tiered store gives back its own charge.
  if (tier_ == nullptr && accountant_ != nullptr) {
    accountant_->Release(committed_.load(std::memory_order_relaxed) * charge_);
  }
}

uint32_t Table::NowSeconds() const {
  const double t = std::floor(clock_() - time_base_);
  if (!(t > 0)) return 0;
  if (t >= std::numeric_limits<uint32_t>::max()) return std::numeric_limits<uint32_t>::max();
  return static_cast<uint32_t>(t);
}

bool Table::TryReserve(uint64_t rows, bool* node_limit) {
  // Nothing to create always fits, even in a table restored past its budget.
  if (rows == 0) return true;
  if (tier_ != nullptr) {  // past the budgets rows move to RocksDB: no cap
    committed_.fetch_add(rows, std::memory_order_relaxed);
    return true;
  }
  uint64_t c = committed_.load(std::memory_order_relaxed);
  do {
    if (rows > max_rows_ || c > max_rows_ - rows) return false;
  } while (!committed_.compare_exchange_weak(c, c + rows, std::memory_order_relaxed));
  if (accountant_ != nullptr && !accountant_->TryCharge(rows * charge_)) {
    committed_.fetch_sub(rows, std::memory_order_relaxed);
    if (node_limit != nullptr) *node_limit = true;
    return false;
  }
  return true;
}

void Table::Unreserve(uint64_t rows) {
  committed_.fetch_sub(rows, std::memory_order_relaxed);
  if (tier_ == nullptr && accountant_ != nullptr) accountant_->Release(rows * charge_);
}

absl::Status Table::Pull(absl::Span<const uint64_t> keys, absl::Span<float> out,
                         PartRunner* helpers) {
  RETURN_IF_ERROR(CheckPullSize(keys.size(), out.size()));
  return PullChecked(keys, out, helpers);
}

absl::Status Table::CheckPullSize(size_t keys, size_t floats) const {
  const size_t dim = options_.dim;
  if (floats == keys * dim) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("table '", options_.name, "': pull of ", keys,
                                                 " keys x dim ", dim, " needs ", keys * dim,
                                                 " floats, got ", floats));
}

absl::Status Table::PullChecked(absl::Span<const uint64_t> keys, absl::Span<float> out,
                                PartRunner* helpers) {
  const size_t dim = options_.dim;
  if (helpers == nullptr) return PullPart(keys, out);
  // Each part pulls its own keys into its own rows (written per key), so the
  // parts never share one.
  return helpers->Run(keys.size(), kMinPullPart, [&](size_t begin, size_t end) {
    return PullPart(keys.subspan(begin, end - begin),
                    out.subspan(begin * dim, (end - begin) * dim));
  });
}

absl::Status Table::PullPart(absl::Span<const uint64_t> keys, absl::Span<float> out) {
  const size_t dim = options_.dim;
  KeyBatch& b = internal::ThreadKeyBatch();
  b.Group(*store_, keys);
  b.const_rows.resize(keys.size());
  b.misses.clear();
  float* dst = out.data();
  bool tier_ok = true;
  for (int s = 0; s < store_->num_stripes() && tier_ok; ++s) {
    const uint32_t lo = b.begin[s], hi = b.begin[s + 1];
    if (lo == hi) continue;
    store_->Read(s, [&](const RowStore::Reader& r) {
      const size_t m = hi - lo;
      r.FindBatch({b.keys.data() + lo, m}, {b.hashes.data() + lo, m},
                  {b.const_rows.data() + lo, m});
      if (!r.ok()) {
        tier_ok = false;
        return;
      }
      for (uint32_t j = lo; j < hi; ++j) {
        const RowHeader* row = b.const_rows[j];
        if (row != nullptr) {
          std::memcpy(dst + b.original[j] * dim, row->floats(), dim * sizeof(float));
        } else {
          b.misses.push_back(j);
        }
      }
    });
  }
  if (!tier_ok) return TierError(options_.name);
  // Initial values are computed outside the locks.
  for (uint32_t j : b.misses) {
    initializer_.Fill(b.keys[j], {dst + b.original[j] * dim, dim});
  }
  rows_pulled_.fetch_add(keys.size(), std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<PreparedPush> Table::PreparePush(absl::Span<const uint64_t> keys,
                                                absl::Span<const float> grads, KeyBatch* batch) {
  const size_t dim = options_.dim;
  if (grads.size() != keys.size() * dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", options_.name, "': push of ", keys.size(), " keys x dim ", dim,
                     " needs ", keys.size() * dim, " gradient floats, got ", grads.size()));
  }
  KeyBatch& b = batch != nullptr ? *batch : internal::ThreadKeyBatch();
  b.Group(*store_, keys);
  if (b.HasDuplicateKeys()) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", options_.name, "': push of ", keys.size(),
                     " keys has duplicate keys (the client must sum gradients of a key)"));
  }
  PreparedPush p{.keys = keys, .grads = grads, .nonfinite = CountNonFinite(grads), .batch = &b};
  if (p.nonfinite > 0 && options_.bad_gradient == BadGradientPolicy::kReject) {
    rejected_gradients_.fetch_add(1, std::memory_order_relaxed);
    return absl::InvalidArgumentError(absl::StrCat("table '", options_.name, "': push of ",
                                                   keys.size(), " keys has ", p.nonfinite,
                                                   " NaN/Inf gradient values; rejected"));
  }
  return p;
}

uint64_t Table::CountCreations(const KeyBatch& b, bool admission) const {
  const uint32_t min_count = admission ? options_.admission_min_count : 0;
  uint64_t creations = 0;
  std::vector<const RowHeader*> rows;  // cold path: only near the budget
  for (int s = 0; s < store_->num_stripes(); ++s) {
    const uint32_t lo = b.begin[s], hi = b.begin[s + 1];
    if (lo == hi) continue;
    rows.resize(hi - lo);
    store_->Read(s, [&](const RowStore::Reader& r) {
      r.FindBatch({b.keys.data() + lo, hi - lo}, {b.hashes.data() + lo, hi - lo},
                  absl::MakeSpan(rows));
      for (uint32_t j = lo; j < hi; ++j) {
        if (rows[j - lo] != nullptr) continue;
        if (min_count <= 1) {
          ++creations;
          continue;
        }
        const auto& counts = pending_[s].counts;
        const auto it = counts.find(b.keys[j]);
        if ((it == counts.end() ? 0u : it->second) + 1u >= min_count) ++creations;
      }
    });
  }
  return creations;
}

void Table::SetPending(int s, uint64_t key, uint16_t count) {
  auto& counts = pending_[s].counts;
  if (counts.size() >= pending_bound_ && !counts.contains(key)) {
    // Past the bound: halve every count of this stripe, forgetting keys that
    // reach 0, until a quarter of the room is free. Frequent keys keep most
    // of their progress; one-off keys (the long tail) are dropped.
    const size_t target = pending_bound_ - pending_bound_ / 4 - 1;
    uint64_t forgotten = 0;
    while (counts.size() > target) {
      for (auto it = counts.begin(); it != counts.end();) {
        it->second >>= 1;
        if (it->second == 0) {
          counts.erase(it++);
          ++forgotten;
        } else {
          ++it;
        }
      }
    }
    pending_forgotten_.fetch_add(forgotten, std::memory_order_relaxed);
  }
  counts[key] = count;
}

bool Table::WriteStripes(
    internal::KeyBatch& b,
    absl::FunctionRef<bool(int stripe, RowStore::Writer& w, uint32_t lo, uint32_t hi)> fn,
    int first, int end, bool memory_only) {
  if (end < 0) end = store_->num_stripes();
  bool ok = true;
  for (int s = first; s < end && ok; ++s) {
    const uint32_t lo = b.begin[s], hi = b.begin[s + 1];
    if (lo == hi) continue;
    store_->Write(s, [&](RowStore::Writer& w) {
      const absl::Span<const uint64_t> keys(b.keys.data() + lo, hi - lo);
      const absl::Span<const uint64_t> hashes(b.hashes.data() + lo, hi - lo);
      const absl::Span<RowHeader*> rows(b.rows.data() + lo, hi - lo);
      if (memory_only) {
        w.FindBatchInMemory(keys, hashes, rows);
      } else {
        w.FindBatch(keys, hashes, rows);
      }
      ok = w.ok() && fn(s, w, lo, hi);
    });
  }
  return ok;
}

uint32_t Table::PartsOf(const PreparedPush& push) const {
  const KeyBatch& b = *push.batch;
  uint32_t parts = 0;
  for (int s = 0; s < store_->num_stripes(); ++s) parts += b.begin[s] != b.begin[s + 1] ? 1 : 0;
  return parts;
}

// One push being applied: what its stripes share, on whichever threads
// they run.
struct Table::PushRun {
  const PreparedPush& push;
  int64_t step;
  float lr_scale;
  PushLog* log;            // null: not logged
  const PushPart* part;    // the push's identity, for the log
  uint32_t step32, now32;  // what rows record as their last update
  bool transform;          // clip and/or zero NaN/Inf gradients first
  // Rows reserved for this push's creations and not yet taken.
  std::atomic<uint64_t> unclaimed;
  std::atomic<uint64_t> admitted{0}, deferred{0}, max_lsn{0};
};

absl::Status Table::ApplyPush(const PreparedPush& push, int64_t step, float lr_scale, PushLog* log,
                              const PushPart* part, uint64_t* last_lsn) {
  KeyBatch& b = *push.batch;
  const size_t n = b.size();

  // Reserve room for the rows this push may create, so that a push either
  // fits or is refused before anything changes. Far from the budget reserve
  // one row per key (no lookups); near it count exactly under shared locks.
  // A concurrent push's unused reservation can make a push near the budget
  // fail although it would have fit; a retry succeeds once that is released.
  uint64_t reserved = 0;
  if (TryReserve(n)) {
    reserved = n;
  } else {
    const uint64_t need = CountCreations(b);
    bool node_limit = false;
    if (!TryReserve(need, &node_limit)) {
      if (node_limit) {
        accountant_->CountRejection();
        return absl::ResourceExhaustedError(absl::StrCat(
            "table '", options_.name, "': push of ", n, " keys needs ", need, " new rows of ",
            charge_, " bytes; the PS memory limit of ", accountant_->limit(),
            " bytes (brook ps --memory-limit) is full: ", accountant_->used(),
            " bytes held by the rows of all tables (with --data-dir rows past it go to RocksDB)"));
      }
      budget_rejections_.fetch_add(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(
          absl::StrCat("table '", options_.name, "': push of ", n, " keys needs ", need,
                       " new rows; memory budget of ", options_.memory_budget_bytes, " bytes (",
                       max_rows_, " rows) is full"));
    }
    reserved = need;
  }

  PushRun run{
      .push = push,
      .step = step,
      .lr_scale = lr_scale,
      .log = log,
      .part = part,
      .step32 = ClampStep(step),
      .now32 = NowSeconds(),
      .transform = options_.gradient_clip > 0 ||
                   (push.nonfinite > 0 && options_.bad_gradient == BadGradientPolicy::kZero),
      .unclaimed{reserved}};
  b.rows.resize(n);
  const int stripes = store_->num_stripes();
  auto apply = [&](size_t first, size_t end) { return ApplyPushStripes(run, first, end); };
  // A large push on a PS with idle cores: its stripes in parts, at once. A
  // smaller one asks for parts as long as the whole push, so it runs inline.
  const absl::Status applied =
      push.helpers == nullptr
          ? apply(0, stripes)
          : push.helpers->Run(stripes, n >= kMinSplitPushKeys ? 1 : stripes, apply);
  const uint64_t unused = run.unclaimed.load(std::memory_order_relaxed);
  if (unused > 0) Unreserve(unused);
  if (last_lsn != nullptr) *last_lsn = run.max_lsn.load(std::memory_order_relaxed);
  RETURN_IF_ERROR(applied);

  rows_pushed_.fetch_add(n, std::memory_order_relaxed);
  if (const uint64_t a = run.admitted.load(std::memory_order_relaxed); a > 0) {
    admissions_.fetch_add(a, std::memory_order_relaxed);
  }
  if (const uint64_t d = run.deferred.load(std::memory_order_relaxed); d > 0) {
    budget_deferred_.fetch_add(d, std::memory_order_relaxed);
  }
  if (push.nonfinite > 0) rejected_gradients_.fetch_add(push.nonfinite, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status Table::ApplyPushStripes(PushRun& run, size_t first, size_t end) {
  KeyBatch& b = *run.push.batch;
  PushPart logged;
  if (run.log != nullptr) {
    logged = *run.part;
    logged.table = options_.name;
    logged.parts = PartsOf(run.push);
    logged.part = 0;  // part numbers follow stripe order, whichever thread logs
    for (size_t s = 0; s < first; ++s) logged.part += b.begin[s] != b.begin[s + 1] ? 1 : 0;
    logged.dim = options_.dim;
    logged.grads = run.push.grads;
    logged.step = run.step;
    logged.learning_rate_scale = run.lr_scale;
  }
  // Everything this part writes besides rows (under their stripe's lock) is
  // its own until it adds its totals at the end.
  std::vector<float> scratch(run.transform ? options_.dim : 0);
  uint64_t admitted = 0, deferred = 0, max_lsn = 0;
  const bool ok = WriteStripes(
      b,
      [&](int s, RowStore::Writer& w, uint32_t lo, uint32_t hi) {
        if (run.log != nullptr) {
          logged.keys = {b.keys.data() + lo, hi - lo};
          logged.original = {b.original.data() + lo, hi - lo};
          max_lsn = std::max(max_lsn, run.log->LogPart(logged));
          ++logged.part;
        }
        ApplyPushRows(run, s, w, lo, hi, scratch.data(), &admitted, &deferred);
        return true;
      },
      static_cast<int>(first), static_cast<int>(end));
  run.admitted.fetch_add(admitted, std::memory_order_relaxed);
  run.deferred.fetch_add(deferred, std::memory_order_relaxed);
  uint64_t seen = run.max_lsn.load(std::memory_order_relaxed);
  while (max_lsn > seen &&
         !run.max_lsn.compare_exchange_weak(seen, max_lsn, std::memory_order_relaxed)) {
  }
  return ok ? absl::OkStatus() : TierError(options_.name);
}

bool Table::TakeReservation(PushRun& run) {
  // A row created beyond the reservation (another push raced us to a pending
  // key's last count, or Evict freed a row we had counted as present) tries
  // the budget once more; if that fails the key stays pending.
  uint64_t left = run.unclaimed.load(std::memory_order_relaxed);
  while (left > 0) {
    if (run.unclaimed.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) {
      return true;
    }
  }
  return TryReserve(1);
}

void Table::ApplyPushRows(PushRun& run, int s, RowStore::Writer& w, uint32_t lo, uint32_t hi,
                          float* scratch, uint64_t* admitted, uint64_t* deferred) {
  const KeyBatch& b = *run.push.batch;
  const size_t dim = options_.dim;
  const size_t slots = slot_floats_;
  const uint32_t min_count = options_.admission_min_count;
  const float clip = options_.gradient_clip;
  for (uint32_t j = lo; j < hi; ++j) {
    RowHeader* row = b.rows[j];
    const uint64_t key = b.keys[j];
    if (row == nullptr) {
      if (min_count > 1) {
        const auto it = pending_[s].counts.find(key);
        const uint32_t count = (it == pending_[s].counts.end() ? 0u : it->second) + 1u;
        if (count < min_count) {
          SetPending(s, key, static_cast<uint16_t>(count));
          continue;  // counted only
        }
      }
      // No room: the gradient is dropped and the key waits one count short.
      auto defer = [&] {
        ++*deferred;
        if (min_count > 1) SetPending(s, key, static_cast<uint16_t>(min_count - 1));
      };
      if (!TakeReservation(run)) {
        defer();
        continue;
      }
      row = w.Insert(key, b.hashes[j]);
      if (row == nullptr) {  // the store itself is full
        Unreserve(1);
        defer();
        continue;
      }
      if (min_count > 1) pending_[s].counts.erase(key);
      initializer_.Fill(key, {row->floats(), dim});
      optimizer_->InitSlots({row->floats() + dim, slots});
      ++*admitted;
    }
    const float* g = run.push.grads.data() + size_t{b.original[j]} * dim;
    if (run.transform) {
      for (size_t k = 0; k < dim; ++k) {
        float v = NonFinite(g[k]) ? 0.0f : g[k];
        if (clip > 0) v = std::clamp(v, -clip, clip);
        scratch[k] = v;
      }
      g = scratch;
    }
    optimizer_->Apply({row->floats(), dim}, {row->floats() + dim, slots}, {g, dim}, run.lr_scale);
    row->MarkUpdated(run.step32, run.now32);
  }
}

uint64_t Table::Evict(int64_t current_step, std::vector<uint64_t>* evicted_keys) {
  const int64_t ttl_steps = options_.ttl_steps;
  const double ttl_seconds = options_.ttl_seconds;
  if (ttl_steps <= 0 && ttl_seconds <= 0) return 0;
  const int64_t now = NowSeconds();
  auto expired = [&](const RowHeader& r) {
    if (ttl_steps > 0 && current_step - static_cast<int64_t>(r.last_step) >= ttl_steps) return true;
    return ttl_seconds > 0 &&
           static_cast<double>(now - static_cast<int64_t>(r.last_time())) >= ttl_seconds;
  };
  KeyBatch& b = internal::ThreadKeyBatch();
  uint64_t evicted = 0;
  for (int s = 0; s < store_->num_stripes(); ++s) {
    store_->Write(s, [&](RowStore::Writer& w) {
      b.victims.clear();
      w.ForEach([&](RowHeader& r) {
        if (expired(r)) b.victims.push_back(r.key);
      });
      for (uint64_t key : b.victims) w.Erase(key, RowStore::HashKey(key));
      evicted += b.victims.size();
      if (evicted_keys != nullptr) {
        evicted_keys->insert(evicted_keys->end(), b.victims.begin(), b.victims.end());
      }
    });
  }
  if (evicted > 0) {
    Unreserve(evicted);
    evictions_.fetch_add(evicted, std::memory_order_relaxed);
  }
  return evicted;
}

absl::Status Table::Scan(
    absl::FunctionRef<void(uint64_t, absl::Span<const float>, absl::Span<const float>)> fn) const {
  const size_t dim = options_.dim;
  const size_t slots = slot_floats_;
  absl::flat_hash_set<uint64_t> hot;
  for (int s = 0; s < store_->num_stripes(); ++s) {
    store_->Read(s, [&](const RowStore::Reader& r) {
      r.ForEach([&](const RowHeader& row) {
        if (tier_ != nullptr) hot.insert(row.key);
        fn(row.key, {row.floats(), dim}, {row.floats() + dim, slots});
      });
    });
  }
  if (tier_ == nullptr) return absl::OkStatus();
  // Cold rows; a key also in memory has a stale copy in RocksDB.
  return tier_->ForEachCold([&](const RowHeader& row) {
    if (!hot.contains(row.key)) fn(row.key, {row.floats(), dim}, {row.floats() + dim, slots});
    return absl::OkStatus();
  });
}

absl::Status Table::AssignRows(absl::Span<const uint64_t> keys, absl::Span<const float> weights) {
  const size_t dim = options_.dim;
  const size_t slots = slot_floats_;
  if (weights.size() != keys.size() * dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", options_.name, "': assign of ", keys.size(), " keys x dim ", dim,
                     " needs ", keys.size() * dim, " floats, got ", weights.size()));
  }
  KeyBatch& b = internal::ThreadKeyBatch();
  b.Group(*store_, keys);
  if (b.HasDuplicateKeys()) {
    return absl::InvalidArgumentError(absl::StrCat("table '", options_.name, "': assign of ",
                                                   keys.size(), " keys has duplicate keys"));
  }
  const size_t n = b.size();
  // Room for the rows it may create, as a push reserves it (ApplyPush).
  uint64_t unclaimed = 0;
  if (TryReserve(n)) {
    unclaimed = n;
  } else {
    const uint64_t need = CountCreations(b, /*admission=*/false);
    if (!TryReserve(need)) {
      budget_rejections_.fetch_add(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(
          absl::StrCat("table '", options_.name, "': assign of ", n, " keys needs ", need,
                       " new rows; the table's memory budget or the PS memory limit is full"));
    }
    unclaimed = need;
  }
  const uint32_t now = NowSeconds();
  const uint32_t min_count = options_.admission_min_count;
  bool full = false;
  b.rows.resize(n);
  const bool ok = WriteStripes(b, [&](int s, RowStore::Writer& w, uint32_t lo, uint32_t hi) {
    for (uint32_t j = lo; j < hi; ++j) {
      RowHeader* row = b.rows[j];
      uint32_t step = 0;
      if (row == nullptr) {
        if (unclaimed > 0) {
          --unclaimed;
        } else if (!TryReserve(1)) {
          full = true;
          return false;
        }
        row = w.Insert(b.keys[j], b.hashes[j]);
        if (row == nullptr) {  // the store itself is full
          Unreserve(1);
          full = true;
          return false;
        }
        optimizer_->InitSlots({row->floats() + dim, slots});
        if (min_count > 1) pending_[s].counts.erase(b.keys[j]);
      } else {
        step = row->last_step;
      }
      std::memcpy(row->floats(), weights.data() + size_t{b.original[j]} * dim, dim * sizeof(float));
      row->MarkUpdated(step, now);
    }
    return true;
  });
  if (unclaimed > 0) Unreserve(unclaimed);
  if (full) {
    return absl::ResourceExhaustedError(
        absl::StrCat("table '", options_.name, "': assign ran out of room for new rows"));
  }
  return ok ? absl::OkStatus() : TierError(options_.name);
}

absl::Status Table::ScanWeights(
    size_t chunk_rows,
    absl::FunctionRef<absl::Status(absl::Span<const uint64_t>, absl::Span<const float>)> fn) const {
  const size_t dim = options_.dim;
  std::vector<uint64_t> stripe_keys, keys, hashes;
  std::vector<const RowHeader*> rows;
  std::vector<float> weights;
  absl::flat_hash_set<uint64_t> hot;  // tiered: keys seen in memory
  for (int s = 0; s < store_->num_stripes(); ++s) {
    stripe_keys.clear();
    store_->Read(s, [&](const RowStore::Reader& r) {
      r.ForEach([&](const RowHeader& row) { stripe_keys.push_back(row.key); });
    });
    if (tier_ != nullptr) hot.insert(stripe_keys.begin(), stripe_keys.end());
    // A chunk at a time under the shared lock, handed out after it: a row
    // gone meanwhile (evicted) is left out.
    for (size_t at = 0; at < stripe_keys.size(); at += chunk_rows) {
      const size_t m = std::min(chunk_rows, stripe_keys.size() - at);
      hashes.resize(m);
      rows.resize(m);
      for (size_t i = 0; i < m; ++i) hashes[i] = RowStore::HashKey(stripe_keys[at + i]);
      keys.clear();
      weights.clear();
      bool tier_ok = true;
      store_->Read(s, [&](const RowStore::Reader& r) {
        r.FindBatch({stripe_keys.data() + at, m}, hashes, absl::MakeSpan(rows));
        tier_ok = r.ok();
        for (size_t i = 0; i < m; ++i) {
          if (rows[i] == nullptr) continue;
          keys.push_back(rows[i]->key);
          weights.insert(weights.end(), rows[i]->floats(), rows[i]->floats() + dim);
        }
      });
      if (!tier_ok) return TierError(options_.name);
      if (!keys.empty()) RETURN_IF_ERROR(fn(keys, weights));
    }
  }
  if (tier_ == nullptr) return absl::OkStatus();
  // Cold rows; a key also in memory has a stale copy in RocksDB.
  keys.clear();
  weights.clear();
  RETURN_IF_ERROR(tier_->ForEachCold([&](const RowHeader& row) -> absl::Status {
    if (hot.contains(row.key)) return absl::OkStatus();
    keys.push_back(row.key);
    weights.insert(weights.end(), row.floats(), row.floats() + dim);
    if (keys.size() < chunk_rows) return absl::OkStatus();
    const absl::Status s = fn(keys, weights);
    keys.clear();
    weights.clear();
    return s;
  }));
  if (!keys.empty()) return fn(keys, weights);
  return absl::OkStatus();
}

bool Table::has_cold_family() const { return tier_ != nullptr && tier_->has_family(); }

void Table::RetireTier() {
  if (tier_ != nullptr) tier_->Retire();
}

size_t Table::stored_row_bytes() const {
  return sizeof(RowHeader) + static_cast<size_t>(options_.dim + slot_floats_) * sizeof(float);
}

absl::Status Table::WriteCheckpoint(bool incremental, CheckpointSink* sink, bool* complete) {
  *complete = true;
  const size_t row_bytes = stored_row_bytes();
  std::vector<char> rows;
  std::vector<uint64_t> evicted_dirty, erased;
  absl::flat_hash_set<uint64_t> written;
  absl::Status status;
  for (int s = 0; s < store_->num_stripes() && status.ok(); ++s) {
    rows.clear();
    evicted_dirty.clear();
    erased.clear();
    store_->Write(s, [&](RowStore::Writer& w) {
      written.clear();
      w.ForEach([&](RowHeader& r) {
        if (incremental && !r.dirty()) return;
        const size_t at = rows.size();
        rows.resize(at + row_bytes);
        std::memcpy(rows.data() + at, &r, row_bytes);
        r.time_flags &= ~RowHeader::kDirty;
        if (incremental) written.insert(r.key);
      });
      if (tier_ == nullptr) return;
      if (!tier_->TakeCheckpointDelta(s, &evicted_dirty, &erased)) *complete = false;
      if (!incremental || evicted_dirty.empty()) return;
      // Rows evicted while changed and not written above: their RocksDB
      // copy is their latest (a row a push brought back and changed again
      // is dirty in memory, written above; one brought back unchanged
      // equals its copy). Read from RocksDB, not brought back: bringing
      // them back would evict as many rows, a write storm and a memory
      // spike at every incremental checkpoint of a table that spills.
      std::sort(evicted_dirty.begin(), evicted_dirty.end());
      evicted_dirty.erase(std::unique(evicted_dirty.begin(), evicted_dirty.end()),
                          evicted_dirty.end());
      std::erase_if(evicted_dirty, [&](uint64_t key) { return written.contains(key); });
      if (evicted_dirty.empty()) return;
      const size_t at = rows.size();
      rows.resize(at + evicted_dirty.size() * row_bytes);
      std::unique_ptr<bool[]> found(new bool[evicted_dirty.size()]);
      if (!tier_->ReadCold(evicted_dirty, rows.data() + at, found.get()).ok()) {
        status = TierError(options_.name);
        return;
      }
      size_t kept = at;  // rows erased since (TTL, listed in `erased`) are not found: closed up
      for (size_t i = 0; i < evicted_dirty.size(); ++i) {
        if (!found[i]) continue;
        const size_t from = at + i * row_bytes;
        if (from != kept) std::memmove(rows.data() + kept, rows.data() + from, row_bytes);
        kept += row_bytes;
      }
      rows.resize(kept);
    });
    if (!status.ok()) break;
    // Deletes first: a key removed and then created again keeps its row.
    if (!erased.empty()) status.Update(sink->Deletes(erased));
    if (!rows.empty()) status.Update(sink->Rows(rows.data(), rows.size() / row_bytes, row_bytes));
  }
  return status;
}

absl::Status Table::ImportRows(const char* rows, size_t count, size_t row_bytes) {
  if (row_bytes != stored_row_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table '", options_.name, "': stored rows of ", row_bytes, " bytes, expected ",
        stored_row_bytes(), " (dim ", options_.dim, " + ", slot_floats_, " optimizer slots)"));
  }
  // A key may come twice (a row in a block and again in a later one): the
  // later copy wins, and the store must see each key once.
  std::vector<std::pair<uint64_t, uint32_t>> order(count);
  for (size_t i = 0; i < count; ++i) {
    std::memcpy(&order[i].first, rows + i * row_bytes, sizeof(uint64_t));
    order[i].second = static_cast<uint32_t>(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<uint64_t> keys;
  std::vector<uint32_t> source;  // keys[u] takes row source[u]
  for (size_t i = 0; i < count; ++i) {
    if (i + 1 < count && order[i + 1].first == order[i].first) continue;
    keys.push_back(order[i].first);
    source.push_back(order[i].second);
  }
  KeyBatch& b = internal::ThreadKeyBatch();
  b.Group(*store_, keys);
  b.rows.resize(keys.size());
  uint64_t created = 0;
  const bool tier_ok = WriteStripes(
      b,
      [&](int, RowStore::Writer& w, uint32_t lo, uint32_t hi) {
        for (uint32_t j = lo; j < hi; ++j) {
          RowHeader* r = b.rows[j];
          if (r == nullptr) {
            r = w.Insert(b.keys[j], b.hashes[j]);
            if (r == nullptr) return false;
            ++created;
          }
          std::memcpy(static_cast<void*>(r), rows + size_t{source[b.original[j]]} * row_bytes,
                      row_bytes);
          // Restored rows count as changed: the next checkpoint must hold them.
          r->time_flags = (r->time_flags & RowHeader::kTimeMask) | RowHeader::kDirty;
        }
        return true;
      },
      /*first=*/0, /*end=*/-1, /*memory_only=*/true);  // each row is overwritten whole
  committed_.fetch_add(created, std::memory_order_relaxed);
  // Restored rows are kept even past the node-wide limit (see
  // memory_accountant.h); pushes then create none until rows go.
  if (tier_ == nullptr && accountant_ != nullptr) accountant_->Charge(created * charge_);
  if (!tier_ok) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "table '", options_.name, "': could not hold the restored rows (memory budget of ",
        options_.memory_budget_bytes, " bytes without a RocksDB tier, or a tier error)"));
  }
  return absl::OkStatus();
}

void Table::ReserveRows(uint64_t rows) {
  rows = std::min<uint64_t>(rows, max_rows_);  // what memory holds (a tier keeps the rest)
  const int stripes = store_->num_stripes();
  // Keys spread over the stripes binomially: 1/16 more than the mean plus a
  // little covers a stripe's share but for a few standard deviations out.
  const uint64_t mean = rows / stripes;
  const uint64_t per_stripe = std::min<uint64_t>(mean + mean / 16 + 64, UINT32_MAX);
  for (int s = 0; s < stripes; ++s) {
    store_->Write(s, [&](RowStore::Writer& w) {
      if (per_stripe > w.size()) w.Reserve(static_cast<uint32_t>(per_stripe - w.size()));
    });
  }
}

absl::Status Table::ImportDeletes(absl::Span<const uint64_t> keys) {
  KeyBatch& b = internal::ThreadKeyBatch();
  b.Group(*store_, keys);
  b.rows.resize(keys.size());
  uint64_t erased = 0;
  const bool tier_ok = WriteStripes(b, [&](int, RowStore::Writer& w, uint32_t lo, uint32_t hi) {
    for (uint32_t j = lo; j < hi; ++j) {
      if (b.rows[j] == nullptr) continue;
      w.Erase(b.keys[j], b.hashes[j]);
      ++erased;
    }
    return true;
  });
  Unreserve(erased);
  return tier_ok ? absl::OkStatus() : TierError(options_.name);
}

TableStats Table::Stats() const {
  TableStats t;
  t.name = options_.name;
  t.dim = options_.dim;
  const RowStoreStats store = store_->Stats();
  t.rows = store.rows;
  uint64_t pending_bytes = 0;
  for (int s = 0; s < store_->num_stripes(); ++s) {
    store_->Read(s, [&](const RowStore::Reader&) {
      const auto& counts = pending_[s].counts;
      t.pending_keys += counts.size();
      pending_bytes += counts.capacity() * (sizeof(std::pair<const uint64_t, uint16_t>) + 1);
    });
  }
  t.memory_bytes = store.memory_bytes + pending_bytes +
                   sizeof(internal::PendingStripe) * store_->num_stripes() + sizeof(Table);
  t.bytes_per_row = t.rows == 0 ? 0.0 : static_cast<double>(t.memory_bytes) / t.rows;
  t.index_grows = store.index_grows;
  t.memory_budget_bytes = options_.memory_budget_bytes;
  t.rows_pulled = rows_pulled_.load(std::memory_order_relaxed);
  t.rows_pushed = rows_pushed_.load(std::memory_order_relaxed);
  t.admissions = admissions_.load(std::memory_order_relaxed);
  t.evictions = evictions_.load(std::memory_order_relaxed);
  t.rejected_gradients = rejected_gradients_.load(std::memory_order_relaxed);
  t.duplicate_pushes = duplicate_pushes_.load(std::memory_order_relaxed);
  t.pending_forgotten = pending_forgotten_.load(std::memory_order_relaxed);
  t.budget_rejections = budget_rejections_.load(std::memory_order_relaxed);
  t.budget_deferred = budget_deferred_.load(std::memory_order_relaxed);
  if (tier_ != nullptr) {
    const internal::TierStats ts = tier_->tier_stats();
    t.tiered = true;
    t.hot_hits = ts.hot_hits;
    t.cold_hits = ts.cold_hits;
    t.cold_misses = ts.cold_misses;
    t.cold_rows = ts.cold_rows;
    t.tier_family = ts.has_family;
    t.tier_evictions = ts.evictions;
    t.tier_promotions = ts.promotions;
    t.tier_errors = ts.errors;
  }
  return t;
}

}  // namespace brook::ps
