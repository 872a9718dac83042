// A whole cluster with security on, as the Helm chart runs it: `brook ps`,
// `brook chief` and `brook trainer --chief` processes on 127.0.0.1 with mutual
// TLS on every gRPC port (certificates made here with openssl) and the chief
// requiring a bearer token. An Adult job submitted with the `brook` CLI trains
// to completion; clients without the token or a trusted certificate get
// nothing; no /metrics page shows the token, a key or a data value.
#include <signal.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "brook/v1/chief.pb.h"
#include "chief/client/chief_client.h"
#include "tests/testing/http_get.h"
#include "tests/testing/process.h"
#include "tests/testing/test_pki.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::ChildProcess;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunCommand;
using namespace std::chrono_literals;

constexpr char kToken[] = "brook-e2e-token-5f2c9a7e41d3b8";
constexpr uint64_t kAdultTrainRows = 32561;

class SecureClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.ok());
    testing::WriteFileOrDie(dir_.Join("token"), std::string(kToken) + "\n");
    auto train = RunCommand({BrookBinary(), "data", "convert", "--schema", "adult", "--shards", "2",
                             "--prefix", "train", "--out", dir_.Join("train"),
                             testing::SharedDataDir() + "/adult/adult.train.csv"});
    ASSERT_EQ(train.exit_code, 0) << train.output;
  }

  // Mutual TLS flags for a node (servers and clients share one certificate
  // per role here: the server certificate names 127.0.0.1).
  std::vector<std::string> ServerTls() const {
    return {"--tls-cert", pki_.server_cert(), "--tls-key",   pki_.server_key(),
            "--tls-ca",   pki_.ca_cert(),     "--tls-mutual"};
  }
  std::vector<std::string> ClientTls() const {
    return {"--tls-cert", pki_.client_cert(), "--tls-key",   pki_.client_key(),
            "--tls-ca",   pki_.ca_cert(),     "--tls-mutual"};
  }

  testing::CommandResult Cli(std::vector<std::string> args, const std::vector<std::string>& extra) {
    args.insert(args.begin(), BrookBinary());
    args.insert(args.end(), {"--chief", chief_address_});
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCommand(args, 60);
  }

  std::string Scrape(const std::string& address) {
    std::string error;
    auto page = testing::HttpGet(address, "/metrics", 5000, &error);
    EXPECT_TRUE(page.has_value()) << address << ": " << error;
    return page ? page->body : "";
  }

  testing::TestPki pki_;
  testing::TempDir dir_;
  std::string chief_address_;
};

TEST_F(SecureClusterTest, AJobTrainsOverMutualTlsWithATokenAndOutsidersGetNothing) {
  std::string error;
  std::vector<std::string> ps_tls = ServerTls();
  auto ps = testing::StartBrookPs(0, 1, ps_tls, 30s, &error);
  ASSERT_TRUE(ps.has_value()) << error;

  std::vector<std::string> chief_argv = {BrookBinary(),
                                         "chief",
                                         "--listen",
                                         "127.0.0.1:0",
                                         "--metrics-listen",
                                         "127.0.0.1:0",
                                         "--state-dir",
                                         dir_.Join("chief-state"),
                                         "--ps",
                                         ps->address,
                                         "--auth-token-file",
                                         dir_.Join("token")};
  // The chief serves with the server certificate and dials the PS with it
  // too: a certificate with both purposes is what the chart mounts.
  for (const std::string& a : ServerTls()) chief_argv.push_back(a);
  auto chief = ChildProcess::Start(chief_argv, &error);
  ASSERT_NE(chief, nullptr) << error;
  auto line = chief->WaitForLine("brook chief listening on", 30s);
  ASSERT_TRUE(line.has_value()) << "no listening line from brook chief";
  chief_address_ = line->substr(std::string("brook chief listening on ").size());
  const std::string chief_metrics = line->substr(line->rfind(' ') + 1);
  chief_address_ = chief_address_.substr(0, chief_address_.find(' '));

  // The token comes from the environment here, as the chart gives it.
  testing::ScopedEnv token_env("BROOK_TOKEN", kToken);
  std::vector<std::string> trainer_argv = {
      BrookBinary(),     "trainer", "--chief",          chief_address_,
      "--node-id",       "t0",      "--cpu-threads",    "1",
      "--parse-threads", "1",       "--metrics-listen", "127.0.0.1:0"};
  for (const std::string& a : ClientTls()) trainer_argv.push_back(a);
  auto trainer = ChildProcess::Start(trainer_argv, &error);
  ASSERT_NE(trainer, nullptr) << error;
  auto trainer_line = trainer->WaitForLine("brook trainer metrics on", 30s);
  ASSERT_TRUE(trainer_line.has_value());
  const std::string trainer_metrics = trainer_line->substr(trainer_line->rfind(' ') + 1);

  const std::string job = dir_.Join("job.yaml");
  testing::WriteFileOrDie(
      job,
      absl::StrCat("name: secure\ndata:\n  train: [", dir_.Join("train/train-*.tfrecord"),
                   "]\n  records_per_unit: 8192\nfeatures: ", dir_.Join("train/feature_spec.yaml"),
                   "\nmodel_file: ", testing::SourceDir(), "/examples/adult/wide_deep.yaml\n",
                   "training: {batch_size: 512, epochs: 1, seed: 1}\ntrainers: 1\n"));

  // Outsiders first: nothing they send is queued.
  {
    testing::ScopedEnv no_token("BROOK_TOKEN", std::nullopt);
    auto no_token_submit = Cli({"submit", job}, ClientTls());
    EXPECT_EQ(no_token_submit.exit_code, 5) << no_token_submit.output;
    EXPECT_THAT(no_token_submit.output, HasSubstr("bearer token"));
    testing::ScopedEnv wrong("BROOK_TOKEN", "wrong-token-0123456789");
    auto wrong_list = Cli({"list"}, ClientTls());
    EXPECT_EQ(wrong_list.exit_code, 5) << wrong_list.output;
    EXPECT_THAT(wrong_list.output, HasSubstr("wrong bearer token"));
  }
  // The right token but no client certificate, or plaintext: no connection.
  auto no_cert = Cli({"submit", job}, {"--tls-ca", pki_.ca_cert()});
  EXPECT_EQ(no_cert.exit_code, 4) << no_cert.output;
  auto plaintext = Cli({"list"}, {});
  EXPECT_EQ(plaintext.exit_code, 4) << plaintext.output;
  auto list = Cli({"list", "--output", "json"}, ClientTls());
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_THAT(list.output, Not(HasSubstr("\"id\"")));  // no job was queued

  auto submit = Cli({"submit", job}, ClientTls());
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string job_id = "secure";                   // the name stands for its job
  ASSERT_THAT(submit.output, HasSubstr(job_id + "-2"));  // the id: name and date

  chief::ChiefClientOptions options;
  options.bearer_token = kToken;
  options.tls = {.cert_file = pki_.client_cert(),
                 .key_file = pki_.client_key(),
                 .ca_file = pki_.ca_cert(),
                 .mutual = true};
  auto client = chief::ChiefClient::Connect(chief_address_, options);
  ASSERT_TRUE(client.ok()) << client.status();
  v1::GetJobRequest get;
  get.set_job_id(job_id);
  v1::JobStatus status;
  const auto deadline = std::chrono::steady_clock::now() + 240s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto s = (*client)->GetJob(get);
    ASSERT_TRUE(s.ok()) << s.status();
    status = *s;
    if (status.state() == "SUCCEEDED" || status.state() == "FAILED") break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(status.state(), "SUCCEEDED") << status.DebugString();
  ASSERT_EQ(status.examples_per_epoch_size(), 1);
  EXPECT_EQ(status.examples_per_epoch(0), kAdultTrainRows);

  // `brook status` over the same mutual TLS with the token from a file.
  testing::ScopedEnv no_token("BROOK_TOKEN", std::nullopt);
  std::vector<std::string> with_file = ClientTls();
  with_file.insert(with_file.end(), {"--token-file", dir_.Join("token")});
  auto st = Cli({"status", job_id}, with_file);
  EXPECT_EQ(st.exit_code, 0) << st.output;
  EXPECT_THAT(st.output, HasSubstr("SUCCEEDED"));

  // No page shows the token, key material or a value from the data (Adult's
  // categorical strings reach the PS only as hashed keys).
  for (const std::string& address : {chief_metrics, ps->metrics_address, trainer_metrics}) {
    const std::string page = Scrape(address);
    EXPECT_THAT(page, HasSubstr("brook_")) << address;
    for (const char* secret : {kToken, "PRIVATE KEY", "BEGIN CERTIFICATE", "Never-married",
                               "Bachelors", "Exec-managerial", "United-States"}) {
      EXPECT_THAT(page, Not(HasSubstr(secret))) << address << " shows " << secret;
    }
  }
  // The refusals were counted where an operator would look.
  EXPECT_THAT(Scrape(chief_metrics), HasSubstr("code=\"UNAUTHENTICATED\""));

  trainer->Signal(SIGTERM);
  EXPECT_EQ(trainer->Wait(30s), 0);
  chief->Signal(SIGTERM);
  EXPECT_EQ(chief->Wait(30s), 0);
}

}  // namespace
}  // namespace brook
