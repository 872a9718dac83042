#include "cli/subcommand_groups.h"

#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace brook::cli {
namespace {

std::string CommandPath(const CLI::App& app) {
  if (app.get_parent() == nullptr) return "brook";
  return absl::StrCat(CommandPath(*app.get_parent()), " ", app.get_name());
}

}  // namespace

std::string MissingSubcommandMessage(const CLI::App& group) {
  std::vector<std::string> names;
  // Option groups are unnamed subcommands; hidden ones have an empty group.
  for (const CLI::App* s : group.get_subcommands(std::function<bool(const CLI::App*)>())) {
    if (!s->get_name().empty() && !s->get_group().empty()) names.push_back(s->get_name());
  }
  return absl::StrCat(CommandPath(group),
                      ": a subcommand is required: ", absl::StrJoin(names, ", "));
}

void RequireSubcommand(CLI::App* group) {
  group->require_subcommand(0, 1);
  group->callback([group] {
    if (!group->get_subcommands().empty()) return;
    throw CLI::RequiredError(MissingSubcommandMessage(*group), CLI::ExitCodes::RequiredError);
  });
}

}  // namespace brook::cli
