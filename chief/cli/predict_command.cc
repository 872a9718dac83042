// Placeholder until written.
#include "chief/cli/commands.h"
namespace brook::cli {
void RegisterPredict(CLI::App& app, int* exit_code) {}
void RegisterEval(CLI::App& app, int* exit_code) {}
}  // namespace brook::cli
