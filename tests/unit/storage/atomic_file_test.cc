#include "storage/atomic_file.h"

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace brook::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> FileNames(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(AtomicFileTest, WritesOverwritesAndReadsBack) {
  brook::testing::TempDir dir;
  std::string path = dir.Join("manifest");
  ASSERT_TRUE(WriteFileAtomically(path, "first version").ok());
  auto read = ReadFileToString(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ("first version", *read);

  // Shorter contents: the old tail must not survive.
  ASSERT_TRUE(WriteFileAtomically(path, "2nd").ok());
  read = ReadFileToString(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ("2nd", *read);
  EXPECT_THAT(FileNames(dir.path()), ElementsAre("manifest"));  // no manifest.tmp left
}

TEST(AtomicFileTest, EmptyAndLargeBinaryContentsRoundTrip) {
  brook::testing::TempDir dir;
  std::string path = dir.Join("blob");
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  auto read = ReadFileToString(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ("", *read);

  std::string blob(3 << 20, '\0');  // larger than the read buffer, with NULs
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>((i * 131) % 251);
  ASSERT_TRUE(WriteFileAtomically(path, blob).ok());
  read = ReadFileToString(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == blob);
}

TEST(AtomicFileTest, MissingFileIsNotFoundNamingThePath) {
  brook::testing::TempDir dir;
  std::string path = dir.Join("absent");
  auto read = ReadFileToString(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(absl::StatusCode::kNotFound, read.status().code());
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(path));
}

TEST(AtomicFileTest, StaleTmpFromACrashIsReplacedAndRemoved) {
  brook::testing::TempDir dir;
  std::string path = dir.Join("state");
  brook::testing::WriteFileOrDie(path, "old");
  brook::testing::WriteFileOrDie(path + ".tmp", "half-written garbage from a crash, longer");
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  EXPECT_EQ("new", brook::testing::ReadFileOrDie(path));
  EXPECT_THAT(FileNames(dir.path()), ElementsAre("state"));
}

TEST(AtomicFileTest, WriteIntoMissingDirectoryFailsAndCreatesNothing) {
  brook::testing::TempDir dir;
  std::string path = dir.Join("no_such_dir/file");
  absl::Status status = WriteFileAtomically(path, "x");
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("no_such_dir/file.tmp"));
  EXPECT_TRUE(FileNames(dir.path()).empty());
}

TEST(AtomicFileTest, SyncDirectory) {
  brook::testing::TempDir dir;
  EXPECT_TRUE(SyncDirectory(dir.path()).ok());
  absl::Status missing = SyncDirectory(dir.Join("absent"));
  EXPECT_EQ(absl::StatusCode::kNotFound, missing.code());
  EXPECT_THAT(std::string(missing.message()), HasSubstr(dir.Join("absent")));
}

TEST(AtomicFileTest, ReadingADirectoryIsAnError) {
  brook::testing::TempDir dir;
  EXPECT_FALSE(ReadFileToString(dir.path()).ok());
}

}  // namespace
}  // namespace brook::storage
