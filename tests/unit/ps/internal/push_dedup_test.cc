#include "ps/internal/push_dedup.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace brook::ps::internal {
namespace {

using Claim = PushDedup::Claim;

TEST(PushDedupTest, WindowIsRoundedToWords) {
  EXPECT_EQ(PushDedup(1).window(), 64u);
  EXPECT_EQ(PushDedup(64).window(), 64u);
  EXPECT_EQ(PushDedup(65).window(), 128u);
}

TEST(PushDedupTest, FailedApplyCanBeRetried) {
  PushDedup d(64);
  ASSERT_EQ(d.Begin(1, 5), Claim::kFresh);
  d.End(1, 5, /*applied=*/false);
  ASSERT_EQ(d.Begin(1, 5), Claim::kFresh);
  d.End(1, 5, true);
  EXPECT_EQ(d.Begin(1, 5), Claim::kDuplicate);
}

TEST(PushDedupTest, EveryInWindowSequenceIsRememberedExactly) {
  PushDedup d(128);
  for (uint64_t s = 1000; s < 1128; s += 2) {
    ASSERT_EQ(d.Begin(3, s), Claim::kFresh);
    d.End(3, s, true);
  }
  for (uint64_t s = 1001; s < 1128; ++s) {
    ASSERT_EQ(d.Begin(3, s), s % 2 == 0 ? Claim::kDuplicate : Claim::kFresh) << s;
    if (s % 2 == 1) d.End(3, s, true);
  }
  // Max seen 1127, window 128: 1000 is the oldest remembered, 999 too old.
  EXPECT_EQ(d.Begin(3, 1000), Claim::kDuplicate);
  EXPECT_EQ(d.Begin(3, 999), Claim::kTooOld);
}

TEST(PushDedupTest, DuplicateOfInFlightPushWaitsForItsOutcome) {
  for (bool applied : {true, false}) {
    PushDedup d(64);
    ASSERT_EQ(d.Begin(9, 1), Claim::kFresh);
    std::atomic<int> result{-1};
    std::thread dup([&] {
      const Claim c = d.Begin(9, 1);
      result = static_cast<int>(c);
      if (c == Claim::kFresh) d.End(9, 1, true);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(result.load(), -1);  // still waiting
    d.End(9, 1, applied);
    dup.join();
    // Original applied: the retry is a duplicate. Original failed: the retry
    // applies instead.
    EXPECT_EQ(result.load(), static_cast<int>(applied ? Claim::kDuplicate : Claim::kFresh));
  }
}

}  // namespace
}  // namespace brook::ps::internal
