// What answers at host:port, found with plain sockets and OpenSSL rather
// than gRPC: gRPC reports a refused connect, an HTTP/1 server and a TLS
// handshake that went wrong all as UNAVAILABLE, often with a vague message
// (or, waiting for a connection, as a timeout). These probes tell them apart
// so grpc_error.h can say which it was. Each is bounded by its timeout and
// leaves nothing open.
//
// Thread-safe (no shared state).
#pragma once

#include <string>

#include "absl/time/time.h"
#include "security/tls.h"

namespace brook::rpc {

enum class Transport {
  kUnparsed,    // the address is not host:port (e.g. a unix: or in-process target)
  kUnresolved,  // the host name does not resolve
  kRefused,     // nothing listens (ECONNREFUSED)
  kNoConnect,   // no TCP connection within the timeout (host down, packets dropped)
  kSilent,      // connected, but no byte came back within the timeout
  kClosed,      // connected, then closed or reset without a byte
  kHttp1,       // an HTTP/1 server answered (e.g. a /metrics port)
  kHttp2,       // a plaintext HTTP/2 server answered: gRPC without TLS
  kTls,         // a TLS record came back: the server expects TLS
  kOther,       // bytes of some other protocol
};

// "connection refused", "HTTP/1", ... for messages and tests.
const char* TransportName(Transport t);

struct PlaintextProbe {
  Transport transport = Transport::kUnparsed;
  std::string detail;  // strerror / gai_strerror text, or the first bytes seen
};

// Connects and sends the HTTP/2 client preface and an empty SETTINGS frame
// (what a plaintext gRPC client sends first), then reads the first reply.
PlaintextProbe ProbePlaintext(const std::string& address, absl::Duration timeout);

struct TlsProbe {
  Transport transport = Transport::kUnparsed;  // kTls when a TLS server answered
  std::string detail;
  // The server sent a CertificateRequest: it wants a client certificate.
  bool asked_for_client_cert = false;
  // The server's certificate chains to tls.ca_file and names the host (or
  // tls.server_name); checked only when tls.ca_file is set.
  bool server_verified = false;
  std::string verify_error;  // why not, when ca_file is set
  // A fatal alert the server sent (e.g. "certificate required", "unknown CA").
  std::string server_alert;
  // The handshake completed and the server then took HTTP/2 bytes.
  bool accepted = false;
};

// A TLS handshake as `tls` describes it (its CA, its client certificate if
// any; ALPN h2), then the HTTP/2 preface, reading the server's first reply
// (a TLS 1.3 server refuses a client certificate only after the handshake).
TlsProbe ProbeTls(const std::string& address, const security::TlsOptions& tls,
                  absl::Duration timeout);

}  // namespace brook::rpc
