// The PS data path is authenticated: a `brook ps` with a token refuses every
// call but Health and Describe without it, at once and counted; a PS open to
// the network with neither a token nor mutual TLS does not start unless told
// to accept the risk; a whole job (chief, 2 PS, trainer) runs with one token
// from the environment, and a trainer with the wrong PS token fails its job
// naming the PS and the token. Real processes on run-time ports.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "brook/v1/chief.pb.h"
#include "brook/v1/node.grpc.pb.h"
#include "chief/client/chief_client.h"
#include "ps/client/grpc_ps_client.h"
#include "tests/testing/http_get.h"
#include "tests/testing/process.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::ChildProcess;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunCommand;
using namespace std::chrono_literals;

constexpr char kToken[] = "ps-auth-test-token-8c1e4f27a9";
constexpr char kWrongToken[] = "not-the-ps-token-0000000000";

// One series' value on a /metrics page (a failed scrape fails the test).
std::optional<double> Metric(const std::string& metrics_address, const std::string& series) {
  std::string error;
  std::optional<double> v = testing::ScrapeMetric(metrics_address, series, &error);
  EXPECT_TRUE(v.has_value() || error.empty()) << error;
  return v;
}

// The sum of every series of `name` on a /metrics page.
double MetricSum(const std::string& metrics_address, const std::string& name) {
  std::string error;
  auto page = testing::HttpGet(metrics_address, "/metrics", 5000, &error);
  EXPECT_TRUE(page.has_value()) << error;
  double sum = 0;
  if (!page.has_value()) return sum;
  for (absl::string_view line : absl::StrSplit(page->body, '\n')) {
    if (!absl::StartsWith(line, name + "{") && !absl::StartsWith(line, name + " ")) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) sum += v;
  }
  return sum;
}

std::unique_ptr<ps::GrpcPsClient> Client(const std::string& address, const std::string& token,
                                         const std::string& source = "the test") {
  ps::GrpcPsClientOptions options;
  options.addresses = {address};
  options.token = {.token = token, .source = token.empty() ? "" : source};
  auto client = ps::GrpcPsClient::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

// This machine's first non-loopback IPv4 address, else 0.0.0.0 (which is
// not loopback either).
std::string NonLoopbackHost() {
  ifaddrs* list = nullptr;
  std::string host = "0.0.0.0";
  if (getifaddrs(&list) != 0) return host;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if ((ntohl(a->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN] = {};
    if (inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text)) != nullptr) {
      host = text;
      break;
    }
  }
  freeifaddrs(list);
  return host;
}

class PsAuthTest : public ::testing::Test {
 protected:
  void SetUp() override { WriteToken("token", kToken); }
  // Owner-only, as a Secret is mounted: no mode warning in the log.
  void WriteToken(const std::string& name, const std::string& token) {
    testing::WriteFileOrDie(dir_.Join(name), token + "\n");
    ASSERT_EQ(chmod(dir_.Join(name).c_str(), 0600), 0);
  }
  testing::TempDir dir_;
};

TEST_F(PsAuthTest, ATokenPsRefusesCallsWithoutItAtOnceAndCountsThem) {
  std::string error;
  auto ps = testing::StartBrookPs(0, 1, {"--auth-token-file", dir_.Join("token")}, 30s, &error);
  ASSERT_TRUE(ps.has_value()) << error;

  // Health and Describe need no token: readiness and the wrong-target
  // checks (WaitForReady asks both) work for anyone.
  auto anonymous = Client(ps->address, "");
  ASSERT_NE(anonymous, nullptr);
  BROOK_ASSERT_OK(anonymous->WaitForReady(absl::Seconds(20)));
  {
    grpc::ClientContext context;
    v1::DescribeResponse node;
    auto channel = grpc::CreateChannel(ps->address, grpc::InsecureChannelCredentials());
    const grpc::Status s = v1::Node::NewStub(channel)->Describe(&context, {}, &node);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(node.kind(), v1::NODE_KIND_PS);
  }

  // No token: UNAUTHENTICATED on the first attempt, far inside the 30 s
  // retry window, naming the PS and where the token goes.
  const auto start = std::chrono::steady_clock::now();
  const absl::Status none = anonymous->CreateTable(testing::CounterTable("emb", 4));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(absl::IsUnauthenticated(none)) << none;
  EXPECT_LT(took, 2s) << "an UNAUTHENTICATED call was retried";
  EXPECT_THAT(none.message(), HasSubstr(ps->address));
  EXPECT_THAT(none.message(), HasSubstr("requires a bearer token"));
  EXPECT_THAT(none.message(), HasSubstr("no PS token"));
  EXPECT_THAT(none.message(), HasSubstr("--ps-token-file"));
  EXPECT_THAT(none.message(), HasSubstr("BROOK_PS_TOKEN"));
  EXPECT_EQ(anonymous->retries(), 0u);

  auto wrong = Client(ps->address, kWrongToken, "--ps-token-file /wrong");
  ASSERT_NE(wrong, nullptr);
  const absl::Status bad = wrong->CreateTable(testing::CounterTable("emb", 4));
  EXPECT_TRUE(absl::IsUnauthenticated(bad)) << bad;
  EXPECT_THAT(bad.message(), HasSubstr("wrong bearer token"));
  EXPECT_THAT(bad.message(), HasSubstr("--ps-token-file /wrong"));
  EXPECT_THAT(bad.message(), Not(HasSubstr(kToken)));
  std::vector<float> out(4);
  const uint64_t key = 7;
  EXPECT_TRUE(absl::IsUnauthenticated(wrong->Pull("emb", {&key, 1}, absl::MakeSpan(out))));

  // The right token: the data path works.
  auto right = Client(ps->address, kToken);
  ASSERT_NE(right, nullptr);
  BROOK_ASSERT_OK(right->CreateTable(testing::CounterTable("emb", 4)));
  BROOK_ASSERT_OK(right->Push("emb", {&key, 1}, std::vector<float>(4, -1.0f), 1));
  BROOK_ASSERT_OK(right->Pull("emb", {&key, 1}, absl::MakeSpan(out)));
  EXPECT_EQ(out, std::vector<float>(4, 1.0f));
  // Nothing the refused calls sent reached the table.
  EXPECT_TRUE(absl::IsUnauthenticated(anonymous->DropTable("emb")));
  BROOK_ASSERT_OK(right->Pull("emb", {&key, 1}, absl::MakeSpan(out)));
  EXPECT_EQ(out, std::vector<float>(4, 1.0f));

  EXPECT_EQ(Metric(ps->metrics_address,
                   "brook_ps_unauthenticated_requests_total{method=\"CreateTable\"}"),
            2.0);
  EXPECT_EQ(Metric(ps->metrics_address, "brook_ps_unauthenticated_requests_total{method=\"Pull\"}"),
            1.0);
  EXPECT_EQ(
      Metric(ps->metrics_address, "brook_ps_unauthenticated_requests_total{method=\"DropTable\"}"),
      1.0);
  EXPECT_EQ(
      Metric(ps->metrics_address, "brook_ps_unauthenticated_requests_total{method=\"Health\"}"),
      0.0);
  ps->process->Signal(SIGTERM);
  EXPECT_EQ(ps->process->Wait(30s), 0);
}

TEST_F(PsAuthTest, ClientsDoNotSendATokenInPlaintextOffTheMachine) {
  ps::GrpcPsClientOptions options;
  options.addresses = {"127.0.0.1:1", "10.77.0.10:7070"};
  options.token = {.token = kToken, .source = "$BROOK_PS_TOKEN"};
  const absl::Status refused = ps::GrpcPsClient::Create(options).status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("in plaintext to 10.77.0.10:7070"));
  // A default (the chief token) is left out instead: the PS says if it
  // needed one.
  options.token.fallback = true;
  EXPECT_TRUE(ps::GrpcPsClient::Create(options).ok());

  // --check-config refuses what the command would refuse at start.
  for (const char* role : {"trainer", "chief"}) {
    std::vector<std::string> argv = {BrookBinary(),
                                     role,
                                     "--ps",
                                     "127.0.0.1:1,10.77.0.10:7070",
                                     "--ps-token-file",
                                     dir_.Join("token"),
                                     "--check-config"};
    if (std::string(role) == "trainer") {
      argv.insert(argv.end(), {"--job", "job.yaml"});
    } else {
      argv.insert(argv.end(), {"--state-dir", dir_.Join("state")});
    }
    auto check = RunCommand(argv);
    EXPECT_EQ(check.exit_code, 2) << role << ": " << check.output;
    EXPECT_THAT(check.output, HasSubstr("in plaintext to 10.77.0.10:7070")) << role;
    EXPECT_THAT(check.output, Not(HasSubstr("config ok"))) << role;
  }
}

TEST_F(PsAuthTest, AnOpenPsOffLoopbackRefusesToStartUnlessTheRiskIsAccepted) {
  const std::string host = NonLoopbackHost();
  for (const std::string& listen : {host + ":0", std::string("0.0.0.0:0"), std::string("[::]:0")}) {
    auto r = RunCommand(
        {BrookBinary(), "ps", "--listen", listen, "--metrics-listen", "127.0.0.1:0"}, 60);
    EXPECT_EQ(r.exit_code, 2) << listen << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("refusing to serve " + listen));
    EXPECT_THAT(r.output, HasSubstr("--auth-token-file"));
    EXPECT_THAT(r.output, HasSubstr("$BROOK_PS_TOKEN"));
    EXPECT_THAT(r.output, HasSubstr("mutual TLS"));
    EXPECT_THAT(r.output, HasSubstr("--allow-unauthenticated"));
    EXPECT_THAT(r.output, Not(HasSubstr("listening on")));
  }
  // --check-config says the same, and the auth mode when it is fine.
  auto check = RunCommand({BrookBinary(), "ps", "--listen", "0.0.0.0:7070", "--check-config"});
  EXPECT_EQ(check.exit_code, 2) << check.output;
  EXPECT_THAT(check.output, HasSubstr("--allow-unauthenticated"));
  auto with_token = RunCommand({BrookBinary(), "ps", "--listen", "0.0.0.0:7070",
                                "--auth-token-file", dir_.Join("token"), "--check-config"});
  EXPECT_EQ(with_token.exit_code, 0) << with_token.output;
  EXPECT_THAT(with_token.output, HasSubstr("auth: bearer token"));
  auto env_token = RunCommand({"/usr/bin/env", absl::StrCat("BROOK_PS_TOKEN=", kToken),
                               BrookBinary(), "ps", "--listen", "0.0.0.0:7070", "--check-config"});
  EXPECT_EQ(env_token.exit_code, 0) << env_token.output;
  auto short_token = RunCommand({"/usr/bin/env", "BROOK_PS_TOKEN=short", BrookBinary(), "ps",
                                 "--listen", "0.0.0.0:7070", "--check-config"});
  EXPECT_EQ(short_token.exit_code, 2) << short_token.output;
  EXPECT_THAT(short_token.output, HasSubstr("$BROOK_PS_TOKEN"));
  auto allowed = RunCommand({BrookBinary(), "ps", "--listen", "0.0.0.0:7070",
                             "--allow-unauthenticated", "--check-config"});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.output;
  EXPECT_THAT(allowed.output, HasSubstr("warning: --allow-unauthenticated"));
  auto loopback = RunCommand({BrookBinary(), "ps", "--listen", "localhost:7070", "--check-config"});
  EXPECT_EQ(loopback.exit_code, 0) << loopback.output;
  EXPECT_THAT(loopback.output, HasSubstr("auth: none (loopback only)"));

  // Accepted, it starts and serves.
  std::string error;
  auto ps = testing::StartBrookPs(0, 1, {"--allow-unauthenticated"}, 30s, &error, host + ":0");
  ASSERT_TRUE(ps.has_value()) << error;
  ps->process->Signal(SIGTERM);
  EXPECT_EQ(ps->process->Wait(30s), 0);
}

// Chief, 2 PS and a trainer, the token from the environment as the chart
// gives it; then a trainer whose explicit PS token is wrong.
TEST_F(PsAuthTest, AJobRunsWithOneClusterTokenAndAWrongPsTokenFailsItNamingThePs) {
  auto train = RunCommand({BrookBinary(), "data", "convert", "--schema", "adult", "--shards", "2",
                           "--prefix", "train", "--out", dir_.Join("train"),
                           testing::SharedDataDir() + "/adult/adult.train.csv"});
  ASSERT_EQ(train.exit_code, 0) << train.output;
  testing::ScopedEnv ps_env("BROOK_PS_TOKEN", kToken);
  testing::ScopedEnv chief_env("BROOK_CHIEF_TOKEN", kToken);
  testing::ScopedEnv client_env("BROOK_TOKEN", kToken);

  std::string error;
  std::vector<testing::PsProcess> ps;
  std::string ps_list;
  for (int i = 0; i < 2; ++i) {
    auto p = testing::StartBrookPs(i, 2, {}, 30s, &error);
    ASSERT_TRUE(p.has_value()) << error;
    ps_list += (i ? "," : "") + p->address;
    ps.push_back(std::move(*p));
  }
  auto chief = ChildProcess::Start(
      {BrookBinary(), "chief", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
       "--state-dir", dir_.Join("chief-state"), "--ps", ps_list, "--lease-seconds", "2"},
      &error);
  ASSERT_NE(chief, nullptr) << error;
  auto line = chief->WaitForLine("brook chief listening on", 30s);
  ASSERT_TRUE(line.has_value()) << "no listening line from brook chief";
  std::string chief_address = line->substr(std::string("brook chief listening on ").size());
  chief_address = chief_address.substr(0, chief_address.find(' '));

  auto start_trainer = [&](const std::string& id, std::vector<std::string> extra) {
    std::vector<std::string> argv = {BrookBinary(),     "trainer", "--chief",       chief_address,
                                     "--node-id",       id,        "--cpu-threads", "1",
                                     "--parse-threads", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto t = ChildProcess::Start(argv, &error);
    EXPECT_NE(t, nullptr) << error;
    return t;
  };
  auto job_yaml = [&](const std::string& name) {
    const std::string path = dir_.Join(name + ".yaml");
    testing::WriteFileOrDie(
        path, absl::StrCat(
                  "name: ", name, "\ndata:\n  train: [", dir_.Join("train/train-*.tfrecord"),
                  "]\n  records_per_unit: 8192\nfeatures: ", dir_.Join("train/feature_spec.yaml"),
                  "\nmodel_file: ", testing::SourceDir(), "/examples/adult/wide_deep.yaml\n",
                  "training: {batch_size: 1024, epochs: 1, seed: 1, retry_seconds: 30}\n"
                  "trainers: 1\n"));
    return path;
  };
  chief::ChiefClientOptions options;
  options.bearer_token = kToken;
  auto client = chief::ChiefClient::Connect(chief_address, options);
  ASSERT_TRUE(client.ok()) << client.status();
  auto wait_job = [&](const std::string& id) {
    v1::GetJobRequest get;
    get.set_job_id(id);
    v1::JobStatus status;
    const auto deadline = std::chrono::steady_clock::now() + 240s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto s = (*client)->GetJob(get);
      EXPECT_TRUE(s.ok()) << s.status();
      if (!s.ok()) break;
      status = *s;
      if (status.state() == "SUCCEEDED" || status.state() == "FAILED") break;
      std::this_thread::sleep_for(100ms);
    }
    return status;
  };

  auto trainer = start_trainer("t0", {});
  ASSERT_NE(trainer, nullptr);
  auto submit = RunCommand({BrookBinary(), "submit", job_yaml("authed"), "--chief", chief_address});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const v1::JobStatus good = wait_job("authed");
  ASSERT_EQ(good.state(), "SUCCEEDED") << good.DebugString();
  trainer->Signal(SIGTERM);
  EXPECT_EQ(trainer->Wait(30s), 0);

  // The chief token is right (from $BROOK_TOKEN); the PS token is not.
  WriteToken("wrong", kWrongToken);
  auto wrong = start_trainer("t1", {"--ps-token-file", dir_.Join("wrong")});
  ASSERT_NE(wrong, nullptr);
  submit = RunCommand({BrookBinary(), "submit", job_yaml("refused"), "--chief", chief_address});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const v1::JobStatus refused = wait_job("refused");
  ASSERT_EQ(refused.state(), "FAILED") << refused.DebugString();
  EXPECT_THAT(refused.message(), HasSubstr("wrong bearer token")) << refused.DebugString();
  EXPECT_THAT(refused.message(),
              ::testing::AnyOf(HasSubstr(ps[0].address), HasSubstr(ps[1].address)))
      << refused.DebugString();
  EXPECT_THAT(refused.message(), HasSubstr("--ps-token-file " + dir_.Join("wrong")))
      << refused.DebugString();
  double refusals = 0;
  for (const auto& p : ps) {
    refusals += MetricSum(p.metrics_address, "brook_ps_unauthenticated_requests_total");
  }
  EXPECT_GT(refusals, 0);

  wrong->Signal(SIGTERM);
  EXPECT_EQ(wrong->Wait(30s), 0);
  chief->Signal(SIGTERM);
  EXPECT_EQ(chief->Wait(30s), 0);
}

}  // namespace
}  // namespace brook
