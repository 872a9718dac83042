#include "storage/crc32c.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace brook::storage::crc32c {
namespace {

// RFC 3720 (iSCSI), appendix B.4.
TEST(Crc32cTest, MatchesRfc3720Vectors) {
  char buf[32];
  std::memset(buf, 0, sizeof(buf));
  EXPECT_EQ(0x8a9136aau, Value(buf, sizeof(buf)));
  std::memset(buf, 0xff, sizeof(buf));
  EXPECT_EQ(0x62a8ab43u, Value(buf, sizeof(buf)));
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<char>(i);
  EXPECT_EQ(0x46dd794eu, Value(buf, sizeof(buf)));
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<char>(31 - i);
  EXPECT_EQ(0x113fdb5cu, Value(buf, sizeof(buf)));
  EXPECT_EQ(0xe3069283u, Value("123456789"));
}

TEST(Crc32cTest, BothImplementationsMatchTheVectors) {
  EXPECT_EQ(0xe3069283u, ExtendPortable(0, "123456789", 9));
  EXPECT_EQ(0u, ExtendPortable(0, "", 0));
  if (!HardwareAvailable()) GTEST_SKIP() << "no SSE4.2 on this CPU";
  EXPECT_EQ(0xe3069283u, ExtendHardware(0, "123456789", 9));
  EXPECT_EQ(0u, ExtendHardware(0, "", 0));
}

TEST(Crc32cTest, ExtendComposesLikeOneCall) {
  std::string data = "hello world, this is a somewhat longer string for crc32c";
  for (size_t split = 0; split <= data.size(); ++split) {
    uint32_t prefix = Value(data.data(), split);
    EXPECT_EQ(Value(data), Extend(prefix, data.data() + split, data.size() - split)) << split;
    EXPECT_EQ(Value(data), ExtendPortable(ExtendPortable(0, data.data(), split),
                                          data.data() + split, data.size() - split));
  }
}

TEST(Crc32cTest, DifferentInputsGiveDifferentValues) {
  EXPECT_NE(Value("a"), Value("foo"));
  EXPECT_NE(Value("foo"), Value("bar"));
}

std::vector<char> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> bytes(n);
  for (char& b : bytes) b = static_cast<char>(rng());
  return bytes;
}

TEST(Crc32cTest, HardwareMatchesPortableOnEveryShortLengthAndAlignment) {
  if (!HardwareAvailable()) GTEST_SKIP() << "no SSE4.2 on this CPU";
  std::vector<char> bytes = RandomBytes(300 + 16, 1);
  for (size_t start = 0; start < 16; ++start) {
    for (size_t n = 0; n + start <= bytes.size() && n <= 300; ++n) {
      ASSERT_EQ(ExtendPortable(0x12345678u, bytes.data() + start, n),
                ExtendHardware(0x12345678u, bytes.data() + start, n))
          << "start " << start << " length " << n;
    }
  }
}

// Longer buffers take the three-stream paths (3 x 64, 3 x 256, 3 x 8192 bytes) and
// their joins; lengths around those block edges are the risky ones.
TEST(Crc32cTest, HardwareMatchesPortableOnLongBuffers) {
  if (!HardwareAvailable()) GTEST_SKIP() << "no SSE4.2 on this CPU";
  std::vector<char> bytes = RandomBytes(200000, 2);
  std::vector<size_t> lengths = {191,  192,   193,   383,   384,         385,       575,    576,
                                 577,  641,   700,   767,   768,         769,       1535,   1536,
                                 1537, 24575, 24576, 24577, 24576 + 768, 49152 + 5, 100000, 199990};
  std::mt19937 rng(3);
  for (int i = 0; i < 40; ++i) lengths.push_back(rng() % 199990);
  for (size_t n : lengths) {
    for (size_t start : {0, 1, 3, 7}) {
      ASSERT_EQ(ExtendPortable(0, bytes.data() + start, n),
                ExtendHardware(0, bytes.data() + start, n))
          << "start " << start << " length " << n;
      ASSERT_EQ(ExtendPortable(0xdeadbeefu, bytes.data() + start, n),
                Extend(0xdeadbeefu, bytes.data() + start, n));
    }
  }
}

TEST(Crc32cTest, LongBuffersOfKnownContentAgree) {
  // A large all-zero buffer checks the join tables against the portable CRC
  // on a pattern where a shift error cannot cancel out by luck.
  std::string zeros(3 * 8192 * 3 + 11, '\0');
  EXPECT_EQ(ExtendPortable(0, zeros.data(), zeros.size()), Value(zeros));
  std::string ones(zeros.size(), '\xff');
  EXPECT_EQ(ExtendPortable(0, ones.data(), ones.size()), Value(ones));
}

TEST(Crc32cTest, MaskIsNotIdentityAndUnmaskInvertsIt) {
  uint32_t crc = Value("foo");
  EXPECT_NE(crc, Mask(crc));
  EXPECT_NE(crc, Mask(Mask(crc)));
  EXPECT_EQ(crc, Unmask(Mask(crc)));
  EXPECT_EQ(crc, Unmask(Unmask(Mask(Mask(crc)))));
  std::mt19937 rng(4);
  for (int i = 0; i < 10000; ++i) {
    uint32_t v = rng();
    ASSERT_EQ(v, Unmask(Mask(v)));
  }
  for (uint32_t v : {0u, 1u, 0xffffffffu, 0xa282ead8u}) EXPECT_EQ(v, Unmask(Mask(v)));
}

}  // namespace
}  // namespace brook::storage::crc32c
