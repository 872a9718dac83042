#include "security/tls.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>

#include "tests/testing/test_pki.h"
#include "tests/testing/test_util.h"

namespace brook::security {
namespace {

TEST(TlsOptionsTest, ServersNeedCertAndKeyAndMutualNeedsTheCa) {
  TlsOptions off;
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.ValidateForServer().ok());
  EXPECT_TRUE(off.ValidateForClient().ok());

  TlsOptions cert_only{.cert_file = "c.pem"};
  EXPECT_TRUE(cert_only.enabled());
  EXPECT_NE(cert_only.ValidateForServer().message().find("--tls-key"), std::string::npos);

  TlsOptions server{.cert_file = "c.pem", .key_file = "k.pem"};
  EXPECT_TRUE(server.ValidateForServer().ok());
  server.mutual = true;
  EXPECT_NE(server.ValidateForServer().message().find("--tls-ca"), std::string::npos);
  server.ca_file = "ca.pem";
  EXPECT_TRUE(server.ValidateForServer().ok());

  TlsOptions mutual_without_files{.mutual = true};
  EXPECT_FALSE(mutual_without_files.ValidateForServer().ok());
  EXPECT_FALSE(mutual_without_files.ValidateForClient().ok());
}

TEST(TlsOptionsTest, ClientsNeedTheCaAndACertificateForMutual) {
  TlsOptions client{.ca_file = "ca.pem"};
  EXPECT_TRUE(client.ValidateForClient().ok());
  client.mutual = true;
  EXPECT_NE(client.ValidateForClient().message().find("--tls-cert"), std::string::npos);
  client.cert_file = "c.pem";
  EXPECT_NE(client.ValidateForClient().message().find("go together"), std::string::npos);
  client.key_file = "k.pem";
  EXPECT_TRUE(client.ValidateForClient().ok());

  TlsOptions no_ca{.cert_file = "c.pem", .key_file = "k.pem"};
  EXPECT_NE(no_ca.ValidateForClient().message().find("--tls-ca"), std::string::npos);
}

TEST(TlsCredentialsTest, UnreadableOrNonPemFilesAreErrorsNamingFlagAndFile) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.Join("junk.pem"), "not a certificate\n");
  TlsOptions missing{.cert_file = dir.Join("nope.crt"), .key_file = dir.Join("junk.pem")};
  absl::Status s = ServerCredentials(missing).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("--tls-cert " + dir.Join("nope.crt")), std::string::npos) << s;

  TlsOptions junk{.cert_file = dir.Join("junk.pem"), .key_file = dir.Join("junk.pem")};
  s = ServerCredentials(junk).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("no PEM CERTIFICATE block"), std::string::npos) << s;

  TlsOptions junk_ca{.ca_file = dir.Join("junk.pem")};
  s = ChannelCredentials(junk_ca, nullptr).status();
  EXPECT_NE(s.message().find("--tls-ca " + dir.Join("junk.pem")), std::string::npos) << s;
}

// Answers every call UNIMPLEMENTED.
class NothingService final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "nothing here")); }
      void OnDone() override { delete this; }
    };
    return new Reactor;
  }
};

// A gRPC server with no Brook service behind `server_tls`: a call to any
// method comes back UNIMPLEMENTED when the connection (and so the TLS
// handshake) succeeded, UNAVAILABLE when it did not. That separates the TLS
// layer from every Brook service.
class TlsHandshakeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(pki_.ok()); }

  void Serve(const TlsOptions& server_tls) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = ServerCredentials(server_tls);
    ASSERT_TRUE(creds.ok()) << creds.status();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", *creds, &port_);
    builder.RegisterCallbackGenericService(&nothing_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port_, 0);
  }

  grpc::StatusCode Call(const TlsOptions& client_tls, const std::string& host = "127.0.0.1") {
    grpc::ChannelArguments args;
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
        ChannelCredentials(client_tls, &args);
    EXPECT_TRUE(creds.ok()) << creds.status();
    if (!creds.ok()) return grpc::StatusCode::INTERNAL;
    auto channel = grpc::CreateCustomChannel(host + ":" + std::to_string(port_), *creds, args);
    grpc::GenericStub stub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Slice payload(std::string("x"));
    grpc::ByteBuffer request(&payload, 1), response;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, "/brook.test.Nothing/Call", grpc::StubOptions(), &request, &response,
                   [&done](grpc::Status s) { done.set_value(s); });
    return done.get_future().get().error_code();
  }

  testing::TestPki pki_;
  NothingService nothing_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(TlsHandshakeTest, ServerTlsAcceptsClientsTrustingItsCaOnly) {
  Serve({.cert_file = pki_.server_cert(), .key_file = pki_.server_key()});
  EXPECT_EQ(Call({.ca_file = pki_.ca_cert()}), grpc::StatusCode::UNIMPLEMENTED);
  // Plaintext against TLS, and a client that trusts another CA.
  EXPECT_EQ(Call({}), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Call({.ca_file = pki_.rogue_ca_cert()}), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsHandshakeTest, TheServersNameIsCheckedAndCanBeOverridden) {
  Serve({.cert_file = pki_.server_cert(), .key_file = pki_.server_key()});
  // The certificate names 127.0.0.1 and localhost only. (Dialled by IP: a
  // name would go through c-ares, whose Debian build leaks under LSan.)
  EXPECT_EQ(Call({.ca_file = pki_.ca_cert(), .server_name = "brook-ps.example"}),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Call({.ca_file = pki_.ca_cert(), .server_name = "localhost"}),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(TlsHandshakeTest, MutualTlsRefusesClientsWithoutACertificateFromItsCa) {
  Serve({.cert_file = pki_.server_cert(),
         .key_file = pki_.server_key(),
         .ca_file = pki_.ca_cert(),
         .mutual = true});
  EXPECT_EQ(Call({.cert_file = pki_.client_cert(),
                  .key_file = pki_.client_key(),
                  .ca_file = pki_.ca_cert(),
                  .mutual = true}),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Call({.ca_file = pki_.ca_cert()}), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Call({.cert_file = pki_.rogue_client_cert(),
                  .key_file = pki_.rogue_client_key(),
                  .ca_file = pki_.ca_cert()}),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Call({}), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace brook::security
