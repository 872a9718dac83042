// A one-shot stop flag a polling thread sleeps on: absl::Notification's
// role, on std::mutex so ThreadSanitizer sees it (Debian's abseil is not
// instrumented; docs/decisions.md).
#pragma once

#include <condition_variable>
#include <mutex>

#include "absl/time/time.h"

namespace brook::serving {

class StopSignal {
 public:
  void Notify() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
  }
  // Sleeps up to `timeout`; true once Notify() was called.
  bool WaitFor(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] { return stopped_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
};

}  // namespace brook::serving
