#include "storage/file.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace brook::storage {
namespace {

using ::testing::HasSubstr;

TEST(LocalFileTest, MissingFileIsNotFoundNamingThePath) {
  brook::testing::TempDir dir;
  std::string path = dir.Join("does_not_exist");
  auto stream = OpenLocalInput(path);
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(absl::StatusCode::kNotFound, stream.status().code());
  EXPECT_THAT(std::string(stream.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(stream.status().message()), HasSubstr("No such file"));
}

TEST(LocalFileTest, OutputInMissingDirectoryFailsNamingThePath) {
  brook::testing::TempDir dir;
  std::string path = dir.Join("no_dir/file");
  auto stream = OpenLocalOutput(path);
  ASSERT_FALSE(stream.ok());
  EXPECT_THAT(std::string(stream.status().message()), HasSubstr(path));
}

TEST(LocalFileTest, WritesAndReadsBackSmallAndLargePieces) {
  brook::testing::TempDir dir;
  std::string path = dir.Join("data");
  std::string expected;
  {
    auto out = OpenLocalOutput(path);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(path, (*out)->name());
    for (int i = 0; i < 1000; ++i) {
      std::string piece(static_cast<size_t>(i % 37), static_cast<char>('a' + i % 26));
      if (i % 250 == 0) piece.assign(1 << 20, static_cast<char>(i));  // past the buffer
      expected += piece;
      ASSERT_TRUE((*out)->Append(piece).ok());
    }
    ASSERT_TRUE((*out)->Close().ok());
    EXPECT_EQ(absl::StatusCode::kFailedPrecondition, (*out)->Close().code());
    EXPECT_EQ(absl::StatusCode::kFailedPrecondition, (*out)->Append("x").code());
  }
  EXPECT_EQ(expected, brook::testing::ReadFileOrDie(path));

  auto in = OpenLocalInput(path);
  ASSERT_TRUE(in.ok()) << in.status();
  std::string read_back;
  char buf[4096 + 3];
  while (true) {
    auto got = (*in)->Read(buf, sizeof(buf));
    ASSERT_TRUE(got.ok()) << got.status();
    if (*got == 0) break;
    read_back.append(buf, *got);
  }
  EXPECT_EQ(expected, read_back);
  auto again = (*in)->Read(buf, sizeof(buf));  // end of stream stays the end
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(0u, *again);
}

TEST(LocalFileTest, DestroyingWithoutCloseKeepsAppendedData) {
  brook::testing::TempDir dir;
  std::string path = dir.Join("data");
  {
    auto out = OpenLocalOutput(path);
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE((*out)->Append("kept").ok());
  }
  EXPECT_EQ("kept", brook::testing::ReadFileOrDie(path));
}

TEST(LocalFileTest, ReadingADirectoryIsAnErrorNamingIt) {
  brook::testing::TempDir dir;
  auto in = OpenLocalInput(dir.path());
  if (!in.ok()) {
    EXPECT_THAT(std::string(in.status().message()), HasSubstr(dir.path()));
    return;
  }
  char buf[16];
  auto got = (*in)->Read(buf, sizeof(buf));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()), HasSubstr(dir.path()));
}

}  // namespace
}  // namespace brook::storage
