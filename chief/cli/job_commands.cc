// Placeholder until written.
#include "chief/cli/commands.h"
namespace brook::cli {
void RegisterJobCommands(CLI::App& app, int* exit_code) {}
}  // namespace brook::cli
