#include "cli/local_path_flags.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/local_path.h"

namespace brook::cli {
namespace {

// Command path (as typed after `brook`) and the options that hold paths.
const std::vector<std::pair<std::string, std::vector<std::string>>>& PathOptions() {
  static const auto* table = new std::vector<std::pair<std::string, std::vector<std::string>>>{
      {"trainer", {"--data", "--eval-data", "--spec", "--model", "--job"}},
      {"submit", {"job"}},
      {"local", {"job", "--work-dir"}},
      {"chief", {"--state-dir"}},
      {"ps", {"--data-dir"}},
      {"predict", {"--model", "--data"}},
      {"eval", {"--model", "--baseline", "--data"}},
      {"data inspect", {"files"}},
      {"data stats", {"inputs", "--schema-out", "--check"}},
      {"data convert", {"inputs", "--out"}},
      {"data gen", {"--out"}},
  };
  return *table;
}

const CLI::Validator& LocalPath() {
  static const auto* v = new CLI::Validator(
      [](std::string& value) { return NotLocalPathReason(value); }, "", "local path");
  return *v;
}

}  // namespace

void AddLocalPathChecks(CLI::App& app) {
  for (const auto& [command, options] : PathOptions()) {
    CLI::App* cmd = &app;
    size_t begin = 0;
    while (cmd != nullptr && begin < command.size()) {
      const size_t end = std::min(command.find(' ', begin), command.size());
      const std::string word = command.substr(begin, end - begin);
      CLI::App* next = nullptr;
      for (CLI::App* sub : cmd->get_subcommands(std::function<bool(CLI::App*)>())) {
        if (sub->get_name() == word) next = sub;
      }
      cmd = next;
      begin = end + 1;
    }
    if (cmd == nullptr) continue;
    for (const std::string& name : options) {
      for (CLI::Option* o : cmd->get_options()) {
        if (o->get_name() == name || o->check_name(name)) o->check(LocalPath());
      }
    }
  }
}

}  // namespace brook::cli
