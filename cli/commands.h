// Subcommands of the one `brook` binary. main.cc only dispatches; each
// Register* function adds its subcommand to the parent and stores the
// process exit code in *exit_code when the subcommand runs.
//
// Exit codes shared by every subcommand: 0 ok, 1 failed (the operation ran and
// failed, e.g. a corrupt file or a failed check), 2 usage error (bad flags or
// input that could not be opened).
#pragma once

#include <CLI/CLI.hpp>

namespace brook::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

void RegisterDataInspect(CLI::App& data, int* exit_code);     // data_inspect.cc
void RegisterDataGen(CLI::App& data, int* exit_code);         // data_gen.cc
void RegisterDataConvert(CLI::App& data, int* exit_code);     // data_convert.cc
void RegisterDataStats(CLI::App& data, int* exit_code);       // data_stats.cc
void RegisterDataSpec(CLI::App& data, int* exit_code);        // data_stats.cc
void RegisterBenchTfrecord(CLI::App& bench, int* exit_code);  // bench_commands.cc
void RegisterBenchPs(CLI::App& bench, int* exit_code);        // bench_commands.cc
void RegisterBenchTrainer(CLI::App& bench, int* exit_code);   // bench_commands.cc
void RegisterBenchServe(CLI::App& bench, int* exit_code);     // bench_commands.cc
void RegisterBenchSoak(CLI::App& bench, int* exit_code);      // soak_command.cc
void RegisterPs(CLI::App& app, int* exit_code);               // ps_command.cc
void RegisterTrainer(CLI::App& app, int* exit_code);          // trainer_command.cc
void RegisterSubmit(CLI::App& app, int* exit_code);           // submit_command.cc
void RegisterChief(CLI::App& app, int* exit_code);            // chief_command.cc
void RegisterLocal(CLI::App& app, int* exit_code);            // local_command.cc
// status, list, cancel, logs: the job CLI talking to a chief.
void RegisterJobCommands(CLI::App& app, int* exit_code);  // job_commands.cc
void RegisterPredict(CLI::App& app, int* exit_code);      // predict_command.cc
void RegisterEval(CLI::App& app, int* exit_code);         // predict_command.cc
void RegisterServe(CLI::App& app, int* exit_code);        // serve_command.cc

}  // namespace brook::cli
