#include "common/local_path.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace brook {
namespace {

using ::testing::HasSubstr;

TEST(LocalPathTest, ObjectStoreUrlsAreRefusedNamingWhereTheyCameFrom) {
  for (const char* url : {"s3://bucket/train-*.tfrecord", "gs://b/x", "hdfs://nn:8020/d",
                          "https://example.com/data", "HTTP://x/y"}) {
    const absl::Status s = CheckLocalPath(url, "--data");
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << url;
    EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("--data: \"", url, "\": ")))
        << url;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("URLs are not supported yet: mount the data and give a path"));
  }
  EXPECT_EQ(NotLocalPathReason("s3://b/k"),
            "\"s3://b/k\": s3:// URLs are not supported yet: mount the data and give a path");
}

TEST(LocalPathTest, PathsAndGlobsPass) {
  for (const char* path :
       {"/data/train-*.tfrecord", "data/x", "relative", "", "a:b/c", "/mnt/s3:/x", "./://odd"}) {
    EXPECT_TRUE(CheckLocalPath(path, "--data").ok()) << path;
  }
  EXPECT_EQ(UrlScheme("gs://b"), "gs");
  EXPECT_EQ(UrlScheme("/x/gs://b"), "");
}

}  // namespace
}  // namespace brook
