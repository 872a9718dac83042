// ChiefServer's security over real gRPC on 127.0.0.1: the bearer token it
// requires, over plaintext loopback and over mutual TLS, and what its metrics
// page shows (refusals counted, the token never).
#include "chief/service/chief_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "chief/client/chief_client.h"
#include "tests/testing/http_get.h"
#include "tests/testing/test_pki.h"
#include "tests/testing/test_util.h"

namespace brook::chief {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "s3cret-token-0123456789";

class ChiefServerSecurityTest : public ::testing::Test {
 protected:
  void Start(const security::TlsOptions& tls) {
    ChiefServerOptions options;
    options.chief.state_dir = dir_.Join("state");
    options.tls = tls;
    options.auth_token = kToken;
    absl::StatusOr<std::unique_ptr<ChiefServer>> server = ChiefServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  std::unique_ptr<ChiefClient> Client(const std::string& token,
                                      const security::TlsOptions& tls = {}) {
    ChiefClientOptions options;
    options.bearer_token = token;
    options.tls = tls;
    absl::StatusOr<std::unique_ptr<ChiefClient>> client =
        ChiefClient::Connect(server_->address(), options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  std::string Scrape() {
    std::string error;
    std::optional<testing::HttpResponse> page =
        testing::HttpGet(server_->metrics_address(), "/metrics", 5000, &error);
    EXPECT_TRUE(page.has_value()) << error;
    return page ? page->body : "";
  }

  testing::TempDir dir_;
  std::unique_ptr<ChiefServer> server_;
};

TEST_F(ChiefServerSecurityTest, EveryCallButHealthNeedsTheToken) {
  Start({});
  std::unique_ptr<ChiefClient> none = Client("");
  std::unique_ptr<ChiefClient> wrong = Client("wrong-token-0123456789");
  std::unique_ptr<ChiefClient> right = Client(kToken);

  absl::Status s = none->ListJobs().status();
  EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("requires a bearer token"));
  s = wrong->ListJobs().status();
  EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("wrong bearer token"));

  v1::SubmitJobRequest submit;
  submit.set_spec_json("{}");
  EXPECT_TRUE(absl::IsUnauthenticated(none->SubmitJob(submit).status()));
  v1::RegisterNodeRequest reg;
  reg.set_role(v1::NODE_ROLE_TRAINER);
  reg.set_node_id("intruder");
  EXPECT_TRUE(absl::IsUnauthenticated(wrong->RegisterNode(reg).status()));
  // Nothing the refused calls asked for happened.
  absl::StatusOr<v1::ListJobsResponse> jobs = right->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->jobs_size(), 0);

  // Health stays open: Kubernetes probes carry no token, and it says nothing.
  EXPECT_TRUE(none->Health().ok());
  // The token reached the server: the chief accepted a submit (an invalid
  // spec is judged only after the token passed).
  s = right->SubmitJob(submit).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;

  const std::string page = Scrape();
  EXPECT_THAT(
      page,
      HasSubstr("brook_chief_requests_total{code=\"UNAUTHENTICATED\",method=\"ListJobs\"} 2"));
  EXPECT_THAT(page, Not(HasSubstr(kToken)));
}

TEST_F(ChiefServerSecurityTest, TheTokenTravelsOverMutualTlsAndCertificatelessClientsNeverGetIn) {
  testing::TestPki pki;
  ASSERT_TRUE(pki.ok());
  Start({.cert_file = pki.server_cert(),
         .key_file = pki.server_key(),
         .ca_file = pki.ca_cert(),
         .mutual = true});
  const security::TlsOptions client_tls{.cert_file = pki.client_cert(),
                                        .key_file = pki.client_key(),
                                        .ca_file = pki.ca_cert(),
                                        .mutual = true};
  EXPECT_TRUE(Client(kToken, client_tls)->ListJobs().ok());
  EXPECT_TRUE(absl::IsUnauthenticated(Client("", client_tls)->ListJobs().status()));
  // Right token, no client certificate: the handshake fails before any call.
  const absl::Status s = Client(kToken, {.ca_file = pki.ca_cert()})->ListJobs().status();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_TRUE(absl::IsUnavailable(Client(kToken)->Health().status()));
}

TEST(ChiefServerStartTest, BadCertificatesAndShortTokensAreRefusedBeforeAnythingOpens) {
  testing::TempDir dir;
  ChiefServerOptions options;
  options.chief.state_dir = dir.Join("state");
  options.tls.cert_file = dir.Join("missing.crt");
  options.tls.key_file = dir.Join("missing.key");
  absl::Status s = ChiefServer::Start(options).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(dir.Join("missing.crt")));
  options.tls = {};
  options.auth_token = "short";
  s = ChiefServer::Start(options).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--auth-token"));
  // Neither attempt created the state directory.
  EXPECT_NE(access(dir.Join("state").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace brook::chief
