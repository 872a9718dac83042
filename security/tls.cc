#include "security/tls.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace brook::security {
namespace {

// Reads a PEM file named by `flag` and checks it holds a block of `kind`
// ("CERTIFICATE", "PRIVATE KEY"); gRPC's own error for a bad file comes only
// at the first handshake, and names neither the flag nor the file.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag, const char* kind) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string pem = text.str();
  // "-----BEGIN CERTIFICATE-----", "-----BEGIN PRIVATE KEY-----",
  // "-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN EC PRIVATE KEY-----".
  const bool found =
      absl::StrContains(pem, "-----BEGIN ") && absl::StrContains(pem, absl::StrCat(kind, "-----"));
  if (!found) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": no PEM ", kind,
                                                   " block in the file (", pem.size(), " bytes)"));
  }
  return pem;
}

}  // namespace

absl::Status TlsOptions::ValidateForServer() const {
  if (!enabled()) {
    if (mutual)
      return absl::InvalidArgumentError("--tls-mutual needs --tls-cert, --tls-key and --tls-ca");
    return absl::OkStatus();
  }
  if (cert_file.empty() || key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS on a server needs both --tls-cert and --tls-key (its certificate and private key)");
  }
  if (mutual && ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-mutual needs --tls-ca: the CA that client certificates must chain to");
  }
  return absl::OkStatus();
}

absl::Status TlsOptions::ValidateForClient() const {
  if (!enabled()) {
    if (mutual)
      return absl::InvalidArgumentError("--tls-mutual needs --tls-cert, --tls-key and --tls-ca");
    return absl::OkStatus();
  }
  if (ca_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS on a client needs --tls-ca: the CA that server certificates must chain to");
  }
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (mutual && cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-mutual: a client needs --tls-cert and --tls-key to present");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const TlsOptions& tls) {
  if (absl::Status s = tls.ValidateForServer(); !s.ok()) return s;
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = ReadPem(tls.cert_file, "--tls-cert", "CERTIFICATE");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(tls.key_file, "--tls-key", "PRIVATE KEY");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options(
      tls.mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                 : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (!tls.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(tls.ca_file, "--tls-ca", "CERTIFICATE");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
  }
  options.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const TlsOptions& tls, grpc::ChannelArguments* args) {
  if (absl::Status s = tls.ValidateForClient(); !s.ok()) return s;
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  absl::StatusOr<std::string> ca = ReadPem(tls.ca_file, "--tls-ca", "CERTIFICATE");
  if (!ca.ok()) return ca.status();
  options.pem_root_certs = *std::move(ca);
  if (!tls.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(tls.cert_file, "--tls-cert", "CERTIFICATE");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(tls.key_file, "--tls-key", "PRIVATE KEY");
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *std::move(cert);
    options.pem_private_key = *std::move(key);
  }
  if (args != nullptr && !tls.server_name.empty()) {
    args->SetSslTargetNameOverride(tls.server_name);
  }
  return grpc::SslCredentials(options);
}

}  // namespace brook::security
