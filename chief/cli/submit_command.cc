// `brook submit JOB.yaml --dry-run`: validates a job spec (every field, the
// embedded feature and model specs, and that every data glob matches files),
// then prints the canonical spec as one JSON line on stdout and a one-line
// summary on stderr. An invalid spec exits with kExitUsage and the error,
// which names the field and its line, on stderr.
//
// Without --dry-run the job would go to the chief's gRPC service, which is
// not built yet (TODO(#6): send the canonical spec to --chief HOST:PORT).
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "chief/cli/commands.h"
#include "chief/job/job_spec.h"

namespace brook::cli {
namespace {

struct SubmitFlags {
  std::string job;
  bool dry_run = false;
};

int RunSubmit(const SubmitFlags& f) {
  absl::StatusOr<chief::JobSpec> spec = chief::JobSpec::FromYamlFile(f.job);
  if (!spec.ok()) {
    std::cerr << "brook submit: " << spec.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<std::vector<chief::JobSpec::GlobMatches>> data = spec->CheckData();
  if (!data.ok()) {
    std::cerr << "brook submit: " << f.job << ": " << data.status().message() << "\n";
    return kExitUsage;
  }
  if (!f.dry_run) {
    std::cerr << "brook submit: the chief service is not built yet; use --dry-run\n";
    return kExitFailed;
  }
  size_t train_files = 0, eval_files = 0;
  for (const chief::JobSpec::GlobMatches& m : *data) {
    std::cerr << absl::StrFormat("brook submit: %s \"%s\": %d files\n", m.field, m.pattern,
                                 m.files.size());
    (m.field.rfind("data.train", 0) == 0 ? train_files : eval_files) += m.files.size();
  }
  std::cout << spec->CanonicalJson() << std::endl;
  const chief::JobSpec& s = *spec;
  std::cerr << absl::StrFormat(
      "brook submit: job %s is valid (spec hash %s): %s model, %d tables, %d train files, %d "
      "eval files, batch %d, %s, %d trainers; dry run, nothing submitted\n",
      s.name, s.SpecHash(), std::string(trainer::ModelTypeName(s.model.type)),
      s.model.Layout().tables.size(), train_files, eval_files, s.training.batch_size,
      s.training.steps > 0 ? absl::StrFormat("%d steps", s.training.steps)
                           : absl::StrFormat("%d epochs", s.training.epochs),
      s.trainers);
  return kExitOk;
}

}  // namespace

void RegisterSubmit(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<SubmitFlags>();
  CLI::App* cmd = app.add_subcommand("submit", "Validate a job spec and submit it to the chief");
  cmd->add_option("job", f->job, "Job spec YAML")->required();
  cmd->add_flag("--dry-run", f->dry_run,
                "Only validate (spec and data globs) and print the canonical spec as JSON");
  cmd->callback([f, exit_code] { *exit_code = RunSubmit(*f); });
}

}  // namespace brook::cli
