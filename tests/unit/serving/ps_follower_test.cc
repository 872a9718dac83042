// The PS follower over a real in-process training PS (two shards, their
// change logs on): the first sync copies everything, later ones only what
// training changed, and the served scores equal scoring the live PS; a new
// version swapped in starts over with a full sync; a job with no tables
// fails the sync, counted, and the model keeps its weights.
#include "serving/ps_follower.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chief/export/model_export.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/serving_export.h"
#include "tests/testing/test_util.h"

namespace brook::serving {
namespace {

class PsFollowerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = testing::ServingTrainer::Create(&job_, dir_.Join("data"));
    ASSERT_TRUE(t.ok()) << t.status();
    trainer_ = std::move(*t);
    BROOK_ASSERT_OK(trainer_->Train());
    BROOK_ASSERT_OK(trainer_->Export(cluster_.client.get(), dir_.Join("models/1"), "job-1"));
    auto repo = ModelRepository::Open({.path = dir_.Join("models")});
    ASSERT_TRUE(repo.ok()) << repo.status();
    repo_ = std::move(*repo);
    examples_ = testing::ReadRecords(dir_.Join("data/eval.tfrecord"), 200);
    ASSERT_EQ(examples_.size(), 200u);
  }

  std::vector<float> Served() {
    std::vector<std::string_view> views(examples_.begin(), examples_.end());
    std::vector<float> out;
    EXPECT_TRUE(repo_->Current()->Score(views, &out).ok());
    return out;
  }
  std::vector<float> Live() {
    return testing::ScoresOnPs(&job_, trainer_->spec(), dir_.Join("data/eval.tfrecord"),
                               examples_.size());
  }
  static double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
    return testing::MaxAbsDiff(a, b);
  }
  // A follower whose thread syncs once at start and then not for an hour:
  // the test drives SyncOnce itself.
  std::unique_ptr<PsFollower> Follow(const std::string& job = "") {
    PsFollowerOptions o;
    o.job = job;
    o.interval = absl::Hours(1);
    o.log = [this](const std::string& line) { log_.push_back(line); };
    auto f = PsFollower::Start(o, repo_.get(), cluster_.client.get());
    EXPECT_TRUE(f.ok()) << f.status();
    for (int i = 0; i < 2000 && f.ok(); ++i) {
      const FollowerStats s = (*f)->Stats();
      if (s.full_syncs + s.delta_syncs + s.failures > 0) break;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return f.ok() ? std::move(*f) : nullptr;
  }

  testing::TempDir dir_;
  ps::LocalPsCluster cluster_{2};
  ps::PrefixedPsClient job_{cluster_.client.get(), "job-1/"};
  std::unique_ptr<testing::ServingTrainer> trainer_;
  std::unique_ptr<ModelRepository> repo_;
  std::vector<std::string> examples_;
  std::vector<std::string> log_;
};

TEST_F(PsFollowerTest, DeltaSyncsServeThePsCurrentWeights) {
  std::unique_ptr<PsFollower> f = Follow();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->Stats().full_syncs, 1u);
  const std::vector<float> at_export = Served();
  EXPECT_LT(MaxDiff(at_export, Live()), 1e-6);

  BROOK_ASSERT_OK(trainer_->Train());  // training goes on
  const std::vector<float> live = Live();
  EXPECT_GT(MaxDiff(live, at_export), 1e-3);
  EXPECT_GT(MaxDiff(Served(), live), 1e-3);  // not yet synced
  const uint64_t rows_before = f->Stats().rows;
  BROOK_ASSERT_OK(f->SyncOnce());
  const FollowerStats s = f->Stats();
  EXPECT_EQ(s.delta_syncs, 1u);
  EXPECT_EQ(s.full_syncs, 1u);
  EXPECT_GT(s.rows, rows_before);
  EXPECT_GT(s.synced_unix_seconds, 0);
  EXPECT_LT(MaxDiff(Served(), live), 1e-6);

  // Nothing trained since: a delta sync with nothing to copy.
  const uint64_t rows = f->Stats().rows;
  BROOK_ASSERT_OK(f->SyncOnce());
  EXPECT_EQ(f->Stats().rows, rows);
  EXPECT_EQ(f->Stats().delta_syncs, 2u);
}

TEST_F(PsFollowerTest, ANewVersionStartsOverWithAFullSync) {
  std::unique_ptr<PsFollower> f = Follow();
  ASSERT_NE(f, nullptr);
  BROOK_ASSERT_OK(trainer_->Train());
  BROOK_ASSERT_OK(trainer_->Export(cluster_.client.get(), dir_.Join("models/2"), "job-1"));
  BROOK_ASSERT_OK(trainer_->Train());
  BROOK_ASSERT_OK(repo_->Poll());
  ASSERT_EQ(repo_->Current()->version(), 2);
  BROOK_ASSERT_OK(f->SyncOnce());
  EXPECT_EQ(f->Stats().full_syncs, 2u);
  EXPECT_LT(MaxDiff(Served(), Live()), 1e-6);
  ASSERT_FALSE(log_.empty());
  EXPECT_NE(log_.back().find("full sync"), std::string::npos) << log_.back();
}

// A full sync leaves the serving copy holding what the PS holds: rows the
// PS no longer has (evicted, or lost in a restart without its WAL) are
// dropped from a version loaded with them, and read their initial values on
// both sides.
TEST_F(PsFollowerTest, AFullSyncDropsRowsThePsNoLongerHolds) {
  std::unique_ptr<PsFollower> f = Follow();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->Stats().rows_dropped, 0u);
  // The PS loses every third row of table "c" (version 1's export has them).
  uint64_t lost = 0;
  for (auto& shard : cluster_.shards) {
    std::vector<uint64_t> keys;
    BROOK_ASSERT_OK(shard->ScanRows("job-1/c", 1024,
                                    [&](absl::Span<const uint64_t> k, absl::Span<const float>) {
                                      for (size_t i = 0; i < k.size(); i += 3) keys.push_back(k[i]);
                                      return absl::OkStatus();
                                    }));
    BROOK_ASSERT_OK(shard->EraseRows("job-1/c", keys));
    lost += keys.size();
  }
  ASSERT_GT(lost, 5u);
  // Version 2 is version 1's export again: loaded with the lost rows, then
  // fully synced.
  std::filesystem::copy(dir_.Join("models/1"), dir_.Join("models/2"),
                        std::filesystem::copy_options::recursive);
  BROOK_ASSERT_OK(repo_->Poll());
  ASSERT_EQ(repo_->Current()->version(), 2);
  BROOK_ASSERT_OK(f->SyncOnce());
  EXPECT_EQ(f->Stats().full_syncs, 2u);
  EXPECT_EQ(f->Stats().rows_dropped, lost);
  EXPECT_LT(MaxDiff(Served(), Live()), 1e-6);
  ASSERT_FALSE(log_.empty());
  EXPECT_NE(log_.back().find(absl::StrCat(lost, " rows the PS no longer holds dropped")),
            std::string::npos)
      << log_.back();
  // Version 3, the same export again: its lost rows are dropped again.
  std::filesystem::copy(dir_.Join("models/1"), dir_.Join("models/3"),
                        std::filesystem::copy_options::recursive);
  BROOK_ASSERT_OK(repo_->Poll());
  BROOK_ASSERT_OK(f->SyncOnce());
  EXPECT_EQ(f->Stats().rows_dropped, 2 * lost);
  EXPECT_LT(MaxDiff(Served(), Live()), 1e-6);
}

// With the repository's before-swap hook (as brook serve sets it), a new
// version serves the PS's weights from its first request, not its export's.
TEST_F(PsFollowerTest, ANewVersionIsSyncedBeforeItIsSwappedIn) {
  std::unique_ptr<PsFollower> f = Follow();
  ASSERT_NE(f, nullptr);
  repo_->SetBeforeSwap([&](const std::shared_ptr<const Servable>& v) { return f->SyncInto(v); });
  BROOK_ASSERT_OK(trainer_->Export(cluster_.client.get(), dir_.Join("models/2"), "job-1"));
  BROOK_ASSERT_OK(trainer_->Train());  // the PS moves past version 2's export
  BROOK_ASSERT_OK(repo_->Poll());
  ASSERT_EQ(repo_->Current()->version(), 2);
  EXPECT_LT(MaxDiff(Served(), Live()), 1e-6);  // no SyncOnce after the swap
  EXPECT_EQ(f->Stats().full_syncs, 2u);
  repo_->SetBeforeSwap(nullptr);
}

// A standalone trainer's export has no table prefix: its tables are
// followed where they are.
TEST_F(PsFollowerTest, AnExportWithoutATablePrefixIsFollowed) {
  ps::LocalPsCluster solo_cluster(2);
  auto t = testing::ServingTrainer::Create(solo_cluster.client.get(), dir_.Join("data"));
  ASSERT_TRUE(t.ok()) << t.status();
  BROOK_ASSERT_OK((*t)->Train());
  BROOK_ASSERT_OK((*t)->Export(solo_cluster.client.get(), dir_.Join("solo"), "solo", ""));
  auto repo = ModelRepository::Open({.path = dir_.Join("solo")});
  ASSERT_TRUE(repo.ok()) << repo.status();
  BROOK_ASSERT_OK((*t)->Train());
  PsFollowerOptions o;
  o.interval = absl::Hours(1);
  auto f = PsFollower::Start(o, repo->get(), solo_cluster.client.get());
  ASSERT_TRUE(f.ok()) << f.status();
  BROOK_ASSERT_OK((*f)->SyncOnce());
  EXPECT_GE((*f)->Stats().full_syncs, 1u);
  EXPECT_EQ((*f)->Stats().failures, 0u) << (*f)->Stats().last_error;
}

TEST_F(PsFollowerTest, AJobWithNoTablesFailsTheSyncAndKeepsTheWeights) {
  const std::vector<float> before = Served();
  std::unique_ptr<PsFollower> f = Follow("no-such-job");
  ASSERT_NE(f, nullptr);
  absl::Status s = f->SyncOnce();
  EXPECT_FALSE(s.ok());
  const FollowerStats st = f->Stats();
  EXPECT_EQ(st.failures, 2u);
  EXPECT_EQ(st.full_syncs, 0u);
  EXPECT_NE(st.last_error.find("no-such-job"), std::string::npos) << st.last_error;
  EXPECT_EQ(log_.size(), 1u);  // the same error is logged once, not every interval
  EXPECT_LT(MaxDiff(Served(), before), 1e-9);
}

// A deleted job's tables log no change: the sync must fail, not report
// "nothing changed" while the served weights silently stop being fresh.
TEST_F(PsFollowerTest, ADeletedJobFailsTheSyncInsteadOfLookingIdle) {
  std::unique_ptr<PsFollower> f = Follow();
  ASSERT_NE(f, nullptr);
  BROOK_ASSERT_OK(f->SyncOnce());
  const std::vector<float> before = Served();
  auto dropped = cluster_.client->DropTablesWithPrefix("job-1/");
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  absl::Status s = f->SyncOnce();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("job-1/"), std::string::npos) << s;
  EXPECT_EQ(f->Stats().failures, 1u);
  EXPECT_EQ(f->Stats().delta_syncs, 1u);
  EXPECT_LT(MaxDiff(Served(), before), 1e-9);  // still serving what it had
}

}  // namespace
}  // namespace brook::serving
