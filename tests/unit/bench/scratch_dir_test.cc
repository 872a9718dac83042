#include <filesystem>
#include <fstream>
#include <string>

#include "bench/bench_util.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace brook::bench {
namespace {

namespace fs = std::filesystem;

TEST(ScratchDirTest, MakesAMissingParentWithItsParents) {
  brook::testing::TempDir root;
  const std::string parent = root.Join("not/there/yet");
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
}

TEST(ScratchDirTest, AParentThatIsAFileIsAnErrorNamingIt) {
  brook::testing::TempDir root;
  const std::string file = root.Join("a-file");
  std::ofstream(file) << "x";
  absl::StatusOr<ScratchDir> dir = ScratchDir::Make(file + "/sub", "bench");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find(file + "/sub"), std::string::npos) << dir.status();
}

}  // namespace
}  // namespace brook::bench
