// TuneMutexes turns abseil's Mutex deadlock detector off, unless
// BROOK_MUTEX_DEADLOCK_DETECTION=1 keeps it. Each check starts with the
// detector set to abort, so a TuneMutexes that did nothing would fail it.
#include "common/mutex_tuning.h"

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

// Takes a then b, later b then a: the order inversion the detector reports
// as a potential deadlock (no thread ever waits).
void LockInBothOrders() {
  absl::Mutex a, b;
  {
    absl::MutexLock la(&a);
    absl::MutexLock lb(&b);
  }
  {
    absl::MutexLock lb(&b);
    absl::MutexLock la(&a);
  }
}

class MutexTuningTest : public ::testing::Test {
 protected:
  void SetUp() override { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kAbort); }
  // The rest of the binary runs with the detector on, as Debian's abseil
  // (built without NDEBUG) has it by default.
  void TearDown() override { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kAbort); }
};

TEST_F(MutexTuningTest, TheDetectorAbortsOnAnInvertedLockOrder) {
  // What the other tests rely on: the detector is live in this build.
  EXPECT_DEATH(LockInBothOrders(), "deadlock");
}

TEST_F(MutexTuningTest, TunedProcessesTakeLocksInAnyOrder) {
  testing::ScopedEnv env("BROOK_MUTEX_DEADLOCK_DETECTION", std::nullopt);
  EXPECT_EQ(TuneMutexes(), "abseil Mutex deadlock detection: off");
  LockInBothOrders();
}

TEST_F(MutexTuningTest, TheEnvironmentKeepsTheDetector) {
  testing::ScopedEnv env("BROOK_MUTEX_DEADLOCK_DETECTION", "1");
  EXPECT_NE(TuneMutexes().find("BROOK_MUTEX_DEADLOCK_DETECTION=1"), std::string::npos);
  EXPECT_DEATH(LockInBothOrders(), "deadlock");
}

}  // namespace
}  // namespace brook
