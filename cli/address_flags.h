// Checks of host:port flags, so a typo is a usage error naming the flag
// (exit 2) instead of a port gRPC picks: it took 127.0.0.1:99999 as port
// 34463 (99999 mod 65536) and "127.0.0.1:" as 443.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace brook::cli {

// "" if `address` is HOST:PORT with a non-empty host (a name, an IPv4
// address or a bracketed IPv6 one) and PORT a decimal in [0, 65535] (0: any
// free port); else why not.
std::string ListenAddressProblem(const std::string& address);

// For --listen (empty refused) and --metrics-listen (empty: off).
CLI::Validator ListenAddress();
CLI::Validator ListenAddressOrEmpty();

}  // namespace brook::cli
