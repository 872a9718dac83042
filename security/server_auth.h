// Who may call a server: the one rule every Brook server that changes state
// applies at start. A server on a loopback address is reachable only from
// its own machine (`brook local`, tests); anywhere else (0.0.0.0 and [::]
// included) it needs mutual TLS or a bearer token, else anyone who can
// reach the port may call it. Pure functions of the configuration.
#pragma once

#include <string>
#include <string_view>

#include "security/tls.h"

namespace brook::security {

// True when a server listening on `listen` with `tls` and (has_token) a
// required bearer token would serve anyone who can reach it: `listen` is not
// loopback (IsLoopbackAddress), and there is neither mutual TLS nor a token.
bool OpenToNetwork(std::string_view listen, const TlsOptions& tls, bool has_token);

// How callers are authenticated, for start-up lines and --check-config:
// "mutual TLS and bearer token", "mutual TLS", "bearer token", "none
// (loopback only)" or "none".
std::string AuthMode(std::string_view listen, const TlsOptions& tls, bool has_token);

}  // namespace brook::security
