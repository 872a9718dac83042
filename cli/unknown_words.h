// Unknown subcommands and flags of the `brook` binary, found before CLI11
// parses: `brook serv` is "brook: unknown command 'serv'; did you mean
// 'serve'?", `brook list --chife` "brook list: unknown flag '--chife'; did
// you mean '--chief'?" (common/nearest_word.h over the words valid at that
// level). main.cc exits 2 with it, whatever else the line holds (--help
// included: help for a command that does not exist is no help).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace brook::cli {

// The error for the first unknown subcommand or long flag on the command
// line, or nullopt when every such word is known (CLI11 checks the rest).
std::optional<std::string> CheckWords(const CLI::App& app, int argc, const char* const* argv);

}  // namespace brook::cli
