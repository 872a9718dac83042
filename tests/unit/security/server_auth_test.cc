#include "security/server_auth.h"

#include <gtest/gtest.h>

namespace brook::security {
namespace {

TEST(ServerAuthTest, OnlyLoopbackMutualTlsOrATokenCloseAServer) {
  const TlsOptions plain;
  const TlsOptions tls{.cert_file = "c", .key_file = "k", .ca_file = "ca"};
  TlsOptions mutual = tls;
  mutual.mutual = true;
  for (const char* loopback : {"127.0.0.1:0", "localhost:7070", "[::1]:7070", "127.1.2.3:1"}) {
    EXPECT_FALSE(OpenToNetwork(loopback, plain, false)) << loopback;
  }
  for (const char* open :
       {"0.0.0.0:7070", "[::]:7070", "10.0.0.7:7070", ":7070", "brook-ps-0:7070"}) {
    EXPECT_TRUE(OpenToNetwork(open, plain, false)) << open;
    // TLS without client certificates lets any client in.
    EXPECT_TRUE(OpenToNetwork(open, tls, false)) << open;
    EXPECT_FALSE(OpenToNetwork(open, mutual, false)) << open;
    EXPECT_FALSE(OpenToNetwork(open, plain, true)) << open;
  }
  EXPECT_EQ(AuthMode("0.0.0.0:1", mutual, true), "mutual TLS and bearer token");
  EXPECT_EQ(AuthMode("0.0.0.0:1", mutual, false), "mutual TLS");
  EXPECT_EQ(AuthMode("0.0.0.0:1", tls, true), "bearer token");
  EXPECT_EQ(AuthMode("127.0.0.1:1", plain, false), "none (loopback only)");
  EXPECT_EQ(AuthMode("0.0.0.0:1", plain, false), "none");
}

}  // namespace
}  // namespace brook::security
