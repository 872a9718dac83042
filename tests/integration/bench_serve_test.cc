// Runs the real `brook bench serve` with tiny durations on a small export
// and checks its plumbing, not its timing: every phase is reported with
// answered requests and no failures, latencies are ordered, the ceiling and
// ratios are positive, the served scores equal brook predict's, every swap
// is served. Against a running `brook serve` (--target) the same, the
// swaps placed in the directory it watches. A server answering another
// model's scores fails the bench (exit 1) naming it; flags that do not go
// together are usage errors; nothing at --target fails naming it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/testing/process.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/serving_export.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::BrookBinary;
using testing::RunCommand;

// The JSON `--output json` prints: from the last line that is just "{" to
// the last that starts with "}" (stderr may follow it).
Json BenchServeJson(const std::string& output) {
  const size_t start = output.rfind("\n{\n");
  const size_t end = output.rfind("\n}");
  if (start == std::string::npos || end == std::string::npos || end < start) return Json();
  return Json::parse(output.substr(start + 1, end + 2 - (start + 1)), nullptr, false);
}

struct BenchedServer {
  std::unique_ptr<testing::ChildProcess> process;
  std::string http, grpc;
};

// `brook serve --model DIR` on free ports.
BenchedServer StartServeToBench(const std::string& model, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--model",     model,    "--http",
                                   "127.0.0.1:0", "--grpc", "127.0.0.1:0"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::string error;
  std::optional<testing::ServeProcess> started =
      testing::StartBrookServe(args, std::chrono::seconds(60), &error);
  EXPECT_TRUE(started.has_value()) << error;
  if (!started) return {};
  return {std::move(started->process), started->http, started->grpc};
}

class BenchServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    BROOK_ASSERT_OK(testing::TrainAndExport(dir_->Join("data"), dir_->Join("e1"), 1));
  }
  static void TearDownTestSuite() { delete dir_; }

  // Every field a phase reports, and what must hold of it.
  static void ExpectPhase(const Json& j, const std::string& name, int clients, int per_request) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(j["phases"].contains(name)) << j["phases"].dump(2);
    const Json& p = j["phases"][name];
    EXPECT_EQ(p["clients"], clients);
    EXPECT_EQ(p["examples_per_request"], per_request);
    EXPECT_EQ(p["failed"], 0) << p["first_failure"];
    EXPECT_GT(p["requests"].get<int64_t>(), 0);
    EXPECT_GT(p["seconds"].get<double>(), 0);
    EXPECT_GT(p["requests_per_second"].get<double>(), 0);
    EXPECT_NEAR(p["examples_per_second"].get<double>(),
                p["requests_per_second"].get<double>() * per_request,
                1e-6 * p["examples_per_second"].get<double>());
    EXPECT_GT(p["p50_ms"].get<double>(), 0);
    EXPECT_LE(p["p50_ms"].get<double>(), p["p99_ms"].get<double>());
    EXPECT_LE(p["p99_ms"].get<double>(), p["max_ms"].get<double>());
    EXPECT_GE(p["cores_busy"].get<double>(), 0);
  }

  static void ExpectEqualScoresAndCeiling(const Json& j, bool grpc) {
    // Every eval record (500) scored by the server equals brook predict's.
    EXPECT_EQ(j["data"]["records"], 500);
    EXPECT_EQ(j["equality"]["examples"], 500);
    EXPECT_LE(j["equality"]["http_max_abs_diff"].get<double>(), 1e-6);
    if (grpc) {
      EXPECT_LE(j["equality"]["grpc_max_abs_diff"].get<double>(), 1e-6);
    }
    EXPECT_EQ(j["equality"]["pass"], true);
    EXPECT_GT(j["offline"]["examples_per_second"].get<double>(), 0);
    EXPECT_GT(j["offline"]["examples_per_second_at_request_batch"].get<double>(), 0);
    EXPECT_EQ(j["offline"]["slice_pairs"], 2);
    // Each ratio is the median of its slice pairs, the lowest and highest
    // beside it.
    for (std::string ratio : {"http_batch16_vs_offline", "grpc_batch16_vs_offline"}) {
      if (!grpc && ratio[0] == 'g') continue;
      SCOPED_TRACE(ratio);
      ASSERT_TRUE(j["ratios"].contains(ratio) && j["ratios"].contains(ratio + "_low") &&
                  j["ratios"].contains(ratio + "_high"))
          << j["ratios"].dump(2);
      EXPECT_GT(j["ratios"][ratio + "_low"].get<double>(), 0);
      EXPECT_LE(j["ratios"][ratio + "_low"].get<double>(), j["ratios"][ratio].get<double>());
      EXPECT_GE(j["ratios"][ratio + "_high"].get<double>(), j["ratios"][ratio].get<double>());
    }
    EXPECT_TRUE(j["load_average_at_start"].is_number());
    // The server's steps alone, per example.
    EXPECT_EQ(j["server_steps_us_per_example"]["request_batch"], 16);
    for (const char* step : {"json_to_examples", "score"}) {
      EXPECT_GT(j["server_steps_us_per_example"][step].get<double>(), 0) << step;
      EXPECT_GT(j["server_steps_us_per_example"]["single"][step].get<double>(), 0) << step;
    }
    EXPECT_EQ(j["failed_requests"], 0) << j["first_failure"];
    for (const char* goal :
         {"http_c1_p99_ms", "http_batched_vs_offline", "failed_requests", "scores_equal"}) {
      ASSERT_TRUE(j["goals"].contains(goal)) << goal;
      EXPECT_TRUE(j["goals"][goal]["pass"].is_boolean()) << goal;
    }
    EXPECT_EQ(j["goals"]["failed_requests"]["pass"], true);
    EXPECT_EQ(j["goals"]["scores_equal"]["pass"], true);
  }

  static testing::TempDir* dir_;
};

testing::TempDir* BenchServeTest::dir_ = nullptr;

const std::vector<std::string> kTinyServeBench = {
    "--seconds",       "0.3",  "--concurrency", "1,2", "--batch",        "16",
    "--batch-clients", "2",    "--swaps",       "2",   "--swap-clients", "2",
    "--poll-seconds",  "0.05", "--slices",      "2",   "--output",       "json"};

TEST_F(BenchServeTest, InProcessServerReportsEveryFigure) {
  testing::TempDir work;
  std::vector<std::string> argv = {BrookBinary(),    "bench",      "serve",    "--model",
                                   dir_->Join("e1"), "--work-dir", work.path()};
  argv.insert(argv.end(), kTinyServeBench.begin(), kTinyServeBench.end());
  auto r = RunCommand(argv, 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[goal < 2 ms]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("of the offline ceiling [goal >= 50%]"), std::string::npos) << r.output;
  const Json j = BenchServeJson(r.output);
  ASSERT_TRUE(j.is_object()) << r.output;
  EXPECT_EQ(j["server"]["in_process"], true);
  EXPECT_EQ(j["server"]["workers"], 2);
  for (const char* proto : {"http", "grpc"}) {
    ExpectPhase(j, std::string(proto) + "_c1", 1, 1);
    ExpectPhase(j, std::string(proto) + "_c2", 2, 1);
    ExpectPhase(j, std::string(proto) + "_batch16", 2, 16);
  }
  ExpectPhase(j, "mix_steady", 2, 1);
  ExpectPhase(j, "mix_swaps", 2, 1);
  ExpectEqualScoresAndCeiling(j, /*grpc=*/true);
  // Versions 2 and 3 were each served (a reply carried them), none failed.
  EXPECT_EQ(j["swaps"]["swaps"], 2);
  EXPECT_EQ(j["swaps"]["first_version"], 2);
  EXPECT_EQ(j["swaps"]["last_version"], 3);
  EXPECT_EQ(j["swaps"]["failed"], 0);
  EXPECT_GT(j["swaps"]["p99_ms"].get<double>(), 0);
  EXPECT_GT(j["swaps"]["p99_ms_without"].get<double>(), 0);
  EXPECT_GT(j["swaps"]["seconds_to_serve_mean"].get<double>(), 0);
  EXPECT_LE(j["swaps"]["seconds_to_serve_mean"].get<double>(),
            j["swaps"]["seconds_to_serve_max"].get<double>());
  EXPECT_EQ(j["goals"]["failed_requests_during_swaps"]["pass"], true);
  // The versions' copies are removed.
  EXPECT_TRUE(fs::is_empty(work.path()));
}

TEST_F(BenchServeTest, RunningServerIsLoadedAndSwappedThroughItsDirectory) {
  testing::TempDir models;
  fs::copy(dir_->Join("e1"), models.Join("1"), fs::copy_options::recursive);
  BenchedServer s =
      StartServeToBench(models.path(), {"--poll-seconds", "0.05", "--metrics-listen", ""});
  ASSERT_FALSE(s.http.empty());
  std::vector<std::string> argv = {BrookBinary(),    "bench",      "serve",      "--model",
                                   dir_->Join("e1"), "--target",   s.http,       "--grpc-target",
                                   s.grpc,           "--swap-dir", models.path()};
  argv.insert(argv.end(), kTinyServeBench.begin(), kTinyServeBench.end());
  auto r = RunCommand(argv, 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json j = BenchServeJson(r.output);
  ASSERT_TRUE(j.is_object()) << r.output;
  EXPECT_EQ(j["server"]["in_process"], false);
  EXPECT_EQ(j["server"]["http"], s.http);
  for (const char* proto : {"http", "grpc"}) {
    ExpectPhase(j, std::string(proto) + "_c1", 1, 1);
    ExpectPhase(j, std::string(proto) + "_batch16", 2, 16);
  }
  ExpectPhase(j, "mix_swaps", 2, 1);
  ExpectEqualScoresAndCeiling(j, /*grpc=*/true);
  // The versions went after the one it served, into its directory.
  EXPECT_EQ(j["swaps"]["first_version"], 2);
  EXPECT_EQ(j["swaps"]["last_version"], 3);
  EXPECT_EQ(j["swaps"]["failed"], 0);
  EXPECT_TRUE(fs::exists(models.Join("3/manifest.json")));
}

TEST_F(BenchServeTest, ScoresOfAnotherModelFailTheBench) {
  // The server serves a model trained longer than the --model the bench
  // compares with: the scores differ, the bench says so and exits 1.
  BROOK_ASSERT_OK(testing::TrainAndExport(dir_->Join("data"), dir_->Join("e3"), 3, "job-3"));
  BenchedServer s = StartServeToBench(dir_->Join("e3"), {"--metrics-listen", ""});
  ASSERT_FALSE(s.http.empty());
  auto r = RunCommand({BrookBinary(), "bench", "serve", "--model", dir_->Join("e1"), "--target",
                       s.http, "--seconds", "0.1", "--concurrency", "1", "--batch", "16",
                       "--batch-clients", "1", "--slices", "2", "--output", "json"},
                      300);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("differ from brook predict"), std::string::npos) << r.output;
  const Json j = BenchServeJson(r.output);
  ASSERT_TRUE(j.is_object()) << r.output;
  EXPECT_EQ(j["equality"]["pass"], false);
  EXPECT_GT(j["equality"]["http_max_abs_diff"].get<double>(), 1e-6);
  EXPECT_TRUE(j["equality"]["grpc_max_abs_diff"].is_null());  // no --grpc-target
  EXPECT_FALSE(j["phases"].contains("grpc_c1"));
  EXPECT_EQ(j["swaps"]["swaps"], 0);  // no --swap-dir
}

TEST_F(BenchServeTest, BadFlagsAreUsageErrorsAndAWrongTargetFailsNamingIt) {
  auto r = RunCommand({BrookBinary(), "bench", "serve", "--model", dir_->Join("e1"),
                       "--grpc-target", "127.0.0.1:1"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--grpc-target"), std::string::npos) << r.output;
  r = RunCommand({BrookBinary(), "bench", "serve", "--model", dir_->Join("missing")});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(dir_->Join("missing")), std::string::npos) << r.output;
  r = RunCommand({BrookBinary(), "bench", "serve", "--model", dir_->Join("e1"), "--data",
                  dir_->Join("nothing-*.tfrecord")});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("nothing-*.tfrecord"), std::string::npos) << r.output;
  // Nothing at --target: exit 1 at once, naming the address.
  r = RunCommand(
      {BrookBinary(), "bench", "serve", "--model", dir_->Join("e1"), "--target", "127.0.0.1:1"},
      60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("127.0.0.1:1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("is --target a brook serve?"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace brook
