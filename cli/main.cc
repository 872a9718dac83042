// The `brook` binary: one image serves every pod, so every role is a
// subcommand. This file only builds the command tree and dispatches.
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/local_path_flags.h"
#include "cli/subcommand_groups.h"
#include "cli/unknown_words.h"
#include "common/malloc_tuning.h"
#include "common/mutex_tuning.h"
#include "common/version.h"

int main(int argc, char** argv) {
  // Before any thread or request buffer exists: common/malloc_tuning.h.
  brook::TuneMalloc();
  brook::TuneMutexes();  // common/mutex_tuning.h
  CLI::App app{"Brook: a parameter-server training cluster for recommender models"};
  brook::cli::RequireSubcommand(&app);  // bare `brook` lists the commands
  app.set_version_flag("--version", brook::VersionLine());
  app.footer(
      "Exit codes: 0 ok, 1 failed, 2 usage (an unknown command or flag too: the nearest valid "
      "one is named); the job commands add 3-5 (README \"Wrong addresses and typos\").");
  int exit_code = brook::cli::kExitOk;

  CLI::App* data = app.add_subcommand(
      "data", "Inspect, convert, generate, check TFRecord data and infer its feature spec");
  brook::cli::RequireSubcommand(data);
  brook::cli::RegisterDataInspect(*data, &exit_code);
  brook::cli::RegisterDataGen(*data, &exit_code);
  brook::cli::RegisterDataConvert(*data, &exit_code);
  brook::cli::RegisterDataStats(*data, &exit_code);
  brook::cli::RegisterDataSpec(*data, &exit_code);

  CLI::App* bench = app.add_subcommand("bench", "Benchmarks, each printed beside its ceiling");
  brook::cli::RequireSubcommand(bench);
  brook::cli::RegisterBenchTfrecord(*bench, &exit_code);
  brook::cli::RegisterBenchPs(*bench, &exit_code);
  brook::cli::RegisterBenchTrainer(*bench, &exit_code);
  brook::cli::RegisterBenchServe(*bench, &exit_code);
  brook::cli::RegisterBenchSoak(*bench, &exit_code);

  brook::cli::RegisterPs(app, &exit_code);
  brook::cli::RegisterTrainer(app, &exit_code);
  brook::cli::RegisterSubmit(app, &exit_code);
  brook::cli::RegisterJobCommands(app, &exit_code);
  brook::cli::RegisterChief(app, &exit_code);
  brook::cli::RegisterLocal(app, &exit_code);
  brook::cli::RegisterPredict(app, &exit_code);
  brook::cli::RegisterEval(app, &exit_code);
  brook::cli::RegisterServe(app, &exit_code);
  brook::cli::AddLocalPathChecks(app);

  // CLI11 alone would print the top-level help for `brook serve --help` and
  // exit 0, and call `--chife` only "not expected": name the word and the
  // nearest valid one, exit 2.
  if (std::optional<std::string> error = brook::cli::CheckWords(app, argc, argv)) {
    std::cerr << *error << "\n";
    return brook::cli::kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : brook::cli::kExitUsage;
  }
  return exit_code;
}
