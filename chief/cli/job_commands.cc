// The job CLI, talking to a chief (chief/client/chief_client.h):
//   brook status JOB [--watch] [--interval S]   where a job stands
//   brook list                                  every job the chief knows
//   brook cancel JOB [--reason TEXT]            stop a queued or running job
//   brook logs JOB                              the job's event log
// Each takes --chief HOST:PORT (else $BROOK_CHIEF, else TF_CONFIG's
// cluster.chief) and --output table|json. Exit codes: job_exit_codes.h.
//
// `status --watch` polls every --interval seconds and prints a progress line
// (rewritten in place on a terminal, one line per poll otherwise; with
// --output json one JSON object per poll), then a summary when the job ends,
// exiting 0 if it succeeded and 1 if it failed or was cancelled. A chief that
// stops answering mid-watch (a restart) is waited for up to a minute.
#include <sys/ioctl.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chief/cli/security_flags.h"
#include "chief/cli/commands.h"
#include "chief/cli/job_exit_codes.h"
#include "chief/client/chief_client.h"
#include "chief/client/cluster_spec.h"
#include "chief/client/job_format.h"

namespace brook::cli {
namespace {

static_assert(job_exit::kOk == kExitOk && job_exit::kFailed == kExitFailed &&
              job_exit::kUsage == kExitUsage);

// How long `status --watch` keeps polling a chief that stopped answering.
constexpr absl::Duration kWatchUnreachableBudget = absl::Seconds(60);

struct JobFlags {
  std::string chief;
  std::string output = "table";
  double timeout_seconds = 10;
  std::string job;
  bool watch = false;
  double interval_seconds = 2;
  std::string reason;
  security::TlsOptions tls;
  TokenFlags token;

  bool json() const { return output == "json"; }
};

void AddChiefFlags(CLI::App* cmd, JobFlags* f) {
  cmd->add_option("--chief", f->chief,
                  "Chief HOST:PORT (default: $BROOK_CHIEF, else TF_CONFIG's cluster.chief)");
  cmd->add_option("-o,--output", f->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  cmd->add_option("--timeout", f->timeout_seconds, "Seconds to wait for each reply from the chief")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  AddTlsFlags(cmd, &f->tls, TlsRole::kClient);
  AddClientTokenFlags(cmd, &f->token);
}

// Prints "brook CMD: MESSAGE" on stderr and returns the exit code for it.
int Fail(const std::string& cmd, const absl::Status& status) {
  std::cerr << "brook " << cmd << ": " << status.message() << "\n";
  return job_exit::ForError(status);
}

// The client for --chief / $BROOK_CHIEF / TF_CONFIG; nullptr with *exit_code
// set (usage) when there is no usable address.
std::unique_ptr<chief::ChiefClient> ConnectToChief(const std::string& cmd, const JobFlags& f,
                                                   int* exit_code) {
  absl::StatusOr<std::string> address = chief::ChiefAddress(f.chief);
  if (!address.ok()) {
    std::cerr << "brook " << cmd << ": " << address.status().message() << "\n";
    *exit_code = job_exit::kUsage;
    return nullptr;
  }
  chief::ChiefClientOptions options;
  options.deadline = absl::Seconds(f.timeout_seconds);
  options.tls = f.tls;
  absl::StatusOr<std::string> token = f.token.Resolve();
  if (!token.ok()) {
    std::cerr << "brook " << cmd << ": " << token.status().message() << "\n";
    *exit_code = job_exit::kUsage;
    return nullptr;
  }
  options.bearer_token = *token;
  absl::StatusOr<std::unique_ptr<chief::ChiefClient>> client =
      chief::ChiefClient::Connect(*address, options);
  if (!client.ok()) {
    std::cerr << "brook " << cmd << ": " << client.status().message() << "\n";
    *exit_code = job_exit::kUsage;
    return nullptr;
  }
  return std::move(*client);
}

// Terminal columns of stdout, 0 if unknown.
size_t TerminalWidth() {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) return ws.ws_col;
  return 0;
}

int Watch(chief::ChiefClient& client, const JobFlags& f) {
  const bool tty = isatty(STDOUT_FILENO) != 0;
  v1::GetJobRequest request;
  request.set_job_id(f.job);
  bool first = true;
  bool line_open = false;  // a \r-updated line is on the terminal
  std::optional<absl::Time> failing_since;
  while (true) {
    absl::StatusOr<v1::JobStatus> job = client.GetJob(request);
    const absl::Time now = absl::Now();
    if (!job.ok()) {
      const bool unreachable = job_exit::ForError(job.status()) == job_exit::kUnreachable;
      if (first || !unreachable ||
          (failing_since && now - *failing_since > kWatchUnreachableBudget)) {
        if (line_open) std::cout << "\n" << std::flush;
        return Fail("status", job.status());
      }
      if (!failing_since) {
        failing_since = now;
        if (line_open) std::cout << "\n" << std::flush;
        line_open = false;
        std::cerr << "brook status: " << job.status().message() << "; retrying for up to "
                  << absl::FormatDuration(kWatchUnreachableBudget) << "\n";
      }
      absl::SleepFor(absl::Seconds(f.interval_seconds));
      continue;
    }
    first = false;
    failing_since.reset();
    const bool finished = chief::IsFinishedState(job->state());
    if (f.json()) {
      std::cout << chief::ToJson(*job) << std::endl;
    } else if (tty) {
      std::string line = chief::ProgressLine(*job, now);
      if (const size_t width = TerminalWidth(); width > 1 && line.size() >= width) {
        line.resize(width - 1);
      }
      std::cout << "\r" << line << "\033[K" << std::flush;
      line_open = true;
    } else {
      std::cout << chief::ProgressLine(*job, now) << std::endl;
    }
    if (finished) {
      if (line_open) std::cout << "\n";
      if (!f.json()) std::cout << chief::JobSummary(*job, now);
      std::cout << std::flush;
      return job_exit::ForJobState(job->state());
    }
    absl::SleepFor(absl::Seconds(f.interval_seconds));
  }
}

int RunStatus(const JobFlags& f) {
  int rc = job_exit::kOk;
  std::unique_ptr<chief::ChiefClient> client = ConnectToChief("status", f, &rc);
  if (client == nullptr) return rc;
  if (f.watch) return Watch(*client, f);
  v1::GetJobRequest request;
  request.set_job_id(f.job);
  absl::StatusOr<v1::JobStatus> job = client->GetJob(request);
  if (!job.ok()) return Fail("status", job.status());
  if (f.json()) {
    std::cout << chief::ToJson(*job) << std::endl;
  } else {
    std::cout << chief::JobSummary(*job, absl::Now()) << std::flush;
  }
  return job_exit::ForJobState(job->state());
}

int RunList(const JobFlags& f) {
  int rc = job_exit::kOk;
  std::unique_ptr<chief::ChiefClient> client = ConnectToChief("list", f, &rc);
  if (client == nullptr) return rc;
  absl::StatusOr<v1::ListJobsResponse> jobs = client->ListJobs();
  if (!jobs.ok()) return Fail("list", jobs.status());
  if (f.json()) {
    std::cout << chief::ToJson(*jobs) << std::endl;
  } else {
    std::cout << chief::JobsTable(jobs->jobs(), absl::Now()) << std::flush;
  }
  return job_exit::kOk;
}

int RunCancel(const JobFlags& f) {
  int rc = job_exit::kOk;
  std::unique_ptr<chief::ChiefClient> client = ConnectToChief("cancel", f, &rc);
  if (client == nullptr) return rc;
  v1::CancelJobRequest request;
  request.set_job_id(f.job);
  request.set_reason(f.reason);
  absl::StatusOr<v1::JobStatus> job = client->CancelJob(request);
  if (!job.ok()) return Fail("cancel", job.status());
  if (f.json()) {
    std::cout << chief::ToJson(*job) << std::endl;
  } else {
    std::cout << "job " << job->id() << " is " << job->state()
              << (job->message().empty() ? "" : ": " + job->message()) << std::endl;
  }
  return job_exit::kOk;
}

int RunLogs(const JobFlags& f) {
  int rc = job_exit::kOk;
  std::unique_ptr<chief::ChiefClient> client = ConnectToChief("logs", f, &rc);
  if (client == nullptr) return rc;
  v1::GetJobRequest request;
  request.set_job_id(f.job);
  request.set_with_events(true);
  absl::StatusOr<v1::JobStatus> job = client->GetJob(request);
  if (!job.ok()) return Fail("logs", job.status());
  if (f.json()) {
    std::cout << chief::ToJson(*job) << std::endl;
  } else {
    std::cout << chief::EventLog(*job) << std::flush;
  }
  return job_exit::kOk;
}

}  // namespace

void RegisterJobCommands(CLI::App& app, int* exit_code) {
  {
    auto f = std::make_shared<JobFlags>();
    CLI::App* cmd = app.add_subcommand("status", "Show where a job stands (--watch: follow it)");
    cmd->add_option("job", f->job, "Job id")->required();
    cmd->add_flag("-w,--watch", f->watch,
                  "Follow the job until it ends; exit 0 if it succeeded, 1 if not");
    cmd->add_option("--interval", f->interval_seconds, "Seconds between polls with --watch")
        ->check(CLI::Range(0.05, 3600.0))
        ->capture_default_str();
    AddChiefFlags(cmd, f.get());
    cmd->callback([f, exit_code] { *exit_code = RunStatus(*f); });
  }
  {
    auto f = std::make_shared<JobFlags>();
    CLI::App* cmd = app.add_subcommand("list", "List the chief's jobs");
    AddChiefFlags(cmd, f.get());
    cmd->callback([f, exit_code] { *exit_code = RunList(*f); });
  }
  {
    auto f = std::make_shared<JobFlags>();
    CLI::App* cmd = app.add_subcommand("cancel", "Cancel a queued or running job");
    cmd->add_option("job", f->job, "Job id")->required();
    cmd->add_option("--reason", f->reason, "Why (kept in the job's message and event log)");
    AddChiefFlags(cmd, f.get());
    cmd->callback([f, exit_code] { *exit_code = RunCancel(*f); });
  }
  {
    auto f = std::make_shared<JobFlags>();
    CLI::App* cmd = app.add_subcommand("logs", "Print a job's event log");
    cmd->add_option("job", f->job, "Job id")->required();
    AddChiefFlags(cmd, f.get());
    cmd->callback([f, exit_code] { *exit_code = RunLogs(*f); });
  }
}

}  // namespace brook::cli
