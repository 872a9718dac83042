// UsableCpus: cgroup quota parsing, the affinity cap (a real
// sched_setaffinity on a thread of this test), and the cached value.
#include "common/usable_cpus.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

namespace brook {
namespace {

TEST(UsableCpusTest, CgroupV2CpuMax) {
  EXPECT_EQ(CpuLimitFromCgroupV2("max 100000\n"), std::nullopt);
  EXPECT_EQ(CpuLimitFromCgroupV2("250000 100000\n"), 2.5);
  EXPECT_EQ(CpuLimitFromCgroupV2("50000 100000"), 0.5);
  EXPECT_EQ(CpuLimitFromCgroupV2(""), std::nullopt);  // no cpu controller here
  EXPECT_EQ(CpuLimitFromCgroupV2("lots 100000"), std::nullopt);
  EXPECT_EQ(CpuLimitFromCgroupV2("100000"), std::nullopt);
  EXPECT_EQ(CpuLimitFromCgroupV2("100000 0"), std::nullopt);
}

TEST(UsableCpusTest, CgroupV1Quota) {
  EXPECT_EQ(CpuLimitFromCgroupV1("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(CpuLimitFromCgroupV1("400000\n", "100000\n"), 4.0);
  EXPECT_EQ(CpuLimitFromCgroupV1("", ""), std::nullopt);
  EXPECT_EQ(CpuLimitFromCgroupV1("x", "100000"), std::nullopt);
}

TEST(UsableCpusTest, QuotaCapsAffinityRoundedUp) {
  EXPECT_EQ(UsableCpusFrom(64, 4.0), 4);  // a 4-CPU pod on a 64-core node
  EXPECT_EQ(UsableCpusFrom(64, 2.5), 3);
  EXPECT_EQ(UsableCpusFrom(64, 0.5), 1);
  EXPECT_EQ(UsableCpusFrom(2, 8.0), 2);  // a quota above the CPUs allowed
  EXPECT_EQ(UsableCpusFrom(16, std::nullopt), 16);
  EXPECT_EQ(UsableCpusFrom(0, std::nullopt), 1);
}

TEST(UsableCpusTest, ThreadPinnedToOneCpuCountsOne) {
  int pinned = -1;
  std::thread t([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    int first = 0;
    while (!CPU_ISSET(first, &set)) ++first;
    CPU_ZERO(&set);
    CPU_SET(first, &set);
    ASSERT_EQ(sched_setaffinity(0, sizeof(set), &set), 0);
    pinned = ReadUsableCpus();
  });
  t.join();
  EXPECT_EQ(pinned, 1);
}

TEST(UsableCpusTest, ProcessValueIsWithinTheMachine) {
  const int cpus = UsableCpus();
  EXPECT_GE(cpus, 1);
  EXPECT_LE(cpus, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_EQ(UsableCpus(), cpus);  // cached
}

}  // namespace
}  // namespace brook
