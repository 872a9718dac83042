// Versions of a served model: the newest complete export loads, a newer one
// is swapped in by Poll while the old one keeps scoring for whoever holds
// it, a half-written export is skipped, a broken one is reported once and
// not retried until it changes.
#include "serving/model_repository.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tensorflow/example.pb.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/serving_export.h"
#include "tests/testing/test_util.h"

namespace brook::serving {
namespace {

namespace fs = std::filesystem;

class ModelRepositoryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    BROOK_ASSERT_OK(testing::TrainAndExport(dir_->Join("data"), dir_->Join("e1"), 1));
    BROOK_ASSERT_OK(testing::TrainAndExport(dir_->Join("data"), dir_->Join("e2"), 2));
  }
  static void TearDownTestSuite() { delete dir_; }

  void Place(const std::string& export_name, const std::string& version) {
    fs::copy(dir_->Join(export_name), models_.Join(version), fs::copy_options::recursive);
  }

  static float ScoreOne(const Servable& s) {
    tf::Example ex;
    auto& f = *ex.mutable_features()->mutable_feature();
    f["c"].mutable_int64_list()->add_value(4);
    f["tag"].mutable_bytes_list()->add_value("red");
    f["x"].mutable_float_list()->add_value(0.25f);
    const std::string bytes = ex.SerializeAsString();
    const std::string_view one[] = {bytes};
    std::vector<float> out;
    EXPECT_TRUE(s.Score(one, &out).ok());
    return out.empty() ? -1 : out[0];
  }

  static testing::TempDir* dir_;
  testing::TempDir models_;
  std::vector<std::string> log_;
  ModelRepositoryOptions Options() {
    return {.path = models_.path(), .servable = {}, .log = [this](const std::string& l) {
              log_.push_back(l);
            }};
  }
};

testing::TempDir* ModelRepositoryTest::dir_ = nullptr;

TEST_F(ModelRepositoryTest, NewestLoadsAndANewerOneSwapsIn) {
  Place("e1", "1");
  fs::create_directories(models_.Join("9"));  // being written: no manifest.json yet
  auto repo = ModelRepository::Open(Options());
  ASSERT_TRUE(repo.ok()) << repo.status();
  std::shared_ptr<const Servable> v1 = (*repo)->Current();
  EXPECT_EQ(v1->version(), 1);
  const float score1 = ScoreOne(*v1);

  BROOK_ASSERT_OK((*repo)->Poll());  // nothing new
  EXPECT_EQ((*repo)->Current().get(), v1.get());

  Place("e2", "2");
  BROOK_ASSERT_OK((*repo)->Poll());
  std::shared_ptr<const Servable> v2 = (*repo)->Current();
  EXPECT_EQ(v2->version(), 2);
  EXPECT_NE(ScoreOne(*v2), score1);  // trained longer: other weights
  EXPECT_EQ(ScoreOne(*v1), score1);  // the old one still scores for its holder
  const std::vector<VersionStatus> versions = (*repo)->Versions();
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].version, 1);
  EXPECT_EQ(versions[0].state, "END");
  EXPECT_EQ(versions[1].state, "AVAILABLE");
  const RepositoryStats st = (*repo)->Stats();
  EXPECT_EQ(st.version, 2);
  EXPECT_EQ(st.loads, 2u);
  EXPECT_EQ(st.load_failures, 0u);
  EXPECT_GT(st.export_created_unix_micros, 0);
  ASSERT_EQ(log_.size(), 2u);
  EXPECT_NE(log_[1].find("serving version 2"), std::string::npos) << log_[1];
}

TEST_F(ModelRepositoryTest, BrokenVersionReportedOnceAndOldOneKeepsServing) {
  Place("e1", "1");
  auto repo = ModelRepository::Open(Options());
  ASSERT_TRUE(repo.ok()) << repo.status();
  Place("e2", "3");
  testing::WriteFileOrDie(models_.Join("3/manifest.json"), "{\"format\": \"brook-export/1\"");
  absl::Status s = (*repo)->Poll();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("manifest.json"), std::string::npos) << s;
  EXPECT_EQ((*repo)->Current()->version(), 1);
  BROOK_ASSERT_OK((*repo)->Poll());  // the same broken files: not retried
  EXPECT_EQ((*repo)->Stats().load_failures, 1u);
  bool reported = false;
  for (const VersionStatus& v : (*repo)->Versions()) {
    if (v.version == 3) reported = !v.error.empty() && v.state == "END";
  }
  EXPECT_TRUE(reported);
  // Mended: a new manifest.json is tried again and swaps in.
  fs::copy(dir_->Join("e2/manifest.json"), models_.Join("3/manifest.json"),
           fs::copy_options::overwrite_existing);
  fs::last_write_time(models_.Join("3/manifest.json"),
                      fs::file_time_type::clock::now() + std::chrono::seconds(5));
  BROOK_ASSERT_OK((*repo)->Poll());
  EXPECT_EQ((*repo)->Current()->version(), 3);
}

TEST_F(ModelRepositoryTest, AMendedOlderVersionIsNotStuckBehindABrokenNewerOne) {
  Place("e1", "1");
  auto repo = ModelRepository::Open(Options());
  ASSERT_TRUE(repo.ok()) << repo.status();
  Place("e2", "2");
  Place("e2", "3");
  testing::WriteFileOrDie(models_.Join("2/manifest.json"), "{");
  testing::WriteFileOrDie(models_.Join("3/manifest.json"), "{");
  EXPECT_FALSE((*repo)->Poll().ok());
  EXPECT_EQ((*repo)->Current()->version(), 1);
  EXPECT_EQ((*repo)->Stats().load_failures, 2u);  // 3, then 2
  for (const VersionStatus& v : (*repo)->Versions()) {
    if (v.version > 1) {
      EXPECT_EQ(v.error_code, "INVALID_ARGUMENT") << v.error;
    }
  }
  fs::copy(dir_->Join("e2/manifest.json"), models_.Join("2/manifest.json"),
           fs::copy_options::overwrite_existing);
  fs::last_write_time(models_.Join("2/manifest.json"),
                      fs::file_time_type::clock::now() + std::chrono::seconds(5));
  BROOK_ASSERT_OK((*repo)->Poll());  // 3 unchanged is passed over; 2 loads
  EXPECT_EQ((*repo)->Current()->version(), 2);
  EXPECT_EQ((*repo)->Stats().load_failures, 2u);
}

TEST_F(ModelRepositoryTest, ASingleExportAndNamedDirectoriesAreVersionedByTime) {
  auto single = ModelRepository::Open({.path = dir_->Join("e1")});
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_GT((*single)->Current()->version(), 1600000000);  // its creation time, seconds

  // A chief's export dir: one directory per job id, newest by creation time.
  Place("e1", "job-a");
  Place("e2", "job-b");
  auto repo = ModelRepository::Open(Options());
  ASSERT_TRUE(repo.ok());
  EXPECT_EQ((*repo)->Current()->dir(), models_.Join("job-b"));
}

TEST_F(ModelRepositoryTest, NothingToServeIsNotFound) {
  auto empty = ModelRepository::Open(Options());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(empty.status().message().find("no subdirectory holds a manifest.json"),
            std::string::npos);
  auto missing = ModelRepository::Open({.path = models_.Join("nope")});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  // The only export is broken: its error, naming the file.
  Place("e1", "1");
  testing::WriteFileOrDie(models_.Join("1/manifest.json"), "not json");
  auto broken = ModelRepository::Open(Options());
  EXPECT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("manifest.json"), std::string::npos);
}

}  // namespace
}  // namespace brook::serving
