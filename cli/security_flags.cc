#include "cli/security_flags.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "security/bearer_token.h"

namespace brook::cli {

void AddTlsFlags(CLI::App* cmd, security::TlsOptions* tls, TlsRole role) {
  const char* peers = role == TlsRole::kServer   ? "clients"
                      : role == TlsRole::kClient ? "servers"
                                                 : "peers";
  cmd->add_option("--tls-cert", tls->cert_file,
                  "PEM certificate of this node; with --tls-key turns TLS on")
      ->envname("BROOK_TLS_CERT");
  cmd->add_option("--tls-key", tls->key_file, "PEM private key of --tls-cert")
      ->envname("BROOK_TLS_KEY");
  cmd->add_option("--tls-ca", tls->ca_file,
                  absl::StrCat("PEM CA bundle that ", peers, "' certificates must chain to"))
      ->envname("BROOK_TLS_CA");
  cmd->add_flag("--tls-mutual", tls->mutual,
                "Mutual TLS: servers require client certificates signed by --tls-ca; clients "
                "present --tls-cert")
      ->envname("BROOK_TLS_MUTUAL");
  if (role != TlsRole::kServer) {
    cmd->add_option("--tls-server-name", tls->server_name,
                    "Name the servers' certificates must carry when it is not the host dialled")
        ->envname("BROOK_TLS_SERVER_NAME");
  }
}

absl::StatusOr<std::string> TokenFlags::Resolve() const {
  if (!file.empty()) {
    if (const std::string w = security::TokenFileModeWarning(file); !w.empty()) {
      std::cerr << "brook: " << w << "\n";
    }
    return security::ReadTokenFile(file);
  }
  const char* value = env_var.empty() ? nullptr : std::getenv(env_var.c_str());
  if (value == nullptr || *value == '\0') return std::string();
  const std::string token(value);
  if (absl::Status s = security::ValidateToken(token, "$" + env_var); !s.ok()) return s;
  return token;
}

std::string TokenFlags::Source() const {
  if (!file.empty()) return absl::StrCat(flag, " ", file);
  const char* value = env_var.empty() ? nullptr : std::getenv(env_var.c_str());
  if (value == nullptr || *value == '\0') return "";
  return "$" + env_var;
}

namespace {

// `flag` FILE (or $<env_var>_FILE naming the file), else $<env_var> itself.
void AddTokenFlag(CLI::App* cmd, TokenFlags* token, const std::string& env_var,
                  const std::string& flag, const std::string& help) {
  token->env_var = env_var;
  token->flag = flag;
  cmd->add_option(flag, token->file, help)->envname(env_var + "_FILE");
}

}  // namespace

void AddClientTokenFlags(CLI::App* cmd, TokenFlags* token) {
  AddTokenFlag(cmd, token, "BROOK_TOKEN", "--token-file",
               "File holding the chief's bearer token (or set $BROOK_TOKEN)");
}

void AddChiefTokenFlags(CLI::App* cmd, TokenFlags* token) {
  AddTokenFlag(cmd, token, "BROOK_CHIEF_TOKEN", "--auth-token-file",
               "Require this bearer token (a file; or set $BROOK_CHIEF_TOKEN) on every call "
               "but Health: others get UNAUTHENTICATED");
}

void AddPsTokenFlags(CLI::App* cmd, TokenFlags* token) {
  AddTokenFlag(cmd, token, "BROOK_PS_TOKEN", "--auth-token-file",
               "Require this bearer token (a file; or set $BROOK_PS_TOKEN) on every call but "
               "Health and Describe: others get UNAUTHENTICATED");
}

void AddPsClientTokenFlags(CLI::App* cmd, TokenFlags* token) {
  AddTokenFlag(cmd, token, "BROOK_PS_TOKEN", "--ps-token-file",
               "File holding the PS nodes' bearer token (or set $BROOK_PS_TOKEN); default: "
               "this command's chief token");
}

absl::StatusOr<security::ClientToken> ResolvePsClientToken(const TokenFlags& ps,
                                                           const TokenFlags& chief_token,
                                                           std::string_view what) {
  security::ClientToken out;
  absl::StatusOr<std::string> token = ps.Resolve();
  if (!token.ok()) return token.status();
  if (!token->empty()) {
    out.token = *token;
    out.source = ps.Source();
    return out;
  }
  token = chief_token.Resolve();
  if (!token.ok()) return token.status();
  if (token->empty()) return out;
  out.token = *token;
  out.source = absl::StrCat(std::string(what), " (", chief_token.Source(), ")");
  out.fallback = true;
  return out;
}

absl::Status CheckPsClientToken(const TokenFlags& ps, const TokenFlags& chief_token,
                                std::string_view what, const std::vector<std::string>& addresses,
                                const security::TlsOptions& tls) {
  absl::StatusOr<security::ClientToken> token = ResolvePsClientToken(ps, chief_token, what);
  if (!token.ok()) return token.status();
  return security::ForAddresses(*token, addresses, tls.enabled(), "the PS token").status();
}

}  // namespace brook::cli
