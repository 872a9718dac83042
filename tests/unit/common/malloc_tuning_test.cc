#include "common/malloc_tuning.h"

#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::ScopedEnv;

// Tests of glibc malloc itself, tuned by TuneMalloc with nothing in the
// environment overriding it.
class GlibcMallocTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::kSanitizedBuild) {
      GTEST_SKIP() << "SKIPPED: the sanitizer's allocator replaces glibc malloc (mallopt, "
                      "mallinfo2 and malloc_trim do not apply); the optimized tier runs this test";
    }
  }
  ScopedEnv tunables_{"GLIBC_TUNABLES", std::nullopt};
  ScopedEnv off_{"BROOK_MALLOC_TUNING", std::nullopt};
  ScopedEnv preload_{"LD_PRELOAD", std::nullopt};
};

TEST_F(GlibcMallocTest, RequestSizedBuffersComeFromTheHeapAndStayMappedWhenFreed) {
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

// Resident bytes of this process (/proc/self/statm).
size_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * 4096 : 0;
}

TEST_F(GlibcMallocTest, TrimHandsFreePagesInsideTheHeapBackToTheKernel) {
  ASSERT_TRUE(TuneMalloc().applied);
  // 64 buffers of 1 MiB, every other one freed: the free ones sit between
  // live ones, where the trim threshold (the heap's top only) never reaches.
  constexpr size_t kBuffer = size_t{1} << 20;
  std::vector<void*> buffers;
  for (int i = 0; i < 64; ++i) {
    buffers.push_back(std::malloc(kBuffer));
    ASSERT_NE(buffers.back(), nullptr);
    std::memset(buffers.back(), 1, kBuffer);
  }
  for (size_t i = 0; i < buffers.size(); i += 2) std::free(buffers[i]);
  const size_t before = ResidentBytes();
  ASSERT_TRUE(TrimMalloc());
  const size_t after = ResidentBytes();
  EXPECT_LT(after + 24 * kBuffer, before) << "RSS " << before << " -> " << after;
  for (size_t i = 1; i < buffers.size(); i += 2) std::free(buffers[i]);
}

TEST(MallocTuningTest, TrimLeavesAPreloadedAllocatorAlone) {
  ScopedEnv preload("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
  EXPECT_FALSE(TrimMalloc());
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
