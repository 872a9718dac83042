// common/rpc/grpc_error.h against real servers in this process: a PS (with
// and without TLS), its /metrics port (HTTP/1) and a closed port.
#include "common/rpc/grpc_error.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/endpoint_error.h"
#include "common/rpc/endpoint_probe.h"
#include "ps/rpc/ps_server.h"
#include "tests/testing/test_pki.h"

namespace brook::rpc {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<ps::rpc::PsServer> StartPsForErrors(const security::TlsOptions& tls = {}) {
  ps::rpc::PsServerOptions o;
  o.tls = tls;
  o.ps.shard_index = 1;
  o.ps.num_shards = 2;
  auto s = ps::rpc::PsServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

Peer PeerOf(const std::string& address, v1::NodeKind expected,
            const security::TlsOptions& tls = {}) {
  Peer p;
  p.address = address;
  p.expected = expected;
  p.tls = tls;
  return p;
}

TEST(GrpcErrorTest, ANodeOfAnotherKindSaysWhatItIs) {
  auto ps = StartPsForErrors();
  ASSERT_NE(ps, nullptr);
  EXPECT_TRUE(DiagnoseEndpoint(PeerOf(ps->address(), v1::NODE_KIND_PS)).ok());
  const absl::Status s = DiagnoseEndpoint(PeerOf(ps->address(), v1::NODE_KIND_CHIEF));
  EXPECT_TRUE(IsWrongEndpoint(s)) << s;
  EXPECT_EQ(s.message(), ps->address() + " is a brook PS (shard 1 of 2), not a chief");

  // What a client sees when it asks the PS a chief's RPC: UNIMPLEMENTED,
  // no message from gRPC; explained, code kept.
  const absl::Status call = FromGrpcError(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""),
                                          "ListJobs", PeerOf(ps->address(), v1::NODE_KIND_CHIEF));
  EXPECT_TRUE(absl::IsUnimplemented(call)) << call;
  EXPECT_TRUE(IsWrongEndpoint(call));
  EXPECT_EQ(call.message(), s.message());
}

TEST(GrpcErrorTest, AMetricsPortAndAClosedPortAreNamed) {
  auto ps = StartPsForErrors();
  ASSERT_NE(ps, nullptr);
  EXPECT_EQ(ProbePlaintext(ps->metrics_address(), absl::Seconds(2)).transport, Transport::kHttp1);
  EXPECT_EQ(ProbePlaintext(ps->address(), absl::Seconds(2)).transport, Transport::kHttp2);
  const absl::Status http = FromGrpcError(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses"), "Pull",
      PeerOf(ps->metrics_address(), v1::NODE_KIND_PS));
  EXPECT_TRUE(IsWrongEndpoint(http)) << http;
  EXPECT_EQ(http.message(), ps->metrics_address() +
                                " does not speak brook's gRPC (HTTP/1 answered: is it a /metrics "
                                "port?)");

  const absl::Status refused = FromGrpcError(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses"), "Pull",
      PeerOf("127.0.0.1:1", v1::NODE_KIND_PS));
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;  // retryable: it may come up
  EXPECT_FALSE(IsWrongEndpoint(refused));
  EXPECT_EQ(refused.message(), "127.0.0.1:1: connection refused (nothing listens there)");
}

TEST(GrpcErrorTest, TheServersOwnErrorsPassAndEmptyOnesGetAMessage) {
  auto ps = StartPsForErrors();
  ASSERT_NE(ps, nullptr);
  const Peer peer = PeerOf(ps->address(), v1::NODE_KIND_PS);
  EXPECT_EQ(FromGrpcError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "dim 0"), "Pull", peer),
            absl::InvalidArgumentError("dim 0"));
  // A PS shutting down says so itself: a probe that finds it up changes nothing.
  EXPECT_EQ(
      FromGrpcError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "PS is draining"), "Pull", peer),
      absl::UnavailableError("PS is draining"));
  const absl::Status empty =
      FromGrpcError(grpc::Status(grpc::StatusCode::UNKNOWN, ""), "Pull", peer);
  EXPECT_TRUE(absl::IsUnknown(empty));
  EXPECT_EQ(empty.message(), ps->address() + ": Pull failed with UNKNOWN and no message");
  EXPECT_TRUE(FromGrpcError(grpc::Status::OK, "Pull", peer).ok());
}

TEST(GrpcErrorTest, TlsOnOneSideOnlyAndRefusedCertificatesAreNamed) {
  testing::TestPki pki;
  ASSERT_TRUE(pki.ok());
  const security::TlsOptions server{.cert_file = pki.server_cert(),
                                    .key_file = pki.server_key(),
                                    .ca_file = pki.ca_cert(),
                                    .mutual = true};
  auto tls_ps = StartPsForErrors(server);
  ASSERT_NE(tls_ps, nullptr);
  const std::string a = tls_ps->address();

  const absl::Status plain = DiagnoseEndpoint(PeerOf(a, v1::NODE_KIND_PS));
  EXPECT_TRUE(IsWrongEndpoint(plain)) << plain;
  EXPECT_THAT(std::string(plain.message()),
              HasSubstr(a + ": TLS handshake failed: the server expects TLS (give --tls-ca"));

  const absl::Status no_cert =
      DiagnoseEndpoint(PeerOf(a, v1::NODE_KIND_PS, {.ca_file = pki.ca_cert()}));
  EXPECT_TRUE(IsWrongEndpoint(no_cert)) << no_cert;
  EXPECT_EQ(no_cert.message(), a + ": TLS handshake failed: the server requires a client "
                                   "certificate (give --tls-cert and --tls-key)");

  const absl::Status rogue = DiagnoseEndpoint(PeerOf(a, v1::NODE_KIND_PS,
                                                     {.cert_file = pki.rogue_client_cert(),
                                                      .key_file = pki.rogue_client_key(),
                                                      .ca_file = pki.ca_cert(),
                                                      .mutual = true}));
  EXPECT_TRUE(IsWrongEndpoint(rogue)) << rogue;
  EXPECT_THAT(std::string(rogue.message()),
              HasSubstr(a +
                        ": TLS handshake failed: the server refused this client's "
                        "certificate (--tls-cert " +
                        pki.rogue_client_cert() + ")"));

  const absl::Status untrusted =
      DiagnoseEndpoint(PeerOf(a, v1::NODE_KIND_PS, {.ca_file = pki.rogue_ca_cert()}));
  EXPECT_TRUE(IsWrongEndpoint(untrusted)) << untrusted;
  EXPECT_THAT(std::string(untrusted.message()),
              HasSubstr(a +
                        ": TLS handshake failed: the server's certificate is not trusted by "
                        "--tls-ca " +
                        pki.rogue_ca_cert()));

  const security::TlsOptions client{.cert_file = pki.client_cert(),
                                    .key_file = pki.client_key(),
                                    .ca_file = pki.ca_cert(),
                                    .mutual = true};
  EXPECT_TRUE(DiagnoseEndpoint(PeerOf(a, v1::NODE_KIND_PS, client)).ok());

  // TLS here, plaintext there.
  auto plain_ps = StartPsForErrors();
  ASSERT_NE(plain_ps, nullptr);
  const absl::Status tls_to_plain =
      DiagnoseEndpoint(PeerOf(plain_ps->address(), v1::NODE_KIND_PS, client));
  EXPECT_TRUE(IsWrongEndpoint(tls_to_plain)) << tls_to_plain;
  EXPECT_EQ(tls_to_plain.message(), plain_ps->address() +
                                        ": TLS handshake failed: the server speaks plaintext gRPC "
                                        "(turn TLS on there, or drop --tls-* here)");
}

}  // namespace
}  // namespace brook::rpc
