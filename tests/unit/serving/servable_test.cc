// A loaded export scores exactly what `brook predict` (chief::ScoreExport)
// scores, with rows in memory or past a memory limit in RocksDB; a missing
// feature is refused naming it unless fill_missing; a bad dir names itself.
#include "serving/servable.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "chief/export/model_export.h"
#include "ps/parameter_server.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/serving_export.h"
#include "tests/testing/test_util.h"

namespace brook::serving {
namespace {

class ServableTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    BROOK_ASSERT_OK(testing::TrainAndExport(dir_->Join("data"), dir_->Join("export")));
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::vector<std::string> EvalExamples() {
    return testing::ReadRecords(dir_->Join("data/eval.tfrecord"));
  }
  // What `brook predict` scores for each eval example, in file order.
  static std::vector<float> OfflineScores() {
    return testing::ScoresOfExport(dir_->Join("export"), dir_->Join("data/eval.tfrecord"));
  }

  static void ExpectScoresMatchOffline(const Servable& s) {
    const std::vector<std::string> examples = EvalExamples();
    const std::vector<float> want = OfflineScores();
    ASSERT_EQ(examples.size(), 500u);
    ASSERT_EQ(want.size(), examples.size());
    // Batches of odd sizes, and one example at a time, as requests come.
    std::vector<float> got;
    for (size_t at = 0; at < examples.size();) {
      const size_t n = std::min<size_t>(at % 3 == 0 ? 1 : 37, examples.size() - at);
      std::vector<std::string_view> part(examples.begin() + static_cast<std::ptrdiff_t>(at),
                                         examples.begin() + static_cast<std::ptrdiff_t>(at + n));
      std::vector<float> scores;
      BROOK_ASSERT_OK(s.Score(part, &scores));
      ASSERT_EQ(scores.size(), n);
      got.insert(got.end(), scores.begin(), scores.end());
      at += n;
    }
    double spread = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-6) << "example " << i;
      spread += std::fabs(want[i] - want[0]);
    }
    EXPECT_GT(spread, 1.0);  // the scores differ: a trained model, not a constant
  }

  static testing::TempDir* dir_;
};

testing::TempDir* ServableTest::dir_ = nullptr;

TEST_F(ServableTest, ScoresEqualBrookPredict) {
  auto s = Servable::Load(dir_->Join("export"), 7, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->version(), 7);
  EXPECT_EQ((*s)->loaded().manifest.job_id, "job-1");
  ExpectScoresMatchOffline(**s);
  // What a follower writes into: the model's tables and dense variables.
  ASSERT_NE((*s)->FindTable("c"), nullptr);
  EXPECT_EQ((*s)->FindTable("c")->dim, 4);
  EXPECT_EQ((*s)->FindTable("nope"), nullptr);
  EXPECT_FALSE((*s)->DenseSizes().empty());
  EXPECT_EQ((*s)->DenseSize("nope"), -1);
  const ServableStats st = (*s)->Stats();
  EXPECT_GE(st.rows_in_memory, 58u);  // 50 ids + 8 tags, deep and wide tables
  EXPECT_EQ(st.rows_in_rocksdb, 0u);
}

// A served row holds its weights only: the export's Adagrad accumulators
// (one float per weight) are skipped when it loads.
TEST_F(ServableTest, RowsKeepNoOptimizerSlots) {
  auto s = Servable::Load(dir_->Join("export"), 1, {});
  ASSERT_TRUE(s.ok()) << s.status();
  ps::ParameterServer trained({});
  ASSERT_TRUE(
      trained
          .Restore((std::filesystem::path(dir_->Join("export")) / chief::kExportTablesDir).string())
          .ok());
  uint64_t rows = 0, slot_floats = 0, weight_floats = 0;
  for (const ps::TableStats& t : trained.Stats().tables) {
    rows += t.rows;
    BROOK_ASSERT_OK(trained.ScanTable(
        t.name, [&](uint64_t, absl::Span<const float> w, absl::Span<const float> slots) {
          weight_floats += w.size();
          slot_floats += slots.size();
        }));
  }
  ASSERT_EQ(slot_floats, weight_floats);  // Adagrad: one accumulator a weight
  const ServableStats st = (*s)->Stats();
  EXPECT_EQ(st.rows_in_memory, rows);
  // Per row: 16 B header, the weights (8-aligned), a 12 B index entry.
  const uint64_t trained_bytes = trained.Stats().memory_used_bytes;
  EXPECT_LT(st.row_bytes_in_memory, trained_bytes);
  EXPECT_LE(st.row_bytes_in_memory, rows * (16 + 12 + 4) + weight_floats * 4)
      << "served " << st.row_bytes_in_memory << " B vs trained " << trained_bytes;
  ExpectScoresMatchOffline(**s);
}

TEST_F(ServableTest, RowsPastTheMemoryLimitServeFromRocksDb) {
  testing::TempDir tier;
  ServableOptions o;
  o.memory_limit_bytes = 1;  // every row it can move goes to RocksDB
  o.data_dir = tier.Join("v1");
  {
    auto s = Servable::Load(dir_->Join("export"), 1, o);
    ASSERT_TRUE(s.ok()) << s.status();
    ExpectScoresMatchOffline(**s);
    EXPECT_GT((*s)->Stats().rows_in_rocksdb, 0u);
    EXPECT_EQ((*s)->Stats().memory_limit_bytes, 1u);
    EXPECT_TRUE(std::filesystem::exists(o.data_dir));
  }
  EXPECT_FALSE(std::filesystem::exists(o.data_dir));  // released with the version
  o.data_dir.clear();
  EXPECT_EQ(Servable::Load(dir_->Join("export"), 1, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Under a memory limit the rows in memory stay within it, as loaded and
// while a follower writes every row again (rows spilled come back to memory
// and others go): scores stay those of the export.
TEST_F(ServableTest, RowsInMemoryStayWithinTheLimitWhileAFollowerWritesThem) {
  testing::TempDir tier;
  ServableOptions o;
  o.memory_limit_bytes = 2048;
  o.data_dir = tier.Join("v1");
  auto s = Servable::Load(dir_->Join("export"), 1, o);
  ASSERT_TRUE(s.ok()) << s.status();
  const ServableStats loaded = (*s)->Stats();
  EXPECT_EQ(loaded.memory_limit_bytes, 2048u);
  EXPECT_LE(loaded.row_bytes_in_memory, 2048u);
  EXPECT_GT(loaded.rows_in_rocksdb, 0u);
  for (int round = 0; round < 3; ++round) {
    for (const trainer::TableSpec& t : (*s)->Tables()) {
      std::vector<uint64_t> keys;
      std::vector<float> weights;
      BROOK_ASSERT_OK((*s)->weights()->ScanRows(
          t.name, [&](absl::Span<const uint64_t> k, absl::Span<const float> w) -> absl::Status {
            keys.insert(keys.end(), k.begin(), k.end());
            weights.insert(weights.end(), w.begin(), w.end());
            return absl::OkStatus();
          }));
      BROOK_ASSERT_OK((*s)->AssignRows(t.name, keys, weights));
    }
    const ServableStats st = (*s)->Stats();
    EXPECT_LE(st.row_bytes_in_memory, 2048u) << "round " << round;
  }
  ExpectScoresMatchOffline(**s);
}

TEST_F(ServableTest, MissingFeatureRefusedNamingItUnlessFillMissing) {
  tf::Example ex;
  (*ex.mutable_features()->mutable_feature())["c"].mutable_int64_list()->add_value(3);
  (*ex.mutable_features()->mutable_feature())["x"].mutable_float_list()->add_value(0.5f);
  const std::string bytes = ex.SerializeAsString();  // no "tag", no label
  auto strict = Servable::Load(dir_->Join("export"), 1, {});
  ASSERT_TRUE(strict.ok()) << strict.status();
  std::vector<float> scores;
  const std::string_view views[] = {bytes, bytes};
  absl::Status s = (*strict)->Score(views, &scores);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("example 0: "), std::string::npos) << s;
  EXPECT_NE(s.message().find("tag"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--fill-missing"), std::string::npos) << s;

  auto lenient = Servable::Load(dir_->Join("export"), 1, {.fill_missing = true});
  ASSERT_TRUE(lenient.ok());
  BROOK_ASSERT_OK((*lenient)->Score(views, &scores));
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_GT(scores[0], 0.0f);
  EXPECT_LT(scores[0], 1.0f);
  EXPECT_EQ(scores[0], scores[1]);
  // Not a tf.train.Example at all, second of three: its index, the
  // parser's message alone, INVALID_ARGUMENT (the caller's, not DATA_LOSS).
  const std::string_view with_garbage[] = {bytes, "\xff\xff\xff", bytes};
  size_t bad = 99;
  s = (*lenient)->Score(with_garbage, &scores, &bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(bad, 1u);
  EXPECT_NE(s.message().substr(0, 8), "example ") << s;
}

// An export whose spec (hash and all) names another embedding dim than its
// tables hold is refused as the export's fault, naming the table and dims,
// without the PS's advice about earlier runs.
TEST_F(ServableTest, AnExportWhoseSpecDisagreesWithItsTablesIsNamed) {
  testing::TempDir copy;
  const std::string dir = copy.Join("export");
  std::filesystem::copy(dir_->Join("export"), dir, std::filesystem::copy_options::recursive);
  const std::string manifest = dir + "/" + chief::kExportManifestName;
  nlohmann::json m = nlohmann::json::parse(testing::ReadFileOrDie(manifest));
  ASSERT_EQ(m["spec"]["sparse"][0]["dim"], 4) << m["spec"]["sparse"];
  m["spec"]["sparse"][0]["dim"] = 6;
  testing::WriteFileOrDie(manifest, m.dump());
  // The hash the changed spec has, as the reader computes it.
  const std::string said = std::string(chief::ReadExport(dir).status().message());
  const size_t at = said.find("hashes to ");
  ASSERT_NE(at, std::string::npos) << said;
  m["spec_hash"] = said.substr(at + 10, 16);
  testing::WriteFileOrDie(manifest, m.dump());
  ASSERT_TRUE(chief::ReadExport(dir).ok());

  auto s = Servable::Load(dir, 1, {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
  const std::string message(s.status().message());
  EXPECT_NE(message.find("export " + dir + ": its spec does not describe the tables it holds"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("dim 4 vs 6"), std::string::npos) << message;
  EXPECT_EQ(message.find("Drop it"), std::string::npos) << message;
}

TEST_F(ServableTest, BadDirectoriesNameThemselves) {
  auto none = Servable::Load(dir_->Join("nope"), 1, {});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find(dir_->Join("nope")), std::string::npos);
  auto data = Servable::Load(dir_->Join("data"), 1, {});
  EXPECT_EQ(data.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace brook::serving
