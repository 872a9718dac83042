// The two hand-offs between input pipeline stages, both bounded and both
// cancellable, so that shutdown is a normal state and never a race:
//
//  - BoundedQueue<T>: FIFO of at most `capacity` items. Close() ends the
//    stream (consumers drain what is left); Cancel() wakes every waiter at
//    once and drops the items.
//  - OrderedWindow<T>: a re-ordering buffer for items numbered 0, 1, 2, ...
//    that arrive out of order from parallel workers and leave strictly in
//    order. At most `capacity` items are held: Put of item `seq` blocks while
//    seq >= next + capacity, where `next` is the number the taker waits for.
//    The producer of `next` is never blocked, so the window cannot deadlock
//    as long as every number is eventually Put (or the window cancelled).
//
// Both are thread-safe. Blocking calls report how long they waited (ns), which
// the pipeline turns into per-stage wait seconds. Internal to trainer/input.
// std::mutex, not absl::Mutex: see docs/decisions.md (TSan).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

namespace brook::input::internal {

inline uint64_t NowNanos() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

template <typename T>
class BoundedQueue {
 public:
  // REQUIRES: capacity > 0.
  explicit BoundedQueue(size_t capacity) : capacity_(capacity) {}
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // Blocks while full. Returns false, dropping `item`, once closed or
  // cancelled. Adds the time spent blocked to *waited_ns if given.
  bool Push(T item, uint64_t* waited_ns = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    if (items_.size() >= capacity_ && !closed_ && !cancelled_) {
      const uint64_t start = NowNanos();
      not_full_.wait(lock, [&] { return items_.size() < capacity_ || closed_ || cancelled_; });
      if (waited_ns != nullptr) *waited_ns += NowNanos() - start;
    }
    if (closed_ || cancelled_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  // Blocks while empty and open. Returns nullopt once cancelled, or once
  // closed and drained.
  std::optional<T> Pop(uint64_t* waited_ns = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    if (items_.empty() && !closed_ && !cancelled_) {
      const uint64_t start = NowNanos();
      not_empty_.wait(lock, [&] { return !items_.empty() || closed_ || cancelled_; });
      if (waited_ns != nullptr) *waited_ns += NowNanos() - start;
    }
    if (cancelled_ || items_.empty()) return std::nullopt;
    std::optional<T> item(std::move(items_.front()));
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  // No more pushes; Pop returns what is left, then nullopt.
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    not_empty_.notify_all();
    not_full_.notify_all();
  }

  // Every blocked and later call returns at once; queued items are dropped.
  void Cancel() {
    std::deque<T> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      dropped.swap(items_);
      not_empty_.notify_all();
      not_full_.notify_all();
    }
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size();
  }
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  // Protected by mu_.
  std::deque<T> items_;
  bool closed_ = false;
  bool cancelled_ = false;
};

template <typename T>
class OrderedWindow {
 public:
  // REQUIRES: capacity > 0.
  explicit OrderedWindow(size_t capacity) : capacity_(capacity) {}
  OrderedWindow(const OrderedWindow&) = delete;
  OrderedWindow& operator=(const OrderedWindow&) = delete;

  // Stores item `seq`, blocking while seq >= next + capacity. Returns false,
  // dropping the item, once cancelled. REQUIRES: each seq is Put once.
  bool Put(uint64_t seq, T item, uint64_t* waited_ns = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    if (seq >= next_ + capacity_ && !cancelled_) {
      const uint64_t start = NowNanos();
      has_room_.wait(lock, [&] { return seq < next_ + capacity_ || cancelled_; });
      if (waited_ns != nullptr) *waited_ns += NowNanos() - start;
    }
    if (cancelled_) return false;
    items_.emplace(seq, std::move(item));
    if (seq == next_) has_next_.notify_one();
    return true;
  }

  // Blocks until item `next` is present, returns it and advances `next`.
  // nullopt once cancelled.
  std::optional<T> Take(uint64_t* waited_ns = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [&] { return cancelled_ || (!items_.empty() && items_.begin()->first == next_); };
    if (!ready()) {
      const uint64_t start = NowNanos();
      has_next_.wait(lock, ready);
      if (waited_ns != nullptr) *waited_ns += NowNanos() - start;
    }
    if (cancelled_) return std::nullopt;
    auto it = items_.begin();
    std::optional<T> item(std::move(it->second));
    items_.erase(it);
    ++next_;
    has_room_.notify_all();
    return item;
  }

  // Changes the bound (the prefetch autotuner grows it). REQUIRES: > 0.
  void SetCapacity(size_t capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    capacity_ = capacity;
    has_room_.notify_all();
  }

  void Cancel() {
    std::map<uint64_t, T> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      dropped.swap(items_);
      has_next_.notify_all();
      has_room_.notify_all();
    }
  }

  // Items held (in order or not).
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable has_next_;
  std::condition_variable has_room_;
  // Protected by mu_.
  size_t capacity_;
  uint64_t next_ = 0;
  std::map<uint64_t, T> items_;
  bool cancelled_ = false;
};

}  // namespace brook::input::internal
