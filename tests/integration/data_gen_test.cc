// Runs the real `brook data gen` and checks what it leaves on disk.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::RunCommand;
using testing::TempDir;

// Records in one file, each checked to parse as a tf.train.Example with a
// label, I1..I13 and C1..C26.
int64_t CountExamples(const std::string& path) {
  storage::TFRecordReaderOptions ro;
  ro.compression = storage::CompressionFromPath(path);
  auto reader = storage::TFRecordReader::Open(path, ro);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return -1;
  int64_t n = 0;
  std::string_view record;
  brook::tf::Example ex;
  while (true) {
    auto more = (*reader)->Next(&record);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    EXPECT_TRUE(ex.ParseFromArray(record.data(), static_cast<int>(record.size())));
    EXPECT_EQ(ex.features().feature_size(), 1 + 13 + 26);
    EXPECT_EQ(ex.features().feature().count("label"), 1u);
    EXPECT_EQ(ex.features().feature().count("C26"), 1u);
    ++n;
  }
  return n;
}

TEST(DataGenTest, WritesShardsGroundTruthAndSpec) {
  TempDir dir;
  const std::string out = dir.Join("gen");
  auto r = RunCommand({BrookBinary(), "data", "gen", "--out", out, "--train", "5000", "--test",
                       "3e3", "--shards", "3", "--test-shards", "2", "--seed", "9", "--threads",
                       "2", "--cardinality-max", "1e8"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Bayes AUC"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("examples/s"), std::string::npos) << r.output;

  const auto gt = nlohmann::json::parse(testing::ReadFileOrDie(out + "/ground_truth.json"));
  ASSERT_TRUE(std::filesystem::exists(out + "/feature_spec.yaml"));
  EXPECT_EQ(gt["options"]["seed"].get<uint64_t>(), 9u);
  EXPECT_EQ(gt["options"]["cardinalities"].size(), 26u);
  uint64_t max_card = 0;
  for (const auto& c : gt["options"]["cardinalities"])
    max_card = std::max(max_card, c.get<uint64_t>());
  EXPECT_EQ(max_card, 100'000'000u);

  for (const char* split : {"train", "test"}) {
    SCOPED_TRACE(split);
    const auto& s = gt[split];
    const int64_t expected = std::string(split) == "train" ? 5000 : 3000;
    EXPECT_EQ(s["examples"].get<int64_t>(), expected);
    ASSERT_EQ(s["files"].size(), std::string(split) == "train" ? 3u : 2u);
    int64_t total = 0;
    for (const auto& f : s["files"]) total += CountExamples(out + "/" + f.get<std::string>());
    EXPECT_EQ(total, expected);
    const double auc = s["bayes_auc"].get<double>();
    EXPECT_GT(auc, 0.65);
    EXPECT_LT(auc, 0.95);
    EXPECT_GT(s["bayes_logloss"].get<double>(), 0.0);
  }
  EXPECT_TRUE(std::filesystem::exists(out + "/train-00002-of-00003.tfrecord"));
  EXPECT_TRUE(std::filesystem::exists(out + "/test-00001-of-00002.tfrecord"));
}

TEST(DataGenTest, FlagsComeFromEnvironmentAndGzipIsNamed) {
  TempDir dir;
  const std::string out = dir.Join("gz");
  // The child inherits the environment; unset again so other tests don't.
  setenv("BROOK_DATA_GEN_COMPRESSION", "GZIP", 1);
  setenv("BROOK_DATA_GEN_TRAIN", "400", 1);
  setenv("BROOK_DATA_GEN_OUT", out.c_str(), 1);
  auto r = RunCommand({BrookBinary(), "data", "gen", "--test", "100", "--threads", "1"});
  unsetenv("BROOK_DATA_GEN_COMPRESSION");
  unsetenv("BROOK_DATA_GEN_TRAIN");
  unsetenv("BROOK_DATA_GEN_OUT");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string train = out + "/train-00000-of-00001.tfrecord.gz";
  ASSERT_TRUE(std::filesystem::exists(train)) << r.output;
  EXPECT_EQ(CountExamples(train), 400);
  EXPECT_EQ(CountExamples(out + "/test-00000-of-00001.tfrecord.gz"), 100);
}

TEST(DataGenTest, SameSeedSameBytes) {
  TempDir dir;
  for (const char* name : {"a", "b"}) {
    auto r = RunCommand({BrookBinary(), "data", "gen", "--out", dir.Join(name), "--train", "1000",
                         "--test", "500", "--seed", "3", "--shards", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  for (const char* f : {"train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord",
                        "test-00001-of-00002.tfrecord", "ground_truth.json"}) {
    EXPECT_EQ(testing::ReadFileOrDie(dir.Join(std::string("a/") + f)),
              testing::ReadFileOrDie(dir.Join(std::string("b/") + f)))
        << f;
  }
}

TEST(DataGenTest, BadFlagsAreUsageErrors) {
  TempDir dir;
  for (std::vector<std::string> extra : {std::vector<std::string>{"--zipf", "0"},
                                         {"--train", "lots"},
                                         {"--shards", "0"},
                                         {"--compression", "LZ4"},
                                         {"--cardinalities", "1,2,3"}}) {
    std::vector<std::string> argv = {BrookBinary(), "data", "gen", "--out", dir.Join("x")};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto r = RunCommand(argv);
    EXPECT_EQ(r.exit_code, 2) << extra[0] << ": " << r.output;
  }
  auto r = RunCommand({BrookBinary(), "data", "gen", "--train", "10"});  // no --out
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace
}  // namespace brook
