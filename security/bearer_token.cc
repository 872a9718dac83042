#include "security/bearer_token.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace brook::security {
namespace {

// Debian's abseil has its own string_view, distinct from std::string_view.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr std::string_view kBearer = "Bearer ";

// Same time for every input of a given length: no early exit on the first
// differing byte.
bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace

std::string AuthorizationValue(std::string_view token) {
  return absl::StrCat(Av(kBearer), Av(token));
}

absl::Status CheckAuthorization(std::string_view token, std::string_view authorization,
                                std::string_view server, std::string_view how) {
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        absl::StrCat("this ", Av(server), " requires a bearer token: ", Av(how)));
  }
  if (!absl::StartsWith(Av(authorization), Av(kBearer))) {
    return absl::UnauthenticatedError("the authorization header is not \"Bearer TOKEN\"");
  }
  if (!ConstantTimeEqual(authorization.substr(kBearer.size()), token)) {
    return absl::UnauthenticatedError("wrong bearer token");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", path, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(text.str()));
  if (token.empty())
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, " is empty"));
  if (absl::Status s = ValidateToken(token, absl::StrCat("token file ", path)); !s.ok()) return s;
  return token;
}

std::string TokenFileModeWarning(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  const mode_t mode = st.st_mode & 07777;
  const bool group = (mode & 040) != 0, other = (mode & 004) != 0;
  if (!group && !other) return "";
  return absl::StrFormat(
      "warning: token file %s is readable by %s (mode %04o): anyone who can read it can act as "
      "you; run chmod 600 %s",
      path,
      group && other ? "group and others"
      : group        ? "its group"
                     : "others",
      mode, path);
}

absl::Status ValidateToken(std::string_view token, std::string_view what) {
  if (token.size() < 16) {
    return absl::InvalidArgumentError(
        absl::StrCat(Av(what), ": a token needs at least 16 characters (", token.size(),
                     " given); make one with `openssl rand -hex 32`"));
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c <= 0x20 || c >= 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(Av(what), ": character ", i,
                                                     " of the token is not printable ASCII (code ",
                                                     static_cast<int>(c), ")"));
    }
  }
  return absl::OkStatus();
}

bool IsLoopbackAddress(std::string_view address_in) {
  absl::string_view address = Av(address_in);
  if (absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:"))
    return true;
  absl::ConsumePrefix(&address, "ipv4:");
  absl::ConsumePrefix(&address, "ipv6:");
  absl::ConsumePrefix(&address, "dns:///");
  absl::string_view host = address;
  if (absl::StartsWith(host, "[")) {
    const size_t close = host.find(']');
    if (close == absl::string_view::npos) return false;
    host = host.substr(1, close - 1);
    return host == "::1";
  }
  if (const size_t colon = host.rfind(':'); colon != absl::string_view::npos) {
    host = host.substr(0, colon);
  }
  if (absl::AsciiStrToLower(host) == "localhost") return true;
  std::vector<absl::string_view> octets = absl::StrSplit(host, '.');
  if (octets.size() != 4 || octets[0] != "127") return false;
  for (absl::string_view o : octets) {
    int v = 0;
    if (!absl::SimpleAtoi(o, &v) || v < 0 || v > 255) return false;
  }
  return true;
}

bool MaySendToken(std::string_view address, bool tls_enabled) {
  return tls_enabled || IsLoopbackAddress(address);
}

absl::StatusOr<ClientToken> ForAddresses(ClientToken token,
                                         const std::vector<std::string>& addresses,
                                         bool tls_enabled, std::string_view what) {
  const std::string what_s(what);  // absl::StrCat here takes no std::string_view
  if (token.token.empty()) return token;
  if (token.source.empty()) token.source = "the caller";
  if (absl::Status s = ValidateToken(token.token, absl::StrCat(what_s, " from ", token.source));
      !s.ok()) {
    return s;
  }
  for (const std::string& address : addresses) {
    if (MaySendToken(address, tls_enabled)) continue;
    // A default token (another server's) is not worth leaking: a server
    // that needs one says so, and the client's error says why none came.
    if (token.fallback) {
      ClientToken none;
      none.withheld = absl::StrCat(token.source, " was not sent as ", what_s, ": ", address,
                                   " is not a loopback address and TLS is off (turn TLS on: "
                                   "no token is sent in plaintext off the machine)");
      return none;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("refusing to send ", what_s, " (from ", token.source, ") in plaintext to ",
                     address, ": turn TLS on (--tls-ca), or reach it on a loopback address"));
  }
  return token;
}

}  // namespace brook::security
