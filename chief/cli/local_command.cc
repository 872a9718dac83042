// Placeholder until written.
#include "chief/cli/commands.h"
namespace brook::cli {
void RegisterLocal(CLI::App& app, int* exit_code) {}
}  // namespace brook::cli
