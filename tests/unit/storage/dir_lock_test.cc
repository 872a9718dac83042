#include "storage/dir_lock.h"

#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace brook::storage {
namespace {

using ::testing::HasSubstr;

TEST(DirLockTest, ASecondLockOfTheDirIsRefusedNamingTheHolderUntilTheFirstGoes) {
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<DirLock>> first = DirLock::Acquire(dir.path());
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<DirLock>> second = DirLock::Acquire(dir.path());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(dir.path() + " is in use by another process"));
  EXPECT_THAT(second.status().message(), HasSubstr(absl::StrCat("(pid ", ::getpid(), ")")));
  first->reset();
  EXPECT_TRUE(DirLock::Acquire(dir.path()).ok());
}

TEST(DirLockTest, ADirThatCannotHoldALockFileIsAnErrorNamingIt) {
  absl::StatusOr<std::unique_ptr<DirLock>> lock = DirLock::Acquire("/nonexistent-brook-dir");
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(lock.status().message(), HasSubstr("/nonexistent-brook-dir/LOCK"));
}

}  // namespace
}  // namespace brook::storage
