#include "ps/internal/push_dedup.h"

#include <algorithm>

namespace brook::ps::internal {

// One client's window. Invariant (under mu): a bit is set for every sequence
// in (max_seq - window, max_seq] that was applied or is in flight, and only
// for those; in_flight lists the sequences claimed but not yet settled.
struct PushDedup::Client {
  Mutex mu;
  std::condition_variable settled;
  bool any ABSL_GUARDED_BY(mu) = false;
  bool fenced ABSL_GUARDED_BY(mu) = false;
  uint64_t max_seq ABSL_GUARDED_BY(mu) = 0;
  std::vector<uint64_t> bits ABSL_GUARDED_BY(mu);
  std::vector<uint64_t> in_flight ABSL_GUARDED_BY(mu);

  // The word holding sequence s's bit in a window of w bits.
  uint64_t& Word(uint64_t s, uint64_t w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return bits[(s % w) / 64];
  }
};

// One stream's latest step. Invariant (under mu): `bits` has a bit set for
// every part of step `step` that was applied or is in flight; every step
// before it is applied on this shard (a holder pushes a step only after all
// of its earlier steps were acknowledged by every shard).
struct PushDedup::Stream {
  Mutex mu;
  std::condition_variable settled;
  bool any ABSL_GUARDED_BY(mu) = false;
  uint64_t step ABSL_GUARDED_BY(mu) = 0;
  std::vector<uint64_t> bits ABSL_GUARDED_BY(mu);  // by part, grown on demand
  std::vector<uint64_t> in_flight ABSL_GUARDED_BY(mu);

  bool Test(uint64_t part) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return part / 64 < bits.size() && (bits[part / 64] >> (part % 64) & 1) != 0;
  }
  void Set(uint64_t part, bool on) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (part / 64 >= bits.size()) bits.resize(part / 64 + 1, 0);
    const uint64_t mask = uint64_t{1} << (part % 64);
    bits[part / 64] = on ? bits[part / 64] | mask : bits[part / 64] & ~mask;
  }
};

namespace {

inline bool InFlight(const std::vector<uint64_t>& v, uint64_t seq) {
  return std::find(v.begin(), v.end(), seq) != v.end();
}

inline void EraseInFlight(std::vector<uint64_t>* v, uint64_t seq) {
  auto it = std::find(v->begin(), v->end(), seq);
  if (it != v->end()) v->erase(it);
}

// A stream sequence's step and its part within the step.
inline uint64_t StepOf(uint64_t seq) { return seq >> kStreamPartBits; }
inline uint64_t PartOf(uint64_t seq) { return seq & (kMaxStreamParts - 1); }

// The entry of `key` in *map (guarded by *mu), made and passed to `init`
// under the writer lock the first time. Entries are never removed, so the
// pointer stays valid without the lock.
template <typename T, typename Init>
T* FindOrAdd(RwMutex* mu, absl::flat_hash_map<uint64_t, std::unique_ptr<T>>* map, uint64_t key,
             Init init) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  {
    ReaderLock lock(mu);
    auto it = map->find(key);
    if (it != map->end()) return it->second.get();
  }
  WriterLock lock(mu);
  std::unique_ptr<T>& slot = (*map)[key];
  if (!slot) {
    slot = std::make_unique<T>();
    init(slot.get());
  }
  return slot.get();
}

}  // namespace

PushDedup::PushDedup(uint32_t window) : window_((uint64_t{window} + 63) / 64 * 64) {}
PushDedup::~PushDedup() = default;

PushDedup::Client* PushDedup::GetClient(uint64_t client) {
  return FindOrAdd(&mu_, &clients_, client, [this](Client* c) {
    MutexLock client_lock(&c->mu);
    c->bits.assign(window_ / 64, 0);
  });
}

PushDedup::Claim PushDedup::Begin(uint64_t client, uint64_t seq) {
  Client* c = GetClient(client);
  MutexLock lock(&c->mu);
  const uint64_t w = window_;
  auto mask = [&](uint64_t s) { return uint64_t{1} << (s % 64); };
  for (;;) {
    if (c->fenced) {
      fenced_refusals_.fetch_add(1, std::memory_order_relaxed);
      return Claim::kFenced;
    }
    if (!c->any || seq > c->max_seq) {
      // New high-water mark: sequences in (max_seq, seq] become part of the
      // window unseen, so clear their bits (all of them for a big jump).
      if (!c->any || seq - c->max_seq >= w) {
        std::fill(c->bits.begin(), c->bits.end(), 0);
      } else {
        for (uint64_t s = c->max_seq + 1; s <= seq; ++s) c->Word(s, w) &= ~mask(s);
      }
      c->any = true;
      c->max_seq = seq;
      break;
    }
    if (c->max_seq - seq >= w) return Claim::kTooOld;
    if ((c->Word(seq, w) & mask(seq)) == 0) break;
    if (!InFlight(c->in_flight, seq)) return Claim::kDuplicate;
    c->mu.Wait(&c->settled);  // the original is being applied: await its outcome
  }
  c->Word(seq, w) |= mask(seq);
  c->in_flight.push_back(seq);
  return Claim::kFresh;
}

void PushDedup::End(uint64_t client, uint64_t seq, bool applied) {
  Client* c = GetClient(client);
  {
    MutexLock lock(&c->mu);
    EraseInFlight(&c->in_flight, seq);
    if (!applied && !c->bits.empty() && c->max_seq - seq < window_) {
      c->Word(seq, window_) &= ~(uint64_t{1} << (seq % 64));
    }
  }
  c->settled.notify_all();
}

PushDedup::Stream* PushDedup::GetStream(uint64_t stream) {
  return FindOrAdd(&mu_, &streams_, stream,
                   [this](Stream*) { streams_count_.fetch_add(1, std::memory_order_relaxed); });
}

PushDedup::Claim PushDedup::BeginStream(uint64_t client, uint64_t stream, uint64_t seq) {
  if (client != 0 && IsFenced(client)) {
    fenced_refusals_.fetch_add(1, std::memory_order_relaxed);
    return Claim::kFenced;
  }
  const uint64_t step = StepOf(seq), part = PartOf(seq);
  Stream* s = GetStream(stream);
  MutexLock lock(&s->mu);
  for (;;) {
    if (!s->any || step > s->step) {
      // A later step: every earlier one is applied; only its parts matter now.
      s->any = true;
      s->step = step;
      s->bits.clear();
      break;
    }
    if (step < s->step) return Claim::kDuplicate;
    if (!s->Test(part)) break;
    if (!InFlight(s->in_flight, seq)) return Claim::kDuplicate;
    s->mu.Wait(&s->settled);  // another holder is applying this part: await it
  }
  s->Set(part, true);
  s->in_flight.push_back(seq);
  return Claim::kFresh;
}

void PushDedup::EndStream(uint64_t stream, uint64_t seq, bool applied) {
  Stream* s = GetStream(stream);
  {
    MutexLock lock(&s->mu);
    EraseInFlight(&s->in_flight, seq);
    if (!applied && StepOf(seq) == s->step) {
      s->Set(PartOf(seq), false);
    }
  }
  s->settled.notify_all();
}

bool PushDedup::Fence(uint64_t client) {
  Client* c = GetClient(client);
  {
    MutexLock lock(&c->mu);
    if (c->fenced) return false;
    c->fenced = true;
    // In-flight claims still settle through End(), which only touches bits
    // within the window: keep the words until they have.
    if (c->in_flight.empty()) std::vector<uint64_t>().swap(c->bits);
  }
  fenced_.fetch_add(1, std::memory_order_relaxed);
  c->settled.notify_all();  // a duplicate waiting on a claim re-checks: refused
  return true;
}

bool PushDedup::IsFenced(uint64_t client) {
  {
    ReaderLock lock(&mu_);
    if (!clients_.contains(client)) return false;
  }
  Client* c = GetClient(client);
  MutexLock lock(&c->mu);
  return c->fenced;
}

}  // namespace brook::ps::internal
