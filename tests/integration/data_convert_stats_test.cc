// Runs the real `brook` binary: `data convert` on UCI Adult and on Criteo-
// layout text, then `data stats` to infer a schema from the train split and
// `--check` the test split and doctored data against it.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "features/feature_spec.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::CommandResult;
using ::testing::HasSubstr;
using testing::RunCommand;

std::string AdultDir() { return testing::SharedDataDir() + "/adult"; }

CommandResult Brook(std::vector<std::string> args) {
  args.insert(args.begin(), BrookBinary());
  return RunCommand(args, 300);
}

std::vector<std::string> ShardFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tfrecord") != std::string::npos) {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<tf::Example> ReadShard(const std::string& path) {
  storage::TFRecordReaderOptions o;
  o.compression = storage::CompressionFromPath(path);
  auto reader = storage::TFRecordReader::Open(path, o);
  EXPECT_TRUE(reader.ok()) << reader.status();
  std::vector<tf::Example> out;
  if (!reader.ok()) return out;
  std::string_view rec;
  while (true) {
    auto more = (*reader)->Next(&rec);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    tf::Example ex;
    EXPECT_TRUE(ex.ParseFromArray(rec.data(), static_cast<int>(rec.size())));
    out.push_back(std::move(ex));
  }
  return out;
}

const tf::Feature* Get(const tf::Example& ex, const std::string& name) {
  auto it = ex.features().feature().find(name);
  return it == ex.features().feature().end() ? nullptr : &it->second;
}

// The Adult train split is converted once for the suite, with a schema
// inferred from it; each test reads what it needs.
class DataConvertStatsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    convert_result_ =
        new CommandResult(Brook({"data", "convert", AdultDir() + "/adult.train.csv", "--schema",
                                 "adult", "--out", dir_->Join("train"), "--shards", "4"}));
    schema_result_ = new CommandResult(
        Brook({"data", "stats", dir_->Join("train"), "--schema-out", SchemaPath()}));
  }
  static void TearDownTestSuite() {
    delete schema_result_;
    delete convert_result_;
    delete dir_;
  }
  static std::string SchemaPath() { return dir_->Join("adult.schema.yaml"); }

  // Converts `csv` (Adult's header plus rows) with the adult preset and checks
  // it against the train schema.
  static CommandResult CheckDoctored(const std::string& name, const std::string& rows) {
    const std::string header =
        "age,workclass,fnlwgt,education,education-num,marital-status,occupation,relationship,"
        "race,sex,capital-gain,capital-loss,hours-per-week,native-country,label\n";
    const std::string csv = dir_->Join(name + ".csv");
    testing::WriteFileOrDie(csv, header + rows);
    CommandResult c =
        Brook({"data", "convert", csv, "--schema", "adult", "--out", dir_->Join(name)});
    EXPECT_EQ(c.exit_code, 0) << c.output;
    return Brook({"data", "stats", dir_->Join(name), "--check", SchemaPath()});
  }

  static testing::TempDir* dir_;
  static CommandResult* convert_result_;
  static CommandResult* schema_result_;
};

testing::TempDir* DataConvertStatsTest::dir_ = nullptr;
CommandResult* DataConvertStatsTest::convert_result_ = nullptr;
CommandResult* DataConvertStatsTest::schema_result_ = nullptr;

constexpr char kCleanRow[] =
    "39,State-gov,77516,Bachelors,13,Never-married,Adm-clerical,Not-in-family,White,Male,2174,0,"
    "40,United-States,<=50K\n"
    "50,Self-emp-not-inc,83311,Bachelors,13,Married-civ-spouse,Exec-managerial,Husband,White,"
    "Male,0,0,13,United-States,>50K\n";

TEST_F(DataConvertStatsTest, AdultTrainConvertsIntoFourShardsThatReadBack) {
  ASSERT_EQ(convert_result_->exit_code, 0) << convert_result_->output;
  EXPECT_THAT(convert_result_->output, HasSubstr("converted 32561 of 32561 rows"));
  const auto files = ShardFiles(dir_->Join("train"));
  ASSERT_EQ(files.size(), 4u);
  EXPECT_THAT(files[0], HasSubstr("train-00000-of-00004.tfrecord"));
  std::vector<std::vector<tf::Example>> shards;
  size_t total = 0;
  for (const auto& f : files) {
    shards.push_back(ReadShard(f));
    total += shards.back().size();
  }
  EXPECT_EQ(total, 32561u);

  // Round-robin: CSV row 1 is shard 0's first record, row 2 shard 1's.
  const tf::Example& row1 = shards[0][0];
  ASSERT_NE(Get(row1, "age"), nullptr);
  EXPECT_FLOAT_EQ(Get(row1, "age")->float_list().value(0), 39);
  EXPECT_EQ(Get(row1, "workclass")->bytes_list().value(0), "State-gov");
  EXPECT_EQ(Get(row1, "education")->bytes_list().value(0), "Bachelors");
  EXPECT_FLOAT_EQ(Get(row1, "capital-gain")->float_list().value(0), 2174);
  EXPECT_FLOAT_EQ(Get(row1, "label")->float_list().value(0), 0);
  EXPECT_EQ(Get(row1, "fnlwgt"), nullptr);  // ignored by the preset
  EXPECT_EQ(row1.features().feature_size(), 14);
  const tf::Example& row2 = shards[1][0];
  EXPECT_FLOAT_EQ(Get(row2, "age")->float_list().value(0), 50);
  EXPECT_EQ(Get(row2, "workclass")->bytes_list().value(0), "Self-emp-not-inc");

  // Row 28 of adult.train.csv has workclass "?": omitted, not written as "?".
  const tf::Example& row28 = shards[27 % 4][27 / 4];
  EXPECT_FLOAT_EQ(Get(row28, "age")->float_list().value(0), 54);
  EXPECT_EQ(Get(row28, "workclass"), nullptr);

  auto spec = input::FeatureSpec::FromYamlFile(dir_->Join("train/feature_spec.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->label_name, "label");
  EXPECT_EQ(spec->features.size(), 13u);
}

TEST_F(DataConvertStatsTest, StatsDescribeTheTrainSplit) {
  ASSERT_EQ(schema_result_->exit_code, 0) << schema_result_->output;
  EXPECT_THAT(schema_result_->output, HasSubstr("32561 examples, 14 features, 4 file(s)"));
  EXPECT_THAT(schema_result_->output, HasSubstr("Private (22696)"));
  CommandResult json = Brook({"data", "stats", dir_->Join("train"), "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const auto j = nlohmann::json::parse(json.output);
  EXPECT_EQ(j["examples"], 32561);
  for (const auto& f : j["features"]) {
    if (f["name"] == "age") {
      EXPECT_EQ(f["numeric"]["float_min"], 17);
      EXPECT_EQ(f["numeric"]["float_max"], 90);
    }
    if (f["name"] == "workclass") {
      EXPECT_EQ(f["missing"], 1836);
      EXPECT_EQ(f["distinct_estimate"], 8);
    }
  }
}

TEST_F(DataConvertStatsTest, GzipTestSplitPassesTheTrainSchema) {
  ASSERT_EQ(schema_result_->exit_code, 0) << schema_result_->output;
  CommandResult c =
      Brook({"data", "convert", AdultDir() + "/adult.test.csv", "--schema", "adult", "--out",
             dir_->Join("test"), "--prefix", "test", "--shards", "2", "--compression", "GZIP"});
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const auto files = ShardFiles(dir_->Join("test"));
  ASSERT_EQ(files.size(), 2u);
  EXPECT_THAT(files[1], HasSubstr("test-00001-of-00002.tfrecord.gz"));
  EXPECT_EQ(ReadShard(files[0]).size() + ReadShard(files[1]).size(), 16281u);

  CommandResult check = Brook({"data", "stats", dir_->Join("test"), "--check", SchemaPath()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_THAT(check.output, HasSubstr("0 anomalies"));

  CommandResult json =
      Brook({"data", "stats", dir_->Join("test"), "--check", SchemaPath(), "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.output;
  EXPECT_EQ(nlohmann::json::parse(json.output)["ok"], true);
}

TEST_F(DataConvertStatsTest, CheckFailsOnOutOfRangeAge) {
  ASSERT_EQ(schema_result_->exit_code, 0) << schema_result_->output;
  CommandResult check = CheckDoctored(
      "old",
      std::string(kCleanRow) +
          "500,Private,1,HS-grad,9,Divorced,Sales,Unmarried,White,Female,0,0,40,Peru,<=50K\n");
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_THAT(check.output, HasSubstr("out_of_range age"));
  EXPECT_THAT(check.output, HasSubstr("500"));
}

TEST_F(DataConvertStatsTest, CheckFailsOnAMissingFeature) {
  ASSERT_EQ(schema_result_->exit_code, 0) << schema_result_->output;
  CommandResult check = CheckDoctored(
      "nowork",
      "39,?,77516,Bachelors,13,Never-married,Adm-clerical,Not-in-family,White,Male,0,0,"
      "40,United-States,<=50K\n");
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_THAT(check.output, HasSubstr("missing_feature workclass"));
}

TEST_F(DataConvertStatsTest, CheckPassesOnCleanRows) {
  ASSERT_EQ(schema_result_->exit_code, 0) << schema_result_->output;
  CommandResult check = CheckDoctored("clean", kCleanRow);
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

TEST_F(DataConvertStatsTest, BadInputsAndBadRows) {
  CommandResult missing = Brook(
      {"data", "convert", dir_->Join("absent.csv"), "--schema", "adult", "--out", dir_->Join("x")});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  CommandResult bad_schema = Brook({"data", "convert", AdultDir() + "/adult.test.csv", "--schema",
                                    dir_->Join("absent.yaml"), "--out", dir_->Join("x")});
  EXPECT_EQ(bad_schema.exit_code, 2) << bad_schema.output;

  const std::string csv = dir_->Join("bad.csv");
  testing::WriteFileOrDie(
      csv,
      "age,workclass,fnlwgt,education,education-num,marital-status,occupation,relationship,"
      "race,sex,capital-gain,capital-loss,hours-per-week,native-country,label\n" +
          std::string(kCleanRow) +
          "abc,Private,1,HS-grad,9,Divorced,Sales,Unmarried,White,Female,0,0,40,Peru,<=50K\n");
  CommandResult bad =
      Brook({"data", "convert", csv, "--schema", "adult", "--out", dir_->Join("b")});
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("bad.csv:4: column \"age\": \"abc\" is not a number"));
  // A failed run leaves nothing it created: not even the directory.
  EXPECT_FALSE(std::filesystem::exists(dir_->Join("b"))) << bad.output;
  std::filesystem::create_directories(dir_->Join("kept"));
  testing::WriteFileOrDie(dir_->Join("kept/README"), "mine");
  CommandResult bad_in_old = Brook(
      {"data", "convert", csv, "--schema", "adult", "--out", dir_->Join("kept"), "--shards", "3"});
  EXPECT_EQ(bad_in_old.exit_code, 1) << bad_in_old.output;
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_->Join("kept")),
                          std::filesystem::directory_iterator()),
            1);
  EXPECT_TRUE(std::filesystem::exists(dir_->Join("kept/README")));
  CommandResult skip = Brook(
      {"data", "convert", csv, "--schema", "adult", "--out", dir_->Join("b"), "--skip-bad-rows"});
  EXPECT_EQ(skip.exit_code, 0) << skip.output;
  EXPECT_THAT(skip.output, HasSubstr("converted 2 of 3 rows"));
  EXPECT_THAT(skip.output, HasSubstr("skipped 1 bad row"));

  CommandResult no_schema =
      Brook({"data", "stats", dir_->Join("train"), "--check", dir_->Join("absent.schema.yaml")});
  EXPECT_EQ(no_schema.exit_code, 2) << no_schema.output;
}

TEST_F(DataConvertStatsTest, CriteoTsvConverts) {
  // label, I1..I13, C1..C26, tab-separated, no header; empty fields missing.
  std::string text;
  for (int row = 0; row < 3; ++row) {
    text += std::to_string(row % 2);
    for (int i = 1; i <= 13; ++i)
      text += "\t" + (i == 2 && row == 1 ? "" : std::to_string(i * row));
    for (int i = 1; i <= 26; ++i)
      text += i == 5 ? "\t" : "\t" + std::string(row == 2 ? "05db9164" : "68fd1e64");
    text += "\n";
  }
  const std::string tsv = dir_->Join("day_0.tsv");
  testing::WriteFileOrDie(tsv, text);
  CommandResult c = Brook({"data", "convert", tsv, "--format", "criteo", "--out",
                           dir_->Join("criteo"), "--prefix", "day0", "--shards", "2"});
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const auto files = ShardFiles(dir_->Join("criteo"));
  ASSERT_EQ(files.size(), 2u);
  const auto shard0 = ReadShard(files[0]);  // rows 0 and 2
  const auto shard1 = ReadShard(files[1]);  // row 1
  ASSERT_EQ(shard0.size(), 2u);
  ASSERT_EQ(shard1.size(), 1u);
  EXPECT_FLOAT_EQ(Get(shard1[0], "label")->float_list().value(0), 1);
  EXPECT_FLOAT_EQ(Get(shard1[0], "I13")->float_list().value(0), 13);
  EXPECT_EQ(Get(shard1[0], "I2"), nullptr);
  EXPECT_EQ(Get(shard1[0], "C5"), nullptr);
  EXPECT_EQ(Get(shard0[1], "C26")->bytes_list().value(0), "05db9164");

  CommandResult stats = Brook({"data", "stats", dir_->Join("criteo"), "--json"});
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_EQ(nlohmann::json::parse(stats.output)["features"].size(), 39u);  // C5 never present
}

}  // namespace
}  // namespace brook
