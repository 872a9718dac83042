#include "common/part_runner.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace brook {
namespace {

// The ranges one Run() handed out, and the threads that ran them.
struct Calls {
  std::mutex mu;
  std::vector<std::pair<size_t, size_t>> ranges;
  std::set<std::thread::id> threads;

  PartRunner::Part Recorder() { return PartRunner::Part(record_); }
  // Sorted ranges; they must tile [0, n) exactly.
  void ExpectTiles(size_t n) {
    std::sort(ranges.begin(), ranges.end());
    size_t at = 0;
    for (const auto& [begin, end] : ranges) {
      EXPECT_EQ(begin, at) << "gap or overlap";
      EXPECT_LT(begin, end);
      at = end;
    }
    EXPECT_EQ(at, n);
  }

 private:
  std::function<absl::Status(size_t, size_t)> record_ = [this](size_t begin, size_t end) {
    std::lock_guard lock(mu);
    ranges.emplace_back(begin, end);
    threads.insert(std::this_thread::get_id());
    return absl::OkStatus();
  };
};

TEST(PartRunnerTest, WithoutHelpersTheWholeRangeRunsInlineOnce) {
  PartRunner runner(0);
  Calls calls;
  ASSERT_TRUE(runner.Run(10000, 100, calls.Recorder()).ok());
  ASSERT_EQ(calls.ranges.size(), 1u);
  EXPECT_EQ(calls.ranges[0], std::make_pair(size_t{0}, size_t{10000}));
  EXPECT_EQ(*calls.threads.begin(), std::this_thread::get_id());
  EXPECT_EQ(runner.split_runs(), 0u);
}

TEST(PartRunnerTest, IdleHelpersTakeContiguousPartsThatTileTheRange) {
  PartRunner runner(3);
  for (size_t n : {4000u, 4001u, 4099u, 9999u}) {
    Calls calls;
    ASSERT_TRUE(runner.Run(n, 1000, calls.Recorder()).ok());
    calls.ExpectTiles(n);
    // Helpers finish their part and mark themselves idle just before the
    // caller is released; all three are claimable or about to be, so at
    // least two parts ran, each on its own thread.
    EXPECT_GE(calls.ranges.size(), 2u) << n;
    EXPECT_LE(calls.ranges.size(), 4u) << n;
    EXPECT_EQ(calls.threads.size(), calls.ranges.size()) << n;
    EXPECT_TRUE(calls.threads.count(std::this_thread::get_id())) << "the caller runs a part too";
  }
  EXPECT_GE(runner.split_runs(), 1u);
  EXPECT_GE(runner.helper_parts(), runner.split_runs());
}

TEST(PartRunnerTest, PartsAreNeverShorterThanMinPart) {
  PartRunner runner(3);
  Calls small;
  ASSERT_TRUE(runner.Run(1999, 1000, small.Recorder()).ok());
  ASSERT_EQ(small.ranges.size(), 1u) << "1999 items do not make two parts of 1000";
  Calls two;
  ASSERT_TRUE(runner.Run(2500, 1000, two.Recorder()).ok());
  two.ExpectTiles(2500);
  EXPECT_LE(two.ranges.size(), 2u);
  for (const auto& [begin, end] : two.ranges) EXPECT_GE(end - begin, 1000u);
}

TEST(PartRunnerTest, AFailedPartsStatusIsReturnedAfterEveryPartFinished) {
  PartRunner runner(3);
  std::mutex mu;
  size_t covered = 0;
  absl::Status st = runner.Run(4000, 1000, [&](size_t begin, size_t end) {
    {
      std::lock_guard lock(mu);
      covered += end - begin;
    }
    if (begin == 0) return absl::InvalidArgumentError("first part");
    if (end == 4000) return absl::NotFoundError("last part");
    return absl::OkStatus();
  });
  EXPECT_EQ(covered, 4000u) << "every part ran before Run returned";
  // The first failure in range order: the part starting at 0.
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
}

// A Run never waits behind another Run's parts, and concurrent requests
// already fill the cores: while one Run is in progress (its part stuck on
// the helper), a second one runs whole on its caller, with helpers free.
TEST(PartRunnerTest, WhileAnotherRunIsInProgressARunGoesInline) {
  PartRunner runner(3);
  absl::Notification helper_started, release;
  std::thread first([&] {
    const std::thread::id caller = std::this_thread::get_id();
    ASSERT_TRUE(runner
                    .Run(2000, 1000,
                         [&](size_t, size_t) {
                           if (std::this_thread::get_id() != caller) {
                             helper_started.Notify();
                             release.WaitForNotification();
                           }
                           return absl::OkStatus();
                         })
                    .ok());
  });
  helper_started.WaitForNotification();
  Calls calls;
  ASSERT_TRUE(runner.Run(8000, 1000, calls.Recorder()).ok());  // returns: nobody waits
  ASSERT_EQ(calls.ranges.size(), 1u);
  EXPECT_EQ(*calls.threads.begin(), std::this_thread::get_id());
  release.Notify();
  first.join();
}

TEST(PartRunnerTest, ManyCallersAtOnceEachGetTheirWholeRange) {
  PartRunner runner(2);
  constexpr int kCallers = 6, kRuns = 200;
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < kRuns; ++r) {
        const size_t n = 1000 + static_cast<size_t>(c * 37 + r);
        std::vector<int> hits(n, 0);
        std::mutex mu;
        absl::Status st = runner.Run(n, 250, [&](size_t begin, size_t end) {
          std::lock_guard lock(mu);
          for (size_t i = begin; i < end; ++i) ++hits[i];
          return absl::OkStatus();
        });
        if (!st.ok() || std::any_of(hits.begin(), hits.end(), [](int h) { return h != 1; })) {
          ++bad;
        }
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0) << "some item was run twice or never";
}

}  // namespace
}  // namespace brook
