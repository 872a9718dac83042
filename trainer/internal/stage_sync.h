// What the threads of one Trainer::Train call share to hand batches on and to
// stop together: a bounded queue between two stages, the staleness credits,
// and the first error any of them hit. Each is safe for concurrent access
// from multiple threads without external synchronization.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/status/status.h"

namespace brook::trainer::internal {

// A bounded queue between two trainer threads, closable from either side.
template <typename T>
class Channel {
 public:
  explicit Channel(size_t capacity) : capacity_(capacity) {}
  // False if the channel was closed.
  bool Put(T item) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    cv_.notify_all();
    return true;
  }
  // nullopt once closed and drained.
  std::optional<T> Take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    cv_.notify_all();
    return item;
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }

 private:
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
  bool closed_ = false;
};

// Counting semaphore with cancellation: the staleness credits.
class Credits {
 public:
  explicit Credits(int n) : free_(n) {}
  bool Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return cancelled_ || free_ > 0; });
    if (cancelled_) return false;
    --free_;
    return true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    ++free_;
    cv_.notify_all();
  }
  void Cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
  bool cancelled_ = false;
};

// The first error of several threads.
class FirstError {
 public:
  void Set(absl::Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok() && !s.ok()) status_ = std::move(s);
  }
  absl::Status Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  mutable std::mutex mu_;
  absl::Status status_;
};

}  // namespace brook::trainer::internal
