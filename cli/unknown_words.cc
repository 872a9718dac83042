#include "cli/unknown_words.h"

#include <algorithm>
#include <functional>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/nearest_word.h"

namespace brook::cli {
namespace {

std::vector<const CLI::App*> Subcommands(const CLI::App& app) {
  return app.get_subcommands(std::function<bool(const CLI::App*)>());
}

// "--name" of every long flag of `app` and of its parents (CLI11 takes a
// parent's flags after a subcommand too).
std::vector<std::string> LongFlags(const CLI::App* app) {
  std::vector<std::string> out;
  for (; app != nullptr; app = app->get_parent()) {
    for (const CLI::Option* o : app->get_options()) {
      for (const std::string& n : o->get_lnames()) out.push_back("--" + n);
    }
  }
  return out;
}

std::string Suggest(const std::string& word, const std::vector<std::string>& valid) {
  const std::string near = NearestWord(word, valid);
  return near.empty() ? "" : absl::StrCat("; did you mean '", near, "'?");
}

}  // namespace

std::optional<std::string> CheckWords(const CLI::App& app, int argc, const char* const* argv) {
  const CLI::App* level = &app;
  std::string path = "brook";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;  // the rest are values
    if (arg.rfind("--", 0) == 0) {
      const std::string name = arg.substr(0, arg.find('='));
      const std::vector<std::string> flags = LongFlags(level);
      if (std::find(flags.begin(), flags.end(), name) == flags.end()) {
        const std::string hint = Suggest(name, flags);
        return absl::StrCat(path, ": unknown flag '", name, "'",
                            hint.empty() ? absl::StrCat(" (", path, " --help lists them)") : hint);
      }
      continue;
    }
    if (arg.rfind('-', 0) == 0) continue;  // short flags and negative numbers: CLI11's
    const std::vector<const CLI::App*> subs = Subcommands(*level);
    if (subs.empty()) continue;  // a leaf: its positional arguments
    const CLI::App* sub = nullptr;
    std::vector<std::string> names;
    for (const CLI::App* s : subs) {
      if (s->check_name(arg)) sub = s;
      names.push_back(s->get_name());
    }
    if (sub == nullptr) {
      // Only where a subcommand must come: a group's first word. (A flag's
      // value also lands here, but no group takes one.)
      const std::string hint = Suggest(arg, names);
      return absl::StrCat(
          path, ": unknown command '", arg, "'",
          hint.empty() ? absl::StrCat(" (commands: ", absl::StrJoin(names, ", "), ")") : hint);
    }
    level = sub;
    path = absl::StrCat(path, " ", arg);
  }
  return std::nullopt;
}

}  // namespace brook::cli
