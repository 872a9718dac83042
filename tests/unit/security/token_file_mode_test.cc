// security::TokenFileModeWarning: a token file others can read is named,
// with its mode and the chmod that fixes it.
#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "security/bearer_token.h"
#include "tests/testing/test_util.h"

namespace brook::security {
namespace {

using ::testing::HasSubstr;

TEST(TokenFileModeTest, GroupOrOtherReadableIsWarnedAboutWithTheFix) {
  testing::TempDir dir;
  const std::string path = dir.Join("token");
  testing::WriteFileOrDie(path, "0123456789abcdef0123\n");
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  EXPECT_EQ(TokenFileModeWarning(path), "");
  ASSERT_EQ(chmod(path.c_str(), 0400), 0);
  EXPECT_EQ(TokenFileModeWarning(path), "");

  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  const std::string both = TokenFileModeWarning(path);
  EXPECT_THAT(both,
              HasSubstr("token file " + path + " is readable by group and others (mode 0644)"));
  EXPECT_THAT(both, HasSubstr("chmod 600 " + path));
  ASSERT_EQ(chmod(path.c_str(), 0640), 0);
  EXPECT_THAT(TokenFileModeWarning(path), HasSubstr("readable by its group (mode 0640)"));
  ASSERT_EQ(chmod(path.c_str(), 0604), 0);
  EXPECT_THAT(TokenFileModeWarning(path), HasSubstr("readable by others (mode 0604)"));
  // The token is still read: a warning, not a refusal.
  EXPECT_TRUE(ReadTokenFile(path).ok());
  // A missing file is ReadTokenFile's to report.
  EXPECT_EQ(TokenFileModeWarning(dir.Join("missing")), "");
}

}  // namespace
}  // namespace brook::security
