// The security flags every networked command shares, so the chart can set
// them once for every pod ($BROOK_TLS_* in the ConfigMap, the token from a
// Secret):
//   --tls-cert, --tls-key, --tls-ca, --tls-mutual, --tls-server-name (security/tls.h)
//   clients of the chief: --token-file ($BROOK_TOKEN_FILE) or $BROOK_TOKEN
//   the chief:            --auth-token-file ($BROOK_CHIEF_TOKEN_FILE) or $BROOK_CHIEF_TOKEN
//   a PS:                 --auth-token-file ($BROOK_PS_TOKEN_FILE) or $BROOK_PS_TOKEN
//   clients of the PS:    --ps-token-file ($BROOK_PS_TOKEN_FILE) or $BROOK_PS_TOKEN, else
//                         their chief token (one cluster token is the common case)
// A token is never taken as a command-line value: argv is world-readable in
// /proc; files and the environment are not.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "security/bearer_token.h"
#include "security/tls.h"

namespace brook::cli {

enum class TlsRole { kServer, kClient, kBoth };

// Adds the --tls-* flags writing into *tls. `role` picks the help text only.
void AddTlsFlags(CLI::App* cmd, security::TlsOptions* tls, TlsRole role);

struct TokenFlags {
  std::string file;     // --token-file / --auth-token-file
  std::string env_var;  // where the value may come from instead
  std::string flag;     // the flag's name, e.g. "--token-file"
  // The token: from the file if given, else from env_var, else "" (none).
  // A bad file or value is an error naming it; a file others can read gets
  // a warning on stderr (security::TokenFileModeWarning).
  absl::StatusOr<std::string> Resolve() const;
  // Where Resolve() takes the token from, e.g. "--token-file /x" or
  // "$BROOK_TOKEN"; "" when it finds none.
  std::string Source() const;
};

// Clients of the chief (submit, status, list, cancel, logs, trainer --chief).
void AddClientTokenFlags(CLI::App* cmd, TokenFlags* token);
// The chief itself: the token it requires.
void AddChiefTokenFlags(CLI::App* cmd, TokenFlags* token);
// A PS itself: the token it requires (--auth-token-file, $BROOK_PS_TOKEN).
void AddPsTokenFlags(CLI::App* cmd, TokenFlags* token);
// Clients of the PS nodes (chief, trainer): --ps-token-file, $BROOK_PS_TOKEN.
void AddPsClientTokenFlags(CLI::App* cmd, TokenFlags* token);

// The token a client sends to the PS nodes: `ps` (--ps-token-file or
// $BROOK_PS_TOKEN) when given, else `chief_token` (the command's chief
// token, `what` naming it) marked as a fallback (security::ClientToken).
absl::StatusOr<security::ClientToken> ResolvePsClientToken(const TokenFlags& ps,
                                                           const TokenFlags& chief_token,
                                                           std::string_view what);

// --check-config's view of the same: resolves it and checks it may go to
// every one of `addresses` as the PS client will (security::ForAddresses),
// so a command that would refuse to start does not pass its check.
absl::Status CheckPsClientToken(const TokenFlags& ps, const TokenFlags& chief_token,
                                std::string_view what, const std::vector<std::string>& addresses,
                                const security::TlsOptions& tls);

}  // namespace brook::cli
