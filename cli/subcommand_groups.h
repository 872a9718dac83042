// Command groups of the `brook` binary (`brook`, `brook data`, `brook
// bench`): words that only choose a subcommand. Run bare, CLI11's
// require_subcommand says only "A subcommand is required"; a group set up
// here names its subcommands instead:
//   brook data: a subcommand is required: inspect, gen, convert, stats, spec
//   Run with --help for more information.
// and main.cc exits 2 with it, as for any usage error.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace brook::cli {

// Makes `group` take at most one subcommand and fail its parse with the
// message above when it gets none. Sets group's callback (it must have none).
// `group` must outlive the parse.
void RequireSubcommand(CLI::App* group);

// The message itself, for `group` (its path is built from its parents'
// names; the root is "brook").
std::string MissingSubcommandMessage(const CLI::App& group);

}  // namespace brook::cli
