// `brook serve` as a user runs it: a real process on ports chosen at run
// time, answering TF Serving's REST API and brook.v1.Predict. Scores equal
// `brook predict`'s (chief::ScoreExport) to 1e-6; ten new versions are
// swapped in under load with no failed request; bad input gets 400/404/413
// naming what was wrong and the server keeps serving; metrics count it all;
// SIGTERM stops it cleanly; bad flags are usage errors naming the flag.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "brook/v1/serving.grpc.pb.h"
#include "chief/export/model_export.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/http_get.h"
#include "tests/testing/process.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/raw_tcp.h"
#include "tests/testing/serving_export.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::BrookBinary;

struct Serve {
  std::unique_ptr<testing::ChildProcess> process;
  int http = 0;
  std::string grpc, metrics;
};

// Starts `brook serve` with `args` on free ports.
Serve StartServe(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"--http",      "127.0.0.1:0",      "--grpc",
                                   "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string error;
  std::optional<testing::ServeProcess> started =
      testing::StartBrookServe(argv, std::chrono::seconds(60), &error);
  EXPECT_TRUE(started.has_value()) << error;
  if (!started) return {};
  return {std::move(started->process), started->http_port(), started->grpc, started->metrics};
}

testing::HttpResponse Post(int port, const std::string& path, const std::string& body) {
  std::string error;
  auto r = testing::HttpRequest("127.0.0.1", port, "POST", path, body, 20000, &error);
  EXPECT_TRUE(r.has_value()) << error;
  return r.value_or(testing::HttpResponse{});
}

// A tf.train.Example as a TF Serving instance (the features the model has).
Json Instance(const tf::Example& ex) { return testing::InstanceJson(ex); }

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    BROOK_ASSERT_OK(testing::TrainAndExport(dir_->Join("data"), dir_->Join("e1"), 1));
    BROOK_ASSERT_OK(testing::TrainAndExport(dir_->Join("data"), dir_->Join("e2"), 2));
    *examples_ = testing::ReadRecords(dir_->Join("data/eval.tfrecord"));
  }
  static void TearDownTestSuite() { delete dir_; }

  // `brook predict`'s score of every eval example under export `name`.
  static std::vector<float> Offline(const std::string& name) {
    return testing::ScoresOfExport(dir_->Join(name), dir_->Join("data/eval.tfrecord"));
  }

  // Copied beside, then renamed in: the server never sees half a copy.
  void Place(const std::string& name, const std::string& version) {
    fs::copy(dir_->Join(name), staging_.Join(version), fs::copy_options::recursive);
    fs::rename(staging_.Join(version), models_.Join(version));
  }

  static testing::TempDir* dir_;
  static std::vector<std::string>* examples_;
  testing::TempDir models_, staging_;
};

testing::TempDir* ServeTest::dir_ = nullptr;
std::vector<std::string>* ServeTest::examples_ = new std::vector<std::string>();

TEST_F(ServeTest, ScoresEqualBrookPredictOverHttpAndGrpc) {
  Place("e1", "1");
  Serve s = StartServe({"--model", models_.path(), "--model-name", "ctr"});
  ASSERT_GT(s.http, 0);
  const std::vector<float> want = Offline("e1");
  ASSERT_EQ(want.size(), examples_->size());

  // gRPC: serialized tf.train.Examples, 100 a request.
  auto channel = grpc::CreateChannel(s.grpc, grpc::InsecureChannelCredentials());
  auto stub = v1::Predict::NewStub(channel);
  for (size_t at = 0; at < examples_->size(); at += 100) {
    v1::PredictRequest req;
    req.set_model_name("ctr");
    for (size_t i = at; i < at + 100 && i < examples_->size(); ++i)
      req.add_examples((*examples_)[i]);
    v1::PredictResponse resp;
    grpc::ClientContext ctx;
    const grpc::Status st = stub->Predict(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.version(), 1);
    ASSERT_EQ(resp.scores_size(), req.examples_size());
    for (int i = 0; i < resp.scores_size(); ++i) {
      EXPECT_NEAR(resp.scores(i), want[at + static_cast<size_t>(i)], 1e-6) << at + i;
    }
  }
  // HTTP: the same examples as JSON instances.
  Json body = {{"instances", Json::array()}};
  for (size_t i = 0; i < 50; ++i) {
    tf::Example ex;
    ASSERT_TRUE(ex.ParseFromString((*examples_)[i]));
    body["instances"].push_back(Instance(ex));
  }
  auto r = Post(s.http, "/v1/models/ctr:predict", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  Json got = Json::parse(r.body);
  ASSERT_EQ(got["predictions"].size(), 50u);
  for (size_t i = 0; i < 50; ++i) EXPECT_NEAR(got["predictions"][i].get<double>(), want[i], 1e-6);

  // A wrong model name over gRPC is NOT_FOUND naming both.
  v1::PredictRequest wrong;
  wrong.set_model_name("nope");
  wrong.add_examples((*examples_)[0]);
  v1::PredictResponse resp;
  grpc::ClientContext ctx;
  const grpc::Status st = stub->Predict(&ctx, wrong, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find("ctr"), std::string::npos) << st.error_message();

  // A name of 50 KB is quoted in part: a grpc-message past the client's
  // limit would reach it as no status at all.
  wrong.set_model_name(std::string(50000, 'm'));
  grpc::ClientContext ctx_long;
  const grpc::Status long_name = stub->Predict(&ctx_long, wrong, &resp);
  EXPECT_EQ(long_name.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LT(long_name.error_message().size(), 400u);
  EXPECT_NE(long_name.error_message().find("(50000 bytes)"), std::string::npos);

  // A record that is not a tf.train.Example is the caller's error.
  v1::PredictRequest garbage;
  garbage.add_examples("\x0a\xff\xff\xff");
  grpc::ClientContext ctx2;
  const grpc::Status bad = stub->Predict(&ctx2, garbage, &resp);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad.error_message();
  EXPECT_NE(bad.error_message().find("examples[0]"), std::string::npos) << bad.error_message();

  s.process->Signal(SIGTERM);
  EXPECT_EQ(s.process->Wait(std::chrono::seconds(30)), std::optional<int>(0));
}

// SIGTERM with requests sent and not yet answered: every one is answered
// (the drain), then the server exits 0.
TEST_F(ServeTest, SigtermAnswersTheRequestsAlreadySent) {
  Place("e1", "1");
  Serve s = StartServe({"--model", models_.path(), "--workers", "1"});
  ASSERT_GT(s.http, 0);
  Json body = {{"instances", Json::array()}};
  for (size_t i = 0; i < 4 * examples_->size(); ++i) {
    tf::Example ex;
    ASSERT_TRUE(ex.ParseFromString((*examples_)[i % examples_->size()]));
    body["instances"].push_back(Instance(ex));
  }
  const std::string text = body.dump();
  constexpr int kClients = 16;
  std::vector<int> status(kClients, 0);
  std::atomic<int> sent{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::string error;
      auto conn = testing::RawConnection::Connect(absl::StrCat("127.0.0.1:", s.http),
                                                  std::chrono::milliseconds(3000), &error);
      if (conn == nullptr) return;
      const bool ok = conn->Send(
          absl::StrCat("POST /v1/models/brook:predict HTTP/1.1\r\nHost: x\r\n",
                       "Connection: close\r\nContent-Length: ", text.size(), "\r\n\r\n", text),
          std::chrono::milliseconds(10000));
      sent.fetch_add(ok ? 1 : 0);
      std::string got;
      conn->ReadUntilClosed(std::chrono::milliseconds(30000), &got);
      if (got.compare(0, 9, "HTTP/1.1 ") == 0)
        status[static_cast<size_t>(c)] = std::stoi(got.substr(9, 3));
    });
  }
  while (sent.load() < kClients) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  s.process->Signal(SIGTERM);  // 16 x 2000 examples on one worker: most still queued
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(status, std::vector<int>(kClients, 200));
  EXPECT_EQ(s.process->Wait(std::chrono::seconds(30)), std::optional<int>(0));
}

TEST_F(ServeTest, TenSwapsUnderLoadFailNoRequest) {
  Place("e1", "1");
  Serve s = StartServe({"--model", models_.path(), "--poll-seconds", "0.1"});
  ASSERT_GT(s.http, 0);
  tf::Example ex;
  ASSERT_TRUE(ex.ParseFromString((*examples_)[0]));
  const std::string body = Json{{"instances", {Instance(ex)}}}.dump();
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::string first_failure;
  std::mutex mu;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      while (!stop.load()) {
        std::string error;
        auto r = testing::HttpRequest("127.0.0.1", s.http, "POST", "/v1/models/brook:predict", body,
                                      20000, &error);
        if (r && r->status == 200) {
          ok.fetch_add(1);
        } else {
          failed.fetch_add(1);
          std::lock_guard<std::mutex> lock(mu);
          if (first_failure.empty()) first_failure = r ? r->body : error;
        }
      }
    });
  }
  std::string error;
  for (int v = 2; v <= 11; ++v) {
    Place(v % 2 ? "e1" : "e2", std::to_string(v));
    // Wait until the server says it serves v.
    bool swapped = false;
    for (int i = 0; i < 600 && !swapped; ++i) {
      auto version = testing::ScrapeMetric(s.metrics, "brook_serve_model_version", &error);
      swapped = version && *version == v;
      if (!swapped) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(swapped) << "version " << v << " never served: " << error;
  }
  stop = true;
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0) << first_failure;
  EXPECT_GT(ok.load(), 40);
  EXPECT_EQ(testing::ScrapeMetric(s.metrics, "brook_serve_model_loads_total"), 11.0);
  // The last version answers with its own scores.
  auto r = Post(s.http, "/v1/models/brook:predict", body);
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.headers.find("X-Brook-Model-Version: 11"), std::string::npos) << r.headers;
  EXPECT_NEAR(Json::parse(r.body)["predictions"][0].get<double>(), Offline("e1")[0], 1e-6);
}

TEST_F(ServeTest, BadInputIsRefusedNamingItAndCounted) {
  Place("e2", "5");
  Serve s = StartServe({"--model", models_.path(), "--max-request-bytes", "64KiB"});
  ASSERT_GT(s.http, 0);
  struct Case {
    std::string path, body;
    int status;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"/v1/models/brook:predict", R"({"instances": [{"c": 1, "tag": "red", "x": "high"}]})", 400,
       "instances[0].x: expected float"},
      {"/v1/models/brook:predict", R"({"instances": [{"c": 1, "x": 0.5}]})", 400, "tag"},
      {"/v1/models/brook:predict", R"({"instances": [{"c": 1, "tag": "red", "x": 1, "z": 2}]})",
       400, "no feature \"z\""},
      {"/v1/models/brook:predict", "this is not json", 400, "not JSON"},
      {"/v1/models/other:predict", "{}", 404, "other"},
      {"/v1/models/brook/versions/4:predict", "{}", 404, "serving version 5"},
      {"/v1/models/brook:predict", std::string(100 << 10, '['), 413, "--max-request-bytes"},
  };
  for (const Case& c : cases) {
    auto r = Post(s.http, c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.path << " " << c.body.substr(0, 80) << ": " << r.body;
    Json j = Json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    EXPECT_NE(j["error"].get<std::string>().find(c.says), std::string::npos) << r.body;
  }
  // Still serving, and every code counted.
  std::string error;
  auto status = testing::HttpGet("127.0.0.1", s.http, "/v1/models/brook", 10000, &error);
  ASSERT_TRUE(status.has_value()) << error;
  EXPECT_EQ(status->status, 200);
  EXPECT_EQ(testing::ScrapeMetric(s.metrics, "brook_serve_http_requests_total{code=\"400\"}"), 4.0);
  EXPECT_EQ(testing::ScrapeMetric(s.metrics, "brook_serve_http_requests_total{code=\"404\"}"), 2.0);
  EXPECT_EQ(testing::ScrapeMetric(s.metrics, "brook_serve_http_requests_total{code=\"413\"}"), 1.0);
  auto page = testing::HttpGet(s.metrics, "/metrics", 10000, &error);
  ASSERT_TRUE(page.has_value()) << error;
  for (const char* name :
       {"brook_serve_http_request_duration_seconds_bucket", "brook_serve_batch_size_bucket",
        "brook_serve_staleness_seconds", "brook_serve_rows{tier=\"memory\"}",
        "brook_serve_rows{tier=\"rocksdb\"}", "brook_serve_model_export_timestamp_seconds",
        "brook_serve_memory_used_bytes", "brook_serve_memory_limit_bytes"}) {
    EXPECT_NE(page->body.find(name), std::string::npos) << name;
  }
  // Every family the server exports is documented.
  const std::string doc = testing::ReadFileOrDie(testing::SourceDir() + "/docs/metrics.md");
  for (absl::string_view line : absl::StrSplit(page->body, '\n')) {
    if (!absl::ConsumePrefix(&line, "# TYPE brook_serve_")) continue;
    const std::string family = absl::StrCat("`brook_serve_", line.substr(0, line.find(' ')), "`");
    EXPECT_NE(doc.find(family), std::string::npos) << family << " is not in docs/metrics.md";
  }
  // Refused requests are timed from their header too, not from the epoch.
  auto sum = testing::ScrapeMetric(s.metrics, "brook_serve_http_request_duration_seconds_sum");
  ASSERT_TRUE(sum.has_value());
  EXPECT_LT(*sum, 60.0);
  if (!testing::FindPromtool().empty()) {
    std::string out;
    EXPECT_EQ(testing::PromtoolCheckMetrics(page->body, &out), 0) << out;
  }
}

TEST_F(ServeTest, BadFlagsAreUsageErrorsNamingThem) {
  auto r = testing::RunCommand({BrookBinary(), "serve", "--model", dir_->Join("missing")});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(dir_->Join("missing")), std::string::npos) << r.output;
  r = testing::RunCommand(
      {BrookBinary(), "serve", "--model", dir_->Join("e1"), "--memory-limit", "64MiB"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--data-dir"), std::string::npos) << r.output;
  r = testing::RunCommand(
      {BrookBinary(), "serve", "--model", dir_->Join("e1"), "--http", "127.0.0.1:99999"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = testing::RunCommand({BrookBinary(), "serve", "--model", dir_->Join("e1"), "--follow-ps",
                           "nohost", "--check-config"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--follow-ps nohost"), std::string::npos) << r.output;
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--poll-seconds", "nan"},
                                              {"--poll-seconds", "1e-9"},
                                              {"--sync-seconds", "0"},
                                              {"--model-name", "a/b"},
                                              {"--model-name", ""},
                                              {"--follow-ps", ",,"},
                                              {"--follow-ps", "127.0.0.1:0"}}) {
    std::vector<std::string> argv = {BrookBinary(), "serve", "--model", dir_->Join("e1"),
                                     "--check-config"};
    argv.insert(argv.end(), bad.begin(), bad.end());
    r = testing::RunCommand(argv);
    EXPECT_EQ(r.exit_code, 2) << bad[0] << " " << bad[1] << ": " << r.output;
    EXPECT_NE(r.output.find(bad[0]), std::string::npos) << r.output;
  }
  testing::WriteFileOrDie(dir_->Join("a-file"), "x");
  r = testing::RunCommand({BrookBinary(), "serve", "--model", dir_->Join("a-file")});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not a directory"), std::string::npos) << r.output;
  r = testing::RunCommand({BrookBinary(), "serve", "--model", dir_->Join("e1"), "--check-config"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("config ok"), std::string::npos);
  // Two servers on one --data-dir would delete each other's rows: the
  // second is refused, naming the first.
  Serve a = StartServe(
      {"--model", dir_->Join("e1"), "--memory-limit", "1MiB", "--data-dir", dir_->Join("dd")});
  ASSERT_GT(a.http, 0);
  r = testing::RunCommand({BrookBinary(), "serve", "--model", dir_->Join("e1"), "--http",
                           "127.0.0.1:0", "--grpc", "", "--memory-limit", "1MiB", "--data-dir",
                           dir_->Join("dd")});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(absl::StrCat("in use by another process (pid ", a.process->pid())),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::is_empty(dir_->Join("dd")));
  // A taken port: exit 1 naming the address.
  Serve s = StartServe({"--model", dir_->Join("e1")});
  ASSERT_GT(s.http, 0);
  r = testing::RunCommand({BrookBinary(), "serve", "--model", dir_->Join("e1"), "--http",
                           absl::StrCat("127.0.0.1:", s.http), "--grpc", ""});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(absl::StrCat("127.0.0.1:", s.http)), std::string::npos) << r.output;
  // Found before the model is looked for: --wait-for-model on a directory
  // with no export does not wait (listening on nothing) for a port it
  // could never have.
  std::filesystem::create_directories(dir_->Join("none-yet"));
  r = testing::RunCommand({BrookBinary(), "serve", "--model", dir_->Join("none-yet"),
                           "--wait-for-model", "--http", "127.0.0.1:0", "--grpc", s.grpc},
                          20);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(absl::StrCat("--grpc ", s.grpc, ": the port is taken")),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("waiting"), std::string::npos) << r.output;
  // Addresses no listener could have are usage errors naming the flag, in
  // --check-config too, and before any listener prints its own noise. So
  // are two of the server's own listeners on one port, and what the
  // metrics server (IPv4 only, a.b.c.d in full) cannot bind.
  const std::vector<std::vector<std::string>> bad_addresses = {
      {"--http", "999.1.1.1:0"},
      {"--http", "example.com:0"},
      {"--grpc", "1.2.3:5"},
      {"--grpc", "203.0.113.9:0"},
      {"--metrics-listen", "198.51.100.7:1"},
      {"--metrics-listen", "[::1]:0"},
      {"--metrics-listen", "127.1:0"},
      {"--http", "127.0.0.1:41234", "--grpc", "127.0.0.1:41234"},
      {"--grpc", "127.0.0.1:41235", "--metrics-listen", "0.0.0.0:41235"}};
  for (const std::vector<std::string>& args : bad_addresses) {
    for (bool check : {true, false}) {
      std::vector<std::string> argv = {BrookBinary(), "serve", "--model", dir_->Join("e1")};
      argv.insert(argv.end(), args.begin(), args.end());
      // Free ports for the listeners the case leaves alone (a flag given
      // twice is a usage error of its own).
      for (const char* flag : {"--http", "--grpc"}) {
        if (std::find(args.begin(), args.end(), flag) == args.end()) {
          argv.insert(argv.end(), {flag, "127.0.0.1:0"});
        }
      }
      if (check) argv.push_back("--check-config");
      r = testing::RunCommand(argv, 30);
      const std::string what = absl::StrJoin(args, " ");
      EXPECT_EQ(r.exit_code, 2) << what << ": " << r.output;
      for (size_t i = 0; i < args.size(); i += 2) {
        EXPECT_NE(r.output.find(args[i]), std::string::npos) << what << ": " << r.output;
      }
      EXPECT_EQ(r.output.find("required but received"), std::string::npos) << r.output;
      EXPECT_EQ(r.output.find("chttp2"), std::string::npos) << r.output;
      EXPECT_EQ(r.output.find("CivetServer"), std::string::npos) << r.output;
      EXPECT_EQ(r.output.find("serving version"), std::string::npos) << r.output;  // not loaded
    }
  }
}

}  // namespace
}  // namespace brook
