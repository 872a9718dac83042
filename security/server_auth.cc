#include "security/server_auth.h"

#include "security/bearer_token.h"

namespace brook::security {

bool OpenToNetwork(std::string_view listen, const TlsOptions& tls, bool has_token) {
  // TLS without client certificates only hides the traffic: any client that
  // trusts the CA (or skips verification) may still call.
  const bool mutual = tls.enabled() && tls.mutual;
  return !mutual && !has_token && !IsLoopbackAddress(listen);
}

std::string AuthMode(std::string_view listen, const TlsOptions& tls, bool has_token) {
  const bool mutual = tls.enabled() && tls.mutual;
  if (mutual && has_token) return "mutual TLS and bearer token";
  if (mutual) return "mutual TLS";
  if (has_token) return "bearer token";
  return IsLoopbackAddress(listen) ? "none (loopback only)" : "none";
}

}  // namespace brook::security
