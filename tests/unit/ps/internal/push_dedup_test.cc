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

TEST(PushDedupTest, FencedClientIsRefusedEverySequenceOthersAreNot) {
  PushDedup d(64);
  ASSERT_EQ(d.Begin(5, 1), Claim::kFresh);
  d.End(5, 1, true);
  EXPECT_FALSE(d.IsFenced(5));
  EXPECT_FALSE(d.IsFenced(6));  // never seen: not fenced, and not created
  EXPECT_TRUE(d.Fence(5));
  EXPECT_FALSE(d.Fence(5));  // once
  EXPECT_TRUE(d.IsFenced(5));
  EXPECT_EQ(d.fenced_clients(), 1u);
  // New, retried and ancient sequences alike.
  EXPECT_EQ(d.Begin(5, 2), Claim::kFenced);
  EXPECT_EQ(d.Begin(5, 1), Claim::kFenced);
  EXPECT_EQ(d.Begin(5, 1u << 20), Claim::kFenced);
  EXPECT_EQ(d.fenced_refusals(), 3u);
  // A client never seen can be fenced before its first push.
  EXPECT_TRUE(d.Fence(8));
  EXPECT_EQ(d.Begin(8, 1), Claim::kFenced);
  ASSERT_EQ(d.Begin(6, 1), Claim::kFresh);
  d.End(6, 1, true);
  EXPECT_EQ(d.Begin(6, 1), Claim::kDuplicate);
}

TEST(PushDedupTest, FenceDuringAnApplyLetsItSettleAndRefusesItsWaitingRetry) {
  PushDedup d(64);
  ASSERT_EQ(d.Begin(4, 10), Claim::kFresh);  // being applied
  std::atomic<int> retry{-1};
  std::thread dup([&] { retry = static_cast<int>(d.Begin(4, 10)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(retry.load(), -1);  // waits for the original
  EXPECT_TRUE(d.Fence(4));
  dup.join();
  EXPECT_EQ(retry.load(), static_cast<int>(Claim::kFenced));
  d.End(4, 10, /*applied=*/false);  // the original settles after the fence
  EXPECT_EQ(d.Begin(4, 10), Claim::kFenced);
}

// Part `part` of step `step` of a stream.
uint64_t Part(uint64_t step, uint64_t part) { return step << kStreamPartBits | part; }

TEST(PushDedupTest, StreamPartsApplyOnceWhicheverClientSendsThem) {
  PushDedup d(64);
  // Holder 1 (client 11) pushes step 3's parts 0 and 1 of stream 500.
  ASSERT_EQ(d.BeginStream(11, 500, Part(3, 0)), Claim::kFresh);
  d.EndStream(500, Part(3, 0), true);
  ASSERT_EQ(d.BeginStream(11, 500, Part(3, 1)), Claim::kFresh);
  d.EndStream(500, Part(3, 1), true);
  // Holder 2 (client 22) re-pushes step 3: what holder 1 applied is a
  // duplicate, a part it never sent is fresh.
  EXPECT_EQ(d.BeginStream(22, 500, Part(3, 0)), Claim::kDuplicate);
  EXPECT_EQ(d.BeginStream(22, 500, Part(3, 1)), Claim::kDuplicate);
  ASSERT_EQ(d.BeginStream(22, 500, Part(3, 2)), Claim::kFresh);
  d.EndStream(500, Part(3, 2), true);
  // Step 4 proves every part of step 3 applied: even a part of step 3 never
  // seen here (it had none on this shard) is a duplicate now.
  ASSERT_EQ(d.BeginStream(22, 500, Part(4, 0)), Claim::kFresh);
  d.EndStream(500, Part(4, 0), true);
  EXPECT_EQ(d.BeginStream(11, 500, Part(3, 7)), Claim::kDuplicate);
  EXPECT_EQ(d.BeginStream(11, 500, Part(0, 0)), Claim::kDuplicate);
  // Other streams, and the clients' own sequences, are separate.
  EXPECT_EQ(d.BeginStream(22, 501, Part(3, 0)), Claim::kFresh);
  d.EndStream(501, Part(3, 0), true);
  EXPECT_EQ(d.Begin(11, Part(3, 0)), Claim::kFresh);
  d.End(11, Part(3, 0), true);
  EXPECT_EQ(d.streams(), 2u);
}

TEST(PushDedupTest, FailedStreamPartCanBeRetriedAndAWaitingCopyGetsTheOutcome) {
  PushDedup d(64);
  ASSERT_EQ(d.BeginStream(1, 9, Part(5, 2)), Claim::kFresh);
  d.EndStream(9, Part(5, 2), /*applied=*/false);
  ASSERT_EQ(d.BeginStream(2, 9, Part(5, 2)), Claim::kFresh);  // in flight
  std::atomic<int> copy{-1};
  std::thread other([&] { copy = static_cast<int>(d.BeginStream(1, 9, Part(5, 2))); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(copy.load(), -1);  // waits for the holder applying it
  d.EndStream(9, Part(5, 2), /*applied=*/true);
  other.join();
  EXPECT_EQ(copy.load(), static_cast<int>(Claim::kDuplicate));
}

TEST(PushDedupTest, FencedClientIsRefusedInAStreamItsSuccessorIsNot) {
  PushDedup d(64);
  ASSERT_EQ(d.BeginStream(7, 40, Part(1, 0)), Claim::kFresh);
  d.EndStream(40, Part(1, 0), true);
  EXPECT_TRUE(d.Fence(7));
  EXPECT_EQ(d.BeginStream(7, 40, Part(2, 0)), Claim::kFenced);
  EXPECT_EQ(d.fenced_refusals(), 1u);
  EXPECT_EQ(d.BeginStream(8, 40, Part(1, 0)), Claim::kDuplicate);
  EXPECT_EQ(d.BeginStream(8, 40, Part(2, 0)), Claim::kFresh);
  d.EndStream(40, Part(2, 0), true);
  // Client 0 (WAL replay) is never fenced.
  EXPECT_EQ(d.BeginStream(0, 40, Part(2, 0)), Claim::kDuplicate);
}

}  // namespace
}  // namespace brook::ps::internal
