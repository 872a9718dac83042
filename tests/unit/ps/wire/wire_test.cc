#include "ps/wire/wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

namespace brook::ps::wire {
namespace {

TEST(WireTest, KeysRoundTripAsPackedLittleEndian) {
  const std::vector<uint64_t> keys = {0, 1, 0x0102030405060708ull,
                                      std::numeric_limits<uint64_t>::max()};
  std::string bytes;
  EncodeKeys(keys, &bytes);
  ASSERT_EQ(bytes.size(), 32u);
  // Little-endian: the lowest byte first.
  EXPECT_EQ(static_cast<uint8_t>(bytes[16]), 0x08);
  EXPECT_EQ(static_cast<uint8_t>(bytes[23]), 0x01);
  std::vector<uint64_t> scratch;
  auto decoded = DecodeKeys(bytes, &scratch);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(std::vector<uint64_t>(decoded->begin(), decoded->end()), keys);
}

TEST(WireTest, FloatsRoundTripBitExactly) {
  const std::vector<float> values = {0.0f, -0.0f, 1.5f, std::numeric_limits<float>::infinity(),
                                     std::numeric_limits<float>::denorm_min()};
  std::string bytes;
  EncodeFloats(values, &bytes);
  ASSERT_EQ(bytes.size(), values.size() * 4);
  // 1.5f = 0x3FC00000, little-endian.
  EXPECT_EQ(static_cast<uint8_t>(bytes[8 + 2]), 0xC0);
  EXPECT_EQ(static_cast<uint8_t>(bytes[8 + 3]), 0x3F);
  std::vector<float> scratch;
  auto decoded = DecodeFloats(bytes, &scratch, "values");
  ASSERT_TRUE(decoded.ok());
  ASSERT_EQ(decoded->size(), values.size());
  EXPECT_EQ(std::memcmp(decoded->data(), values.data(), bytes.size()), 0);
}

TEST(WireTest, LengthsNotAMultipleOfTheElementAreInvalidArgument) {
  std::vector<uint64_t> ks;
  std::vector<float> fs;
  EXPECT_EQ(DecodeKeys(std::string(7, 'a'), &ks).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeKeys(std::string(9, 'a'), &ks).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto bad = DecodeFloats(std::string(6, 'a'), &fs, "grads");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("grads"), absl::string_view::npos);
  EXPECT_TRUE(DecodeKeys("", &ks).ok());
  EXPECT_TRUE(DecodeKeys("", &ks)->empty());
}

TEST(WireTest, MisalignedBuffersAreCopiedNotMisread) {
  const std::vector<uint64_t> keys = {11, 22, 33};
  std::string bytes(1, 'x');
  bytes.append(reinterpret_cast<const char*>(keys.data()), 24);
  std::string_view view(bytes.data() + 1, 24);  // odd address
  std::vector<uint64_t> scratch;
  auto decoded = DecodeKeys(view, &scratch);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->data(), scratch.data());
  EXPECT_EQ(std::vector<uint64_t>(decoded->begin(), decoded->end()), keys);
}

TEST(WireTest, AlignedBuffersAreViewedWithoutCopy) {
  std::string bytes;
  EncodeFloats(std::vector<float>(1000, 2.0f), &bytes);
  std::vector<float> scratch;
  auto decoded = DecodeFloats(bytes, &scratch, "rows");
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(reinterpret_cast<const char*>(decoded->data()), bytes.data());
  EXPECT_TRUE(scratch.empty());
}

TEST(WireTest, MutableFloatsWritesInPlace) {
  std::string bytes;
  absl::Span<float> out = MutableFloats(&bytes, 3);
  ASSERT_EQ(bytes.size(), 12u);
  out[0] = 1;
  out[1] = 2;
  out[2] = 3;
  std::vector<float> scratch;
  auto decoded = DecodeFloats(bytes, &scratch, "rows");
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(std::vector<float>(decoded->begin(), decoded->end()), (std::vector<float>{1, 2, 3}));
}

}  // namespace
}  // namespace brook::ps::wire
