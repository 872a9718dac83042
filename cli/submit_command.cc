// `brook submit JOB.yaml`: validates a job spec (every field, the embedded
// feature and model specs, and that every data glob matches files), then
// sends its canonical JSON to the chief (--chief HOST:PORT, else
// $BROOK_CHIEF, else TF_CONFIG's cluster.chief) and prints the new job's id
// (or, with --output json, its JobStatus). An invalid spec exits with
// kExitUsage and the error, which names the field and its line, on stderr.
// Exit codes after that are job_exit_codes.h's: the chief refusing the job
// (INVALID_ARGUMENT, ALREADY_EXISTS an active job of that name) 1, no chief
// address 2, the chief unreachable 4.
//
// --dry-run stops after validation and prints the canonical spec as one JSON
// line on stdout and a one-line summary on stderr; nothing is sent.
//
// The data globs, output dirs and init_from are checked here only as this
// machine sees them. --no-local-check skips those checks, for a submitter
// that cannot see the cluster's volumes (a laptop through `kubectl
// port-forward`): the chief checks them all again at submit where it runs,
// so nothing unchecked reaches a trainer. The spec itself (and the feature
// or model spec files it names, which are embedded) is still read here.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "chief/client/chief_client.h"
#include "chief/client/cluster_spec.h"
#include "chief/client/job_format.h"
#include "chief/export/init_from.h"
#include "chief/export/output_dirs.h"
#include "chief/job/job_spec.h"
#include "cli/commands.h"
#include "cli/job_exit_codes.h"
#include "cli/security_flags.h"

namespace brook::cli {
namespace {

struct SubmitFlags {
  std::string job;
  bool dry_run = false;
  bool no_local_check = false;
  std::string chief;
  std::string output = "table";
  double timeout_seconds = 10;
  security::TlsOptions tls;
  TokenFlags token;
};

// After a local check that failed for want of files: they may well exist
// where the job runs (a volume of the chief and trainer pods).
constexpr char kLocalCheckHint[] =
    "brook submit: (checked on this machine; if only the cluster sees these paths, e.g. a "
    "volume mounted in the chief and trainer pods, submit with --no-local-check: the chief "
    "checks them where it runs)\n";

// Sends the validated spec to the chief.
int Submit(const SubmitFlags& f, const chief::JobSpec& spec) {
  absl::StatusOr<std::string> address = chief::ChiefAddress(f.chief);
  if (!address.ok()) {
    std::cerr << "brook submit: " << address.status().message() << "\n";
    return job_exit::kUsage;
  }
  chief::ChiefClientOptions options;
  options.deadline = absl::Seconds(f.timeout_seconds);
  options.tls = f.tls;
  absl::StatusOr<std::string> token = f.token.Resolve();
  if (!token.ok()) {
    std::cerr << "brook submit: " << token.status().message() << "\n";
    return job_exit::kUsage;
  }
  options.bearer_token = *token;
  absl::StatusOr<std::unique_ptr<chief::ChiefClient>> client =
      chief::ChiefClient::Connect(*address, options);
  if (!client.ok()) {
    std::cerr << "brook submit: " << client.status().message() << "\n";
    return job_exit::kUsage;
  }
  v1::SubmitJobRequest request;
  request.set_spec_json(spec.CanonicalJson());
  absl::StatusOr<v1::SubmitJobResponse> reply = (*client)->SubmitJob(request);
  if (!reply.ok()) {
    const int rc = job_exit::ForError(reply.status());
    if (rc == job_exit::kUnreachable || rc == job_exit::kUnauthenticated) {
      std::cerr << "brook submit: " << reply.status().message() << "\n";
      return rc;
    }
    std::cerr << "brook submit: the chief at " << *address << " refused job " << spec.name << ": "
              << reply.status().message() << "\n";
    return job_exit::kFailed;
  }
  if (f.output == "json") {
    std::cout << chief::ToJson(reply->job()) << std::endl;
  } else {
    std::cout << reply->job().id() << std::endl;
    std::cerr << absl::StrFormat("brook submit: job %s submitted to %s (%s, priority %d)\n",
                                 reply->job().id(), *address, reply->job().state(),
                                 reply->job().priority());
  }
  return job_exit::kOk;
}

int RunSubmit(const SubmitFlags& f) {
  absl::StatusOr<chief::JobSpec> spec = chief::JobSpec::FromYamlFile(f.job);
  if (!spec.ok()) {
    std::cerr << "brook submit: " << spec.status().message() << "\n";
    return kExitUsage;
  }
  if (spec->training.steps > 0) {
    // As the chief would answer: a dry run must not pass what a submit fails.
    std::cerr << "brook submit: " << f.job << ": " << chief::kChiefRefusesSteps << "\n";
    return kExitUsage;
  }
  if (f.no_local_check) {
    if (!f.dry_run) return Submit(f, *spec);
    std::cout << spec->CanonicalJson() << std::endl;
    std::cerr << absl::StrFormat(
        "brook submit: job %s is valid (spec hash %s); data, output dirs and init_from not "
        "checked here (--no-local-check: the chief checks them at submit); dry run, nothing "
        "submitted\n",
        spec->name, spec->SpecHash());
    return kExitOk;
  }
  absl::StatusOr<std::vector<chief::JobSpec::GlobMatches>> data = spec->CheckData();
  if (!data.ok()) {
    std::cerr << "brook submit: " << f.job << ": " << data.status().message() << "\n"
              << kLocalCheckHint;
    return kExitUsage;
  }
  absl::StatusOr<input::DataCheckResult> contents = spec->CheckDataContents(*data);
  if (!contents.ok()) {
    std::cerr << "brook submit: " << f.job << ": " << contents.status().message() << "\n";
    return kExitUsage;
  }
  for (const std::string& w : contents->warnings) {
    std::cerr << "brook submit: warning: " << w << "\n";
  }
  // As the chief checks them at submit (without making them: a dry run
  // changes nothing).
  if (absl::Status s = chief::CheckOutputDirs(*spec, /*create=*/false); !s.ok()) {
    std::cerr << "brook submit: " << f.job << ": " << s.message() << "\n";
    return kExitUsage;
  }
  if (!spec->init_from.path.empty()) {
    // The chief checks it again at submit: it reads the same paths.
    if (absl::Status s = chief::PlanInitFrom(*spec).status(); !s.ok()) {
      std::cerr << "brook submit: " << f.job << ": " << s.message() << "\n";
      std::error_code ec;
      if (!std::filesystem::exists(spec->init_from.path, ec)) std::cerr << kLocalCheckHint;
      return kExitUsage;
    }
  }
  if (!f.dry_run) return Submit(f, *spec);
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
  cmd->add_flag("--no-local-check", f->no_local_check,
                "Do not check data globs, output dirs and init_from on this machine (they are "
                "where the chief and trainers run, e.g. pod volumes); the chief checks them at "
                "submit");
  cmd->add_option("--chief", f->chief,
                  "Chief HOST:PORT (default: $BROOK_CHIEF, else TF_CONFIG's cluster.chief)");
  cmd->add_option("-o,--output", f->output, "table (the job id) or json (its status)")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  cmd->add_option("--timeout", f->timeout_seconds, "Seconds to wait for the chief's reply")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  AddTlsFlags(cmd, &f->tls, TlsRole::kClient);
  AddClientTokenFlags(cmd, &f->token);
  cmd->callback([f, exit_code] { *exit_code = RunSubmit(*f); });
}

}  // namespace brook::cli
