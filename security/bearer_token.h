// Bearer tokens of the chief and the PS nodes: clients send "authorization:
// Bearer TOKEN" on every call; the server refuses a missing or different one
// with UNAUTHENTICATED. The comparison takes the same time wherever the first
// difference is, so the token cannot be guessed byte by byte from timings.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace brook::security {

inline constexpr char kAuthorizationHeader[] = "authorization";

// "Bearer TOKEN", the header value a client sends.
std::string AuthorizationValue(std::string_view token);

// OK when `authorization` (the header's value, empty if absent) is "Bearer"
// and exactly `token`; UNAUTHENTICATED otherwise, saying whether the token was
// missing or wrong (never what it should have been). `server` and `how` name
// the server and how its clients give the token, for the missing case.
absl::Status CheckAuthorization(std::string_view token, std::string_view authorization,
                                std::string_view server = "chief",
                                std::string_view how = "pass --token-file or set BROOK_TOKEN");

// The token a client sends, and where it came from (for its errors).
struct ClientToken {
  std::string token;  // empty: none
  // e.g. "--ps-token-file /etc/brook/token", "$BROOK_PS_TOKEN", "the chief
  // token ($BROOK_CHIEF_TOKEN)"; empty when none.
  std::string source;
  // A default taken from another setting (the chief token as the PS token:
  // one cluster token is the common case), not asked for. Such a token is
  // left out where it would cross the network in plaintext, instead of the
  // client refusing to start.
  bool fallback = false;
  // Set when a fallback token was left out (ForAddresses): why, for the
  // error of a server that then wants one.
  std::string withheld;
};

// The token to send to every one of `addresses` over `tls_enabled`: as it
// is where each may receive it (MaySendToken); a fallback that may not is
// left out (`withheld` says why); an asked-for one that may not is
// INVALID_ARGUMENT naming the address and the fix. `what` names the token
// ("the PS token").
absl::StatusOr<ClientToken> ForAddresses(ClientToken token,
                                         const std::vector<std::string>& addresses,
                                         bool tls_enabled, std::string_view what);

// The token from a file (a Kubernetes Secret mounted as a file, or a file
// made with `openssl rand -hex 32`): surrounding whitespace trimmed;
// empty or unreadable is an error naming the file.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// "" when no one but the owner can read `path` (or it cannot be stat'ed:
// ReadTokenFile reports that); else a warning naming the file, who can read
// it, its mode and the chmod that fixes it, as ssh warns about a private key.
// A warning, not an error: the file is still used.
std::string TokenFileModeWarning(const std::string& path);

// A token is printable ASCII without spaces (it travels in an HTTP/2 header),
// at least 16 characters. `what` names the flag in the error.
absl::Status ValidateToken(std::string_view token, std::string_view what);

// True for addresses that never leave the machine: localhost, 127.0.0.0/8,
// [::1], unix: sockets. A token may go there without TLS; anywhere else
// plaintext would hand it to the network, so clients refuse.
bool IsLoopbackAddress(std::string_view address);

// Whether a client may send a token to `address` over `tls`: TLS on, or
// loopback.
bool MaySendToken(std::string_view address, bool tls_enabled);

}  // namespace brook::security
