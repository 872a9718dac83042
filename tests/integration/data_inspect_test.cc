// `brook data inspect` on the TensorFlow-written Criteo sample and on damaged
// copies of it, through the real binary.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::RunCommand;

std::string CriteoSample() {
  return testing::SharedDataDir() + "/tfrecord/criteo_sample.te.tfrecords";
}

TEST(DataInspectTest, CountsRecordsAndListsFeaturesOfTheTensorFlowFile) {
  auto r = RunCommand({BrookBinary(), "data", "inspect", CriteoSample()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("40 records"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("CRCs ok"), std::string::npos) << r.output;

  auto j = RunCommand({BrookBinary(), "data", "inspect", "--json", CriteoSample()});
  ASSERT_EQ(j.exit_code, 0) << j.output;
  nlohmann::json out = nlohmann::json::parse(j.output);
  EXPECT_EQ(out["records"], 40);
  EXPECT_EQ(out["features"].size(), 13u + 26u + 1u);
  EXPECT_EQ(out["features"]["I1"]["kinds"]["float"], 40);
  EXPECT_EQ(out["features"]["C26"]["kinds"]["int64"], 40);
  EXPECT_EQ(out["features"]["label"]["values"], 40);
  EXPECT_EQ(out["features"]["C1"]["max_values"], 1);
}

TEST(DataInspectTest, CorruptCopyFailsNamingFileAndOffsetOrIsSkippedAndCounted) {
  testing::TempDir dir;
  std::string bytes = testing::ReadFileOrDie(CriteoSample());
  // The first record is 591 bytes: its frame spans [0, 607). Damage a data
  // byte of the second record, whose frame starts at 607.
  bytes[607 + 12 + 5] ^= 0x20;
  const std::string path = dir.Join("damaged.tfrecords");
  testing::WriteFileOrDie(path, bytes);

  auto r = RunCommand({BrookBinary(), "data", "inspect", path});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(path), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("offset 607"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("data CRC mismatch"), std::string::npos) << r.output;

  auto s = RunCommand({BrookBinary(), "data", "inspect", "--skip-corrupt", "--json", path});
  ASSERT_EQ(s.exit_code, 0) << s.output;
  nlohmann::json out = nlohmann::json::parse(s.output);
  EXPECT_EQ(out["records"], 39);
  EXPECT_EQ(out["files"][0]["skipped_regions"], 1);
}

TEST(DataInspectTest, MissingFileAndBadCompressionAreUsageErrors) {
  auto missing = RunCommand({BrookBinary(), "data", "inspect", "/nonexistent/x.tfrecord"});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("/nonexistent/x.tfrecord"), std::string::npos);
  auto bad =
      RunCommand({BrookBinary(), "data", "inspect", "--compression", "LZMA", CriteoSample()});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("LZMA"), std::string::npos) << bad.output;
}

TEST(DataInspectTest, GzipFileIsReadByItsSuffix) {
  testing::TempDir dir;
  const std::string gz = dir.Join("sample.tfrecord.gz");
  auto zip = RunCommand({"/bin/sh", "-c", "gzip -c '" + CriteoSample() + "' > '" + gz + "'"});
  ASSERT_EQ(zip.exit_code, 0) << zip.output;
  auto r = RunCommand({BrookBinary(), "data", "inspect", gz});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("40 records"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace brook
