#include "common/mutex_tuning.h"

#include <cstdlib>
#include <cstring>

#include "absl/synchronization/mutex.h"

namespace brook {

std::string TuneMutexes() {
  if (const char* keep = std::getenv("BROOK_MUTEX_DEADLOCK_DETECTION");
      keep != nullptr && std::strcmp(keep, "1") == 0) {
    return "abseil Mutex deadlock detection: abseil's default (BROOK_MUTEX_DEADLOCK_DETECTION=1)";
  }
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return "abseil Mutex deadlock detection: off";
}

}  // namespace brook
