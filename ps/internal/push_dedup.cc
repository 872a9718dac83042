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

namespace {

inline bool InFlight(const std::vector<uint64_t>& v, uint64_t seq) {
  return std::find(v.begin(), v.end(), seq) != v.end();
}

}  // namespace

PushDedup::PushDedup(uint32_t window) : window_((uint64_t{window} + 63) / 64 * 64) {}
PushDedup::~PushDedup() = default;

PushDedup::Client* PushDedup::GetClient(uint64_t client) {
  {
    ReaderLock lock(&mu_);
    auto it = clients_.find(client);
    if (it != clients_.end()) return it->second.get();
  }
  WriterLock lock(&mu_);
  auto& slot = clients_[client];
  if (!slot) {
    slot = std::make_unique<Client>();
    MutexLock client_lock(&slot->mu);
    slot->bits.assign(window_ / 64, 0);
  }
  return slot.get();  // stable: clients are never removed
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
    auto it = std::find(c->in_flight.begin(), c->in_flight.end(), seq);
    if (it != c->in_flight.end()) c->in_flight.erase(it);
    if (!applied && !c->bits.empty() && c->max_seq - seq < window_) {
      c->Word(seq, window_) &= ~(uint64_t{1} << (seq % 64));
    }
  }
  c->settled.notify_all();
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
