// The chief's bearer token: clients send "authorization: Bearer TOKEN" on
// every call; the chief refuses a missing or different one with
// UNAUTHENTICATED. The comparison takes the same time wherever the first
// difference is, so the token cannot be guessed byte by byte from timings.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace brook::security {

inline constexpr char kAuthorizationHeader[] = "authorization";

// "Bearer TOKEN", the header value a client sends.
std::string AuthorizationValue(std::string_view token);

// OK when `authorization` (the header's value, empty if absent) is "Bearer"
// and exactly `token`; UNAUTHENTICATED otherwise, saying whether the token was
// missing or wrong (never what it should have been).
absl::Status CheckAuthorization(std::string_view token, std::string_view authorization);

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

}  // namespace brook::security
