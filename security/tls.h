// TLS for Brook's gRPC servers and clients, configured by certificate files
// (the same four flags on every command: --tls-cert, --tls-key, --tls-ca,
// --tls-mutual; $BROOK_TLS_* in the chart).
//
// Off by default, as every server binds 127.0.0.1 unless asked (docs/architecture.md
// "Security"). With TLS on, a server presents cert/key and, with `mutual`,
// requires a client certificate signed by `ca`; a client verifies the server
// against `ca` and presents cert/key when it has them. The files are read and
// checked when credentials are made, so a wrong path or a file that holds no
// PEM block is an error naming the flag and the file, not a failed handshake
// later. Rotated files are picked up by a restart (the chart's pods restart on
// a Secret change via its checksum annotation).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grpc {
class ChannelArguments;
class ChannelCredentials;
class ServerCredentials;
}  // namespace grpc

namespace brook::security {

struct TlsOptions {
  std::string cert_file;  // PEM certificate chain of this node
  std::string key_file;   // PEM private key of cert_file
  std::string ca_file;    // PEM CA bundle that peers' certificates must chain to
  // Servers require and verify client certificates; clients must then have
  // cert_file and key_file.
  bool mutual = false;
  // Client only: the name the server's certificate must carry, when it is not
  // the host of the address dialled (e.g. dialling 10.0.0.7:7000 for a
  // certificate issued to brook-chief). Empty: the host of the address.
  std::string server_name;

  // True when any file is set: TLS is on.
  bool enabled() const { return !cert_file.empty() || !key_file.empty() || !ca_file.empty(); }
  // The combination a server needs (cert and key; ca when mutual). OK when off
  // unless `mutual` is set without files.
  absl::Status ValidateForServer() const;
  // The combination a client needs (ca; cert and key together, required when
  // mutual).
  absl::Status ValidateForClient() const;
};

// The credentials a server listens with: insecure when TLS is off.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const TlsOptions& tls);

// The credentials a client dials with: insecure when TLS is off. Pass `args`
// to have server_name applied (the channel's target-name override).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const TlsOptions& tls, grpc::ChannelArguments* args);

}  // namespace brook::security
