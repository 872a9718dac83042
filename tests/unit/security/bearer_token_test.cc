#include "security/bearer_token.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/testing/test_util.h"

namespace brook::security {
namespace {

constexpr char kToken[] = "0123456789abcdef0123";

TEST(BearerTokenTest, TheRightTokenPassesAndEveryOtherIsUnauthenticated) {
  EXPECT_TRUE(CheckAuthorization(kToken, AuthorizationValue(kToken)).ok());
  EXPECT_EQ(AuthorizationValue("abc"), "Bearer abc");

  const absl::Status missing = CheckAuthorization(kToken, "");
  EXPECT_TRUE(absl::IsUnauthenticated(missing)) << missing;
  EXPECT_NE(missing.message().find("requires a bearer token"), std::string::npos) << missing;

  for (const std::string& wrong :
       {AuthorizationValue("0123456789abcdef012"), AuthorizationValue("0123456789abcdef01234"),
        AuthorizationValue("x123456789abcdef0123"), AuthorizationValue("0123456789abcdef012x"),
        std::string("Bearer"), std::string("Bearer "), std::string("bearer ") + kToken,
        std::string("Basic ") + kToken, std::string(kToken)}) {
    const absl::Status s = CheckAuthorization(kToken, wrong);
    EXPECT_TRUE(absl::IsUnauthenticated(s)) << "'" << wrong << "': " << s;
    // The refusal never echoes the expected token.
    EXPECT_EQ(s.message().find(kToken), std::string::npos) << s;
  }
}

TEST(BearerTokenTest, TokenFilesAreTrimmedAndBadOnesNameTheFile) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.Join("token"), std::string("  ") + kToken + "\n");
  absl::StatusOr<std::string> token = ReadTokenFile(dir.Join("token"));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, kToken);

  testing::WriteFileOrDie(dir.Join("empty"), "\n\n");
  const absl::Status empty = ReadTokenFile(dir.Join("empty")).status();
  EXPECT_TRUE(absl::IsInvalidArgument(empty)) << empty;
  EXPECT_NE(empty.message().find(dir.Join("empty")), std::string::npos) << empty;

  const absl::Status missing = ReadTokenFile(dir.Join("nope")).status();
  EXPECT_TRUE(absl::IsInvalidArgument(missing)) << missing;
  EXPECT_NE(missing.message().find(dir.Join("nope")), std::string::npos) << missing;

  testing::WriteFileOrDie(dir.Join("short"), "abc");
  EXPECT_TRUE(absl::IsInvalidArgument(ReadTokenFile(dir.Join("short")).status()));
}

TEST(BearerTokenTest, TokensAreAtLeast16PrintableCharactersWithoutSpaces) {
  EXPECT_TRUE(ValidateToken(kToken, "--token").ok());
  EXPECT_FALSE(ValidateToken("short", "--token").ok());
  const absl::Status space = ValidateToken("0123456789 abcdef", "$BROOK_TOKEN");
  EXPECT_TRUE(absl::IsInvalidArgument(space));
  EXPECT_NE(space.message().find("$BROOK_TOKEN"), std::string::npos) << space;
  EXPECT_NE(space.message().find("character 10"), std::string::npos) << space;
  EXPECT_FALSE(ValidateToken(std::string("0123456789abcdef\x01", 17), "--token").ok());
  EXPECT_FALSE(ValidateToken("0123456789abcdef\xc3\xa9", "--token").ok());
}

TEST(BearerTokenTest, OnlyAddressesThatStayOnTheMachineAreLoopback) {
  for (const char* a :
       {"127.0.0.1:7000", "127.1.2.3:1", "localhost:7000", "LOCALHOST:1", "[::1]:7000",
        "unix:/tmp/s", "ipv4:127.0.0.1:7000", "dns:///localhost:7000"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a :
       {"10.0.0.7:7000", "brook-chief:7000", "128.0.0.1:7000", "127.0.0:7000", "[::2]:7000",
        "localhost.evil.com:7000", "127.0.0.1.nip.io:7000", "0.0.0.0:7000", "[::1:7000"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

TEST(BearerTokenTest, ATokenGoesOnlyWhereItCannotBeReadOnTheWay) {
  const std::string token = "a-cluster-token-0123456789";
  const std::vector<std::string> loopback = {"127.0.0.1:7000", "localhost:7001"};
  const std::vector<std::string> remote = {"127.0.0.1:7000", "10.0.0.7:7000"};
  ClientToken asked{.token = token, .source = "--ps-token-file /t"};
  ClientToken fallback{
      .token = token, .source = "the chief token ($BROOK_TOKEN)", .fallback = true};

  EXPECT_EQ(ForAddresses(asked, loopback, false, "the PS token")->token, token);
  EXPECT_EQ(ForAddresses(asked, remote, true, "the PS token")->token, token);
  EXPECT_EQ(ForAddresses(fallback, remote, true, "the PS token")->token, token);

  // Asked for, plaintext off the machine: refused, naming where and the fix.
  absl::StatusOr<ClientToken> refused = ForAddresses(asked, remote, false, "the PS token");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("in plaintext to 10.0.0.7:7000"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("--ps-token-file /t"), std::string::npos);

  // A fallback: left out, and why is kept for the server's refusal.
  absl::StatusOr<ClientToken> left_out = ForAddresses(fallback, remote, false, "the PS token");
  ASSERT_TRUE(left_out.ok()) << left_out.status();
  EXPECT_TRUE(left_out->token.empty());
  EXPECT_NE(left_out->withheld.find("the chief token ($BROOK_TOKEN) was not sent as the PS "
                                    "token: 10.0.0.7:7000 is not a loopback address and TLS is "
                                    "off"),
            std::string::npos)
      << left_out->withheld;

  EXPECT_FALSE(
      ForAddresses({.token = "short", .source = "$X"}, loopback, false, "the PS token").ok());
  EXPECT_TRUE(ForAddresses({}, remote, false, "the PS token")->token.empty());
}

}  // namespace
}  // namespace brook::security
