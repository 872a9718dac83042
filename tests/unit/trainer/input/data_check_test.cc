#include "trainer/input/data_check.h"

#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"
#include "tests/unit/trainer/input/pipeline_test_util.h"

namespace brook::input {
namespace {

using ::testing::HasSubstr;
using testing::IdSpec;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using testing::WriteIdFile;
using testing::WriteRecords;

class DataCheckTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_.Join(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  brook::testing::TempDir dir_;
};

TEST_F(DataCheckTest, FilesThatFitTheSpecPassWithoutWarnings) {
  WriteIdFile(dir_.Join("a.tfrecord"), 0, 50);
  WriteIdFile(dir_.Join("b.tfrecord"), 1, 50);
  absl::StatusOr<DataCheckResult> r = CheckData(
      IdSpec(), {{"data.train[0] \"*\"", {dir_.Join("a.tfrecord"), dir_.Join("b.tfrecord")}}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->warnings, IsEmpty());
  EXPECT_EQ(r->files_checked, 2u);
  EXPECT_EQ(r->records_sampled, 50u);  // the first file of the list only
}

TEST_F(DataCheckTest, AYamlFileAGlobPickedUpIsNotATfrecordAndTheErrorSaysSo) {
  WriteIdFile(dir_.Join("train-0.tfrecord"), 0, 5);
  const std::string yaml = Write("feature_spec.yaml", "label: {name: label, type: float}\n");
  absl::StatusOr<DataCheckResult> r =
      CheckData(IdSpec(), {{"data.train[0] \"d/*\"", {yaml, dir_.Join("train-0.tfrecord")}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("data.train[0] \"d/*\" matches " + yaml));
  EXPECT_THAT(r.status().message(), HasSubstr("is not a TFRecord file"));
  EXPECT_THAT(r.status().message(), HasSubstr("starts with text (\"labe"));
  EXPECT_THAT(r.status().message(), HasSubstr("narrow it"));
}

TEST_F(DataCheckTest, AGzipFileReadUncompressedSaysToSetTheCompression) {
  WriteIdFile(dir_.Join("train.data"), 0, 5, storage::Compression::kGzip);
  absl::StatusOr<DataCheckResult> r =
      CheckData(IdSpec(), {{"data.train[0]", {dir_.Join("train.data")}}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("starts like a GZIP file"));
  EXPECT_THAT(r.status().message(), HasSubstr("data.compression: gzip"));
  // Told, it passes.
  r = CheckData(IdSpec(), {{"data.train[0]", {dir_.Join("train.data")}}},
                {.compression = storage::Compression::kGzip});
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST_F(DataCheckTest, AnEmptyFileIsATfrecordWithNoRecords) {
  const std::string empty = Write("empty.tfrecord", "");
  absl::StatusOr<DataCheckResult> r = CheckData(IdSpec(), {{"data.eval[0]", {empty}}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->records_sampled, 0u);
}

TEST_F(DataCheckTest, AFeatureAbsentFromTheDataIsAnErrorUnderOnMissingError) {
  WriteIdFile(dir_.Join("a.tfrecord"), 0, 20);
  FeatureSpec spec = IdSpec();
  spec.on_missing = MissingPolicy::kError;
  spec.features.push_back({.name = "C1", .type = FeatureType::kFloat});
  absl::StatusOr<DataCheckResult> r =
      CheckData(spec, {{"data.train[0] \"a*\"", {dir_.Join("a.tfrecord")}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("feature \"C1\""));
  EXPECT_THAT(r.status().message(), HasSubstr("absent from 20 of the first 20 records (100.0%)"));
  EXPECT_THAT(r.status().message(), HasSubstr("is the name right?"));
}

TEST_F(DataCheckTest, AFeatureAbsentUnderOnMissingDefaultIsAWarningWithItsAbsenceRate) {
  // Every other record lacks "extra"; "ghost" is in none.
  datatools::ExampleBuilder b;
  std::vector<std::string> records;
  for (int i = 0; i < 10; ++i) {
    b.Clear();
    const float label = static_cast<float>(i % 2);
    b.AddFloats("label", std::span<const float>(&label, 1));
    if (i % 2 == 0) b.AddFloats("extra", std::span<const float>(&label, 1));
    records.emplace_back(b.Serialize());
  }
  WriteRecords(dir_.Join("a.tfrecord"), records);
  FeatureSpec spec;
  spec.label_name = "label";
  spec.features.push_back({.name = "extra", .type = FeatureType::kFloat});
  spec.features.push_back({.name = "ghost", .type = FeatureType::kInt64, .default_value = -1});
  absl::StatusOr<DataCheckResult> r =
      CheckData(spec, {{"data.train[0]", {dir_.Join("a.tfrecord")}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_THAT(r->warnings, SizeIs(2));
  EXPECT_THAT(r->warnings[0],
              HasSubstr("\"extra\" is absent from 5 of the first 10 records (50.0%)"));
  EXPECT_THAT(r->warnings[1], HasSubstr("\"ghost\" is absent from all 10 of the first 10 records"));
  EXPECT_THAT(r->warnings[1], HasSubstr("its default -1"));
}

TEST_F(DataCheckTest, ARecordOfTheWrongTypeIsAnErrorNamingFileRecordAndTheOnCorruptOption) {
  WriteIdFile(dir_.Join("a.tfrecord"), 0, 10);
  FeatureSpec spec = IdSpec();
  spec.features[0].type = FeatureType::kFloat;  // "id" is an int64_list in the data
  absl::StatusOr<DataCheckResult> r =
      CheckData(spec, {{"data.train[0]", {dir_.Join("a.tfrecord")}}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(dir_.Join("a.tfrecord") + " record 0"));
  EXPECT_THAT(r.status().message(), HasSubstr("\"id\""));
  EXPECT_THAT(r.status().message(), HasSubstr("10 of the first 10 records do not parse"));
  EXPECT_THAT(r.status().message(), HasSubstr("data.on_corrupt: skip"));
  // Under skip they are a warning.
  r = CheckData(spec, {{"data.train[0]", {dir_.Join("a.tfrecord")}}}, {.skip_corrupt = true});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_THAT(r->warnings, SizeIs(1));
  EXPECT_THAT(r->warnings[0], HasSubstr("will be skipped"));
}

TEST_F(DataCheckTest, CorruptFramingAfterTheFirstRecordIsAnErrorUnlessSkipped) {
  WriteIdFile(dir_.Join("a.tfrecord"), 0, 10);
  std::string bytes;
  {
    std::ifstream in(dir_.Join("a.tfrecord"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] ^= 0x55;
  const std::string bad = Write("bad.tfrecord", bytes);
  absl::StatusOr<DataCheckResult> r = CheckData(IdSpec(), {{"data.train[0]", {bad}}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(bad));
  EXPECT_THAT(r.status().message(), HasSubstr("offset"));
  r = CheckData(IdSpec(), {{"data.train[0]", {bad}}}, {.skip_corrupt = true});
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST_F(DataCheckTest, AMissingFileIsNotFoundNamingIt) {
  absl::StatusOr<DataCheckResult> r =
      CheckData(IdSpec(), {{"data.train[0]", {dir_.Join("gone.tfrecord")}}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(dir_.Join("gone.tfrecord")));
}

}  // namespace
}  // namespace brook::input
