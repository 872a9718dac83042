// PushDedup: exactly-once application of pushes retried by at-least-once
// transport. Per client it remembers which of the most recent `window`
// sequence numbers were applied: a ring of bits indexed by sequence modulo
// the window, plus the largest sequence seen. Sequences may arrive out of
// order within the window (pipelined pushes); one older than the window
// cannot be proven fresh and is refused, never applied twice or dropped
// silently.
//
// A push is claimed (Begin) before it is applied and settled (End) after, so
// a duplicate that arrives while the original is still being applied waits
// for its outcome instead of applying again or acknowledging a push that
// might yet fail.
//
// Fencing: a client whose trainer lost its lease (the chief presumed it dead
// and re-leased its data) is fenced; every later push of it is refused, so a
// zombie that wakes up cannot apply gradients for data now trained by
// another. A fenced client keeps no window.
//
// Streams: a trainer's pushes of a work unit's epoch are deduplicated by
// what they carry, not by who sends them. Every trainer that trains that
// unit-epoch (its first holder, and whoever gets it after the chief
// presumed the first one dead) forms the same steps from the same records,
// so a step part has one identity: (stream, step << kStreamPartBits | part).
// The PS then applies each step part of a re-leased unit once, whichever
// holder pushes it first. A holder pushes step s only after every shard
// acknowledged its steps before s, so a push of step s proves that every
// earlier step of the stream is applied everywhere: a stream keeps only its
// latest step's part bits, and anything older is a duplicate. The sender's
// client id is still checked against the fence.
//
// Thread-safe. Memory: window/8 bytes per live client ever seen (8 KiB at
// the default window); fenced clients keep a few bytes; a stream about 100
// bytes (streams, like clients, are kept for the life of the process).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "ps/internal/mutex.h"
#include "ps/options.h"

namespace brook::ps::internal {

class PushDedup {
 public:
  enum class Claim {
    kFresh,      // caller applies, then must call End()
    kDuplicate,  // already applied: acknowledge, change nothing
    kTooOld,     // older than the window: FAILED_PRECONDITION
    kFenced,     // the client is fenced: ABORTED
  };

  // `window` is rounded up to a multiple of 64; REQUIRES window > 0.
  explicit PushDedup(uint32_t window);
  ~PushDedup();
  PushDedup(const PushDedup&) = delete;
  PushDedup& operator=(const PushDedup&) = delete;

  // May block while a push with the same (client, sequence) is in flight.
  Claim Begin(uint64_t client, uint64_t sequence) ABSL_LOCKS_EXCLUDED(mu_);
  // Settles a kFresh claim: applied = true records it; false forgets it so a
  // retry can apply.
  void End(uint64_t client, uint64_t sequence, bool applied) ABSL_LOCKS_EXCLUDED(mu_);

  // Part `sequence` (step << kStreamPartBits | part) of `stream`, sent by
  // `client` (0: no fence check, e.g. WAL replay). kFresh, kDuplicate or
  // kFenced; may block while the same part is in flight.
  Claim BeginStream(uint64_t client, uint64_t stream, uint64_t sequence) ABSL_LOCKS_EXCLUDED(mu_);
  void EndStream(uint64_t stream, uint64_t sequence, bool applied) ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t streams() const { return streams_count_.load(std::memory_order_relaxed); }

  // Refuses every later Begin of `client` (kFenced); a claim already in
  // flight settles as it would have. True if it was not fenced before.
  bool Fence(uint64_t client) ABSL_LOCKS_EXCLUDED(mu_);
  bool IsFenced(uint64_t client) ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t fenced_clients() const { return fenced_.load(std::memory_order_relaxed); }
  // Begin calls answered kFenced.
  uint64_t fenced_refusals() const { return fenced_refusals_.load(std::memory_order_relaxed); }

  uint64_t window() const { return window_; }

 private:
  struct Client;
  struct Stream;
  Client* GetClient(uint64_t client) ABSL_LOCKS_EXCLUDED(mu_);
  Stream* GetStream(uint64_t stream) ABSL_LOCKS_EXCLUDED(mu_);

  const uint64_t window_;  // bits, multiple of 64
  std::atomic<uint64_t> fenced_{0};
  std::atomic<uint64_t> fenced_refusals_{0};

  RwMutex mu_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Client>> clients_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> streams_count_{0};
};

}  // namespace brook::ps::internal
