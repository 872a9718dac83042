#include <unistd.h>
#include <filesystem>

#include <fstream>
#include <string>

#include "bench/bench_util.h"
#include "gtest/gtest.h"

namespace brook::bench {
namespace {

namespace fs = std::filesystem;

std::string TestRoot() {
  return (fs::path(testing::TempDir()) / ("scratch-dir-" + std::to_string(getpid()))).string();
}

TEST(ScratchDirTest, MakesAMissingParentWithItsParents) {
  const std::string root = TestRoot();
  fs::remove_all(root);
  const std::string parent = root + "/not/there/yet";
  std::string made;
  {
    absl::StatusOr<ScratchDir> dir = ScratchDir::Make(parent, "bench");
    ASSERT_TRUE(dir.ok()) << dir.status();
    made = dir->path();
    EXPECT_EQ(fs::path(made).parent_path(), fs::path(parent));
    EXPECT_TRUE(fs::is_directory(made));
  }
  EXPECT_FALSE(fs::exists(made));  // the scratch dir goes, the parent made for it stays
  EXPECT_TRUE(fs::is_directory(parent));
  fs::remove_all(root);
}

TEST(ScratchDirTest, AParentThatIsAFileIsAnErrorNamingIt) {
  const std::string root = TestRoot();
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string file = root + "/a-file";
  std::ofstream(file) << "x";
  absl::StatusOr<ScratchDir> dir = ScratchDir::Make(file + "/sub", "bench");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find(file + "/sub"), std::string::npos) << dir.status();
  fs::remove_all(root);
}

}  // namespace
}  // namespace brook::bench
