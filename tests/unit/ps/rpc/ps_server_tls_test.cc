// PsServer with mutual TLS over real loopback TCP: a client holding a
// certificate from the cluster's CA pulls and pushes; one without a
// certificate, with one from another CA, or in plaintext can do neither, and
// its attempts change nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ps/client/grpc_ps_client.h"
#include "ps/rpc/ps_server.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/test_pki.h"
#include "tests/testing/test_util.h"

namespace brook::ps::rpc {
namespace {

using ::testing::HasSubstr;

class PsServerTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.ok());
    PsServerOptions options;
    options.tls = {.cert_file = pki_.server_cert(),
                   .key_file = pki_.server_key(),
                   .ca_file = pki_.ca_cert(),
                   .mutual = true};
    absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // Outsiders' calls fail at the handshake, retried as UNAVAILABLE until the
  // deadline: keep theirs short.
  std::unique_ptr<GrpcPsClient> Client(const security::TlsOptions& tls,
                                       absl::Duration deadline = absl::Seconds(10)) {
    GrpcPsClientOptions o;
    o.addresses = {server_->address()};
    o.deadline = deadline;
    o.tls = tls;
    absl::StatusOr<std::unique_ptr<GrpcPsClient>> client = GrpcPsClient::Create(o);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  security::TlsOptions Trusted() const {
    return {.cert_file = pki_.client_cert(),
            .key_file = pki_.client_key(),
            .ca_file = pki_.ca_cert(),
            .mutual = true};
  }

  testing::TestPki pki_;
  std::unique_ptr<PsServer> server_;
};

TEST_F(PsServerTlsTest, OnlyClientsWithACertificateFromTheClusterCaPullAndPush) {
  std::unique_ptr<GrpcPsClient> trusted = Client(Trusted());
  BROOK_ASSERT_OK(trusted->WaitForReady(absl::Seconds(10)));
  BROOK_ASSERT_OK(trusted->CreateTable(testing::CounterTable("emb", 4)));
  const std::vector<uint64_t> keys = {7, 8};
  const std::vector<float> grads(8, -1.0f);  // SGD lr 1: rows become +1
  BROOK_ASSERT_OK(trusted->Push("emb", keys, grads, 1));

  const security::TlsOptions no_cert{.ca_file = pki_.ca_cert()};
  const security::TlsOptions rogue{.cert_file = pki_.rogue_client_cert(),
                                   .key_file = pki_.rogue_client_key(),
                                   .ca_file = pki_.ca_cert()};
  for (const security::TlsOptions& tls : {no_cert, rogue, security::TlsOptions{}}) {
    std::unique_ptr<GrpcPsClient> outsider = Client(tls, absl::Milliseconds(700));
    std::vector<float> rows(8, 0.0f);
    const absl::Status pull = outsider->Pull("emb", keys, absl::MakeSpan(rows));
    EXPECT_TRUE(absl::IsUnavailable(pull) || absl::IsDeadlineExceeded(pull)) << pull;
    EXPECT_EQ(rows, std::vector<float>(8, 0.0f));  // nothing came back
    const absl::Status push = outsider->Push("emb", keys, grads, 2);
    EXPECT_TRUE(absl::IsUnavailable(push) || absl::IsDeadlineExceeded(push)) << push;
    EXPECT_FALSE(outsider->CreateTable(testing::CounterTable("intruder", 4)).ok());
  }

  // The refused pushes changed nothing.
  std::vector<float> rows(8, 0.0f);
  BROOK_ASSERT_OK(trusted->Pull("emb", keys, absl::MakeSpan(rows)));
  EXPECT_EQ(rows, std::vector<float>(8, 1.0f));
  const ServerStats stats = server_->parameter_server()->Stats();
  ASSERT_EQ(stats.tables.size(), 1u);
  EXPECT_EQ(stats.tables[0].name, "emb");
}

TEST(PsServerTlsStartTest, AMissingKeyFileIsInvalidArgumentNamingIt) {
  testing::TestPki pki;
  ASSERT_TRUE(pki.ok());
  PsServerOptions options;
  options.tls = {.cert_file = pki.server_cert(), .key_file = pki.Join("missing.key")};
  const absl::Status s = PsServer::Start(options).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--tls-key " + pki.Join("missing.key")));
}

}  // namespace
}  // namespace brook::ps::rpc
