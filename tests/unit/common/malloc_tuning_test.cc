#include "common/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::ScopedEnv;

TEST(MallocTuningTest, RequestSizedBuffersComeFromTheHeapAndStayMappedWhenFreed) {
  if (testing::kSanitizedBuild) {
    GTEST_SKIP() << "SKIPPED: the sanitizer's allocator replaces glibc malloc (mallopt and "
                    "mallinfo2 do not apply); the optimized tier runs this test";
  }
  ScopedEnv tunables("GLIBC_TUNABLES", std::nullopt);
  ScopedEnv off("BROOK_MALLOC_TUNING", std::nullopt);
  ScopedEnv preload("LD_PRELOAD", std::nullopt);
  const MallocTuning t = TuneMalloc();
  ASSERT_TRUE(t.applied) << t.description;
  EXPECT_EQ(t.mmap_threshold, kMallocMmapThreshold);
  EXPECT_NE(MallocDescription().find("tuned by brook"), std::string::npos) << MallocDescription();

  // A 4 MiB buffer (a large pull reply) is not a mapping of its own: glibc's
  // default serves anything from 128 KiB up with mmap.
  const size_t mapped_before = mallinfo2().hblks;
  void* reply = std::malloc(size_t{4} << 20);
  ASSERT_NE(reply, nullptr);
  std::memset(reply, 1, size_t{4} << 20);
  EXPECT_EQ(mallinfo2().hblks, mapped_before);

  // Freed, it stays mapped at the top of the heap for the next request
  // (keepcost: what a trim could return), instead of going back to the
  // kernel past the default 128 KiB trim threshold.
  std::free(reply);
  EXPECT_GE(mallinfo2().keepcost, size_t{4} << 20);
}

TEST(MallocTuningTest, TheUsersOwnSettingsAreLeftAlone) {
  {
    ScopedEnv tunables("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1000000");
    const MallocTuning t = TuneMalloc();
    EXPECT_FALSE(t.applied);
    EXPECT_EQ(t.description, "glibc, GLIBC_TUNABLES=glibc.malloc.trim_threshold=1000000");
    EXPECT_EQ(MallocDescription(), t.description);
  }
  {
    ScopedEnv tunables("GLIBC_TUNABLES", std::nullopt);
    ScopedEnv off("BROOK_MALLOC_TUNING", "0");
    EXPECT_FALSE(TuneMalloc().applied);
  }
  {
    ScopedEnv tunables("GLIBC_TUNABLES", std::nullopt);
    ScopedEnv preload("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
    const MallocTuning t = TuneMalloc();
    EXPECT_FALSE(t.applied);
    EXPECT_NE(t.description.find("libjemalloc"), std::string::npos) << t.description;
  }
}

}  // namespace
}  // namespace brook
