// The security flags every networked command shares, so the chart can set
// them once for every pod ($BROOK_TLS_* in the ConfigMap, the token from a
// Secret):
//   --tls-cert, --tls-key, --tls-ca, --tls-mutual, --tls-server-name (security/tls.h)
//   clients of the chief: --token-file ($BROOK_TOKEN_FILE) or $BROOK_TOKEN
//   the chief:            --auth-token-file ($BROOK_CHIEF_TOKEN_FILE) or $BROOK_CHIEF_TOKEN
// A token is never taken as a command-line value: argv is world-readable in
// /proc; files and the environment are not.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "security/tls.h"

namespace brook::cli {

enum class TlsRole { kServer, kClient, kBoth };

// Adds the --tls-* flags writing into *tls. `role` picks the help text only.
void AddTlsFlags(CLI::App* cmd, security::TlsOptions* tls, TlsRole role);

struct TokenFlags {
  std::string file;     // --token-file / --auth-token-file
  std::string env_var;  // where the value may come from instead
  // The token: from the file if given, else from env_var, else "" (none).
  // A bad file or value is an error naming it; a file others can read gets
  // a warning on stderr (security::TokenFileModeWarning).
  absl::StatusOr<std::string> Resolve() const;
};

// Clients of the chief (submit, status, list, cancel, logs, trainer --chief).
void AddClientTokenFlags(CLI::App* cmd, TokenFlags* token);
// The chief itself: the token it requires.
void AddChiefTokenFlags(CLI::App* cmd, TokenFlags* token);

}  // namespace brook::cli
