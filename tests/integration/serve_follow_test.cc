// `brook serve --follow-ps`: a model exported from two real `brook ps`
// processes keeps training there; the server pulls what changed and scores
// with the PS's current weights (equal to scoring the live PS, 1e-6), delta
// syncs after the first; a PS killed and restarted on its data dir (a new
// incarnation) makes the follower copy everything again (a full sync); an
// unreachable PS fails syncs, counted, while the model keeps serving.
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chief/export/model_export.h"
#include "ps/client/grpc_ps_client.h"
#include "ps/client/prefixed_ps_client.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/http_get.h"
#include "tests/testing/process.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/serving_export.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using Json = nlohmann::json;
using testing::BrookBinary;

class ServeFollowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    for (int i = 0; i < 2; ++i) {
      auto ps = testing::StartBrookPs(i, 2, {"--data-dir", dir_.Join(absl::StrCat("ps-", i))},
                                      std::chrono::seconds(60), &error);
      ASSERT_TRUE(ps.has_value()) << error;
      ps_.push_back(std::move(*ps));
    }
    ConnectClient();
    job_ = std::make_unique<ps::PrefixedPsClient>(client_.get(), "job-1/");
    auto t = testing::ServingTrainer::Create(job_.get(), dir_.Join("data"));
    ASSERT_TRUE(t.ok()) << t.status();
    trainer_ = std::move(*t);
    BROOK_ASSERT_OK(trainer_->Train());
    BROOK_ASSERT_OK(trainer_->Export(client_.get(), dir_.Join("export"), "job-1"));
    examples_ = testing::ReadRecords(dir_.Join("data/eval.tfrecord"), 64);
  }

  void ConnectClient() {
    ps::GrpcPsClientOptions o;
    o.addresses = {ps_[0].address, ps_[1].address};
    auto c = ps::GrpcPsClient::Create(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }

  void StartServe(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        "--model",          dir_.Join("export"),
        "--http",           "127.0.0.1:0",
        "--grpc",           "",
        "--metrics-listen", "127.0.0.1:0",
        "--follow-ps",      absl::StrCat(ps_[0].address, ",", ps_[1].address),
        "--sync-seconds",   "0.2"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string error;
    std::optional<testing::ServeProcess> started =
        testing::StartBrookServe(args, std::chrono::seconds(60), &error);
    ASSERT_TRUE(started.has_value()) << error;
    serve_ = std::move(started->process);
    http_ = started->http_port();
    metrics_ = started->metrics;
  }

  double Metric(const std::string& series) {
    return testing::ScrapeMetric(metrics_, series).value_or(-1);
  }
  // Waits for `series` to reach at least `at_least`.
  bool WaitMetric(const std::string& series, double at_least, int seconds = 60) {
    for (int i = 0; i < seconds * 20; ++i) {
      if (Metric(series) >= at_least) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::vector<float> Served() {
    Json body = {{"instances", Json::array()}};
    for (const std::string& e : examples_) {
      tf::Example ex;
      EXPECT_TRUE(ex.ParseFromString(e));
      body["instances"].push_back(testing::InstanceJson(ex));
    }
    std::string error;
    auto r = testing::HttpRequest("127.0.0.1", http_, "POST", "/v1/models/brook:predict",
                                  body.dump(), 20000, &error);
    EXPECT_TRUE(r.has_value()) << error;
    std::vector<float> out;
    if (!r || r->status != 200) {
      ADD_FAILURE() << (r ? r->body : error);
      return out;
    }
    const Json reply = Json::parse(r->body);  // a named value: the loop reads into it
    for (const Json& p : reply["predictions"]) out.push_back(p.get<float>());
    return out;
  }

  // What the live PS scores for the same examples.
  std::vector<float> Live() {
    return testing::ScoresOnPs(job_.get(), trainer_->spec(), dir_.Join("data/eval.tfrecord"),
                               examples_.size());
  }
  static double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
    return testing::MaxAbsDiff(a, b);
  }

  testing::TempDir dir_;
  std::vector<testing::PsProcess> ps_;
  std::unique_ptr<ps::GrpcPsClient> client_;
  std::unique_ptr<ps::PrefixedPsClient> job_;
  std::unique_ptr<testing::ServingTrainer> trainer_;
  std::vector<std::string> examples_;
  std::unique_ptr<testing::ChildProcess> serve_;
  int http_ = 0;
  std::string metrics_;
};

const char kFullOk[] = "brook_serve_ps_syncs_total{kind=\"full\",result=\"ok\"}";
const char kDeltaOk[] = "brook_serve_ps_syncs_total{kind=\"delta\",result=\"ok\"}";
const char kFailed[] = "brook_serve_ps_syncs_total{kind=\"any\",result=\"error\"}";

TEST_F(ServeFollowTest, ServesThePsCurrentWeightsAndRecoversFromARestartedPs) {
  StartServe({});
  ASSERT_TRUE(WaitMetric(kFullOk, 1)) << "no first full sync";
  const std::vector<float> at_export = Served();
  EXPECT_LT(MaxDiff(at_export, Live()), 1e-6);

  // Training goes on: the served scores follow, by delta syncs.
  BROOK_ASSERT_OK(trainer_->Train());
  const std::vector<float> live = Live();
  EXPECT_GT(MaxDiff(live, at_export), 1e-3);  // the weights really moved
  const double deltas = Metric(kDeltaOk);
  ASSERT_TRUE(WaitMetric(kDeltaOk, deltas + 2));  // a sync that began after the training
  EXPECT_LT(MaxDiff(Served(), live), 1e-6);
  EXPECT_EQ(Metric(kFullOk), 1);
  EXPECT_GT(Metric("brook_serve_ps_synced_rows_total"), 0);
  EXPECT_LT(Metric("brook_serve_staleness_seconds"), 30);

  // kill -9 one PS and restart it on its data dir and port: a new
  // incarnation, so the follower copies everything again.
  const std::string address = ps_[1].address;
  ps_[1].process->Signal(SIGKILL);
  ps_[1].process->Wait(std::chrono::seconds(10));
  ASSERT_TRUE(WaitMetric(kFailed, 1)) << "a sync against a dead PS did not fail";
  EXPECT_EQ(Served().size(), examples_.size());  // still serving meanwhile
  std::string error;
  auto again = testing::StartBrookPs(1, 2, {"--data-dir", dir_.Join("ps-1")},
                                     std::chrono::seconds(60), &error, address);
  ASSERT_TRUE(again.has_value()) << error;
  ps_[1] = std::move(*again);
  ASSERT_TRUE(WaitMetric(kFullOk, 2)) << "no full sync after the PS restarted";
  ConnectClient();
  job_ = std::make_unique<ps::PrefixedPsClient>(client_.get(), "job-1/");
  const double deltas_after = Metric(kDeltaOk);
  ASSERT_TRUE(WaitMetric(kDeltaOk, deltas_after + 1));
  EXPECT_LT(MaxDiff(Served(), Live()), 1e-6);
}

TEST_F(ServeFollowTest, AnotherJobsTablesAndAWrongJobAreReported) {
  StartServe({"--job", "no-such-job"});
  ASSERT_TRUE(WaitMetric(kFailed, 1));
  EXPECT_EQ(Metric(kFullOk), 0);
  EXPECT_EQ(Served().size(), examples_.size());  // the export's weights still serve
}

}  // namespace
}  // namespace brook
