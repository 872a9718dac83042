#include "common/part_runner.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/container/inlined_vector.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace brook {

namespace {

// How long a caller that finished its own part spins for the helpers' parts
// before it sleeps. Parts are the same size, so the helpers usually finish
// within their wake-up delay of the caller; sleeping instead would add a
// futex wait and wake-up per request, which on a busy machine cost more than
// the split saved (BENCHMARKS.md, issue 3).
constexpr absl::Duration kSpinBeforeSleep = absl::Microseconds(50);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

// The helpers' parts still running; changed only under `mu`, so a caller
// that takes `mu` after seeing zero knows no helper touches this any more.
// std::mutex, not absl::Mutex, here and below: Debian's abseil is not built
// for TSan, which would then miss these hand-offs (docs/decisions.md).
struct PartRunner::Pending {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> left;
};

// One part handed to a helper; lives on the caller's stack until `pending`
// reaches zero.
struct PartRunner::Job {
  Part part;
  size_t begin;
  size_t end;
  absl::Status* status;
  Pending* pending;
};

struct PartRunner::Helper {
  std::mutex mu;
  std::condition_variable cv;
  const Job* job = nullptr;  // guarded by mu
  bool stop = false;         // guarded by mu
  // True while the helper waits for work; a caller claims it by swapping
  // this to false, so two callers never post to one helper.
  std::atomic<bool> idle{true};
  std::thread thread;
};

PartRunner::PartRunner(int helpers) {
  for (int i = 0; i < helpers; ++i) {
    helpers_.push_back(std::make_unique<Helper>());
    Helper* h = helpers_.back().get();
    h->thread = std::thread([h] { Loop(h); });
  }
}

PartRunner::~PartRunner() {
  for (auto& h : helpers_) {
    {
      std::lock_guard lock(h->mu);
      h->stop = true;
    }
    h->cv.notify_one();
  }
  for (auto& h : helpers_) h->thread.join();
}

void PartRunner::Loop(Helper* h) {
  for (;;) {
    const Job* job;
    {
      std::unique_lock lock(h->mu);
      h->cv.wait(lock, [h] { return h->job != nullptr || h->stop; });
      if (h->job == nullptr) return;  // stopping
      job = h->job;
      h->job = nullptr;
    }
    *job->status = job->part(job->begin, job->end);
    Pending* pending = job->pending;  // `job` may be gone once the count is down
    h->idle.store(true, std::memory_order_release);
    // Notified under the lock: once it is released the caller may return
    // and `pending` be gone.
    std::lock_guard lock(pending->mu);
    pending->left.fetch_sub(1, std::memory_order_release);
    pending->cv.notify_one();
  }
}

absl::Status PartRunner::Run(size_t n, size_t min_part, Part part) {
  struct Running {
    std::atomic<int>* count;
    int others;
    ~Running() { count->fetch_sub(1, std::memory_order_relaxed); }
  } running{&running_, running_.fetch_add(1, std::memory_order_relaxed)};
  const size_t max_parts =
      running.others > 0 ? 1
                         : std::min<size_t>(helpers_.size() + 1, n / std::max<size_t>(min_part, 1));
  absl::InlinedVector<Helper*, 8> claimed;
  for (auto& h : helpers_) {
    if (claimed.size() + 1 >= max_parts) break;
    bool idle = true;
    if (h->idle.load(std::memory_order_relaxed) &&
        h->idle.compare_exchange_strong(idle, false, std::memory_order_acquire)) {
      claimed.push_back(h.get());
    }
  }
  if (claimed.empty()) return part(0, n);

  const size_t parts = claimed.size() + 1;
  absl::InlinedVector<absl::Status, 8> statuses(parts);
  absl::InlinedVector<Job, 8> jobs;
  jobs.reserve(claimed.size());  // posted by address: must not move
  Pending pending;
  pending.left.store(static_cast<int>(claimed.size()), std::memory_order_relaxed);
  for (size_t k = 1; k < parts; ++k) {
    jobs.push_back(Job{part, n * k / parts, n * (k + 1) / parts, &statuses[k], &pending});
    Helper* h = claimed[k - 1];
    {
      std::lock_guard lock(h->mu);
      h->job = &jobs.back();
    }
    h->cv.notify_one();
  }
  statuses[0] = part(0, n / parts);
  const absl::Time spin_until = absl::Now() + kSpinBeforeSleep;
  for (int i = 1; pending.left.load(std::memory_order_acquire) != 0; ++i) {
    CpuRelax();
    if (i % 64 == 0 && absl::Now() > spin_until) break;
  }
  {
    // Also when the spin saw zero: the last helper may still hold the lock.
    std::unique_lock lock(pending.mu);
    pending.cv.wait(lock, [&] { return pending.left.load(std::memory_order_acquire) == 0; });
  }
  split_runs_.fetch_add(1, std::memory_order_relaxed);
  helper_parts_.fetch_add(claimed.size(), std::memory_order_relaxed);
  for (absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace brook
