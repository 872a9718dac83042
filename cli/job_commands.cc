// The job CLI, talking to a chief (chief/client/chief_client.h):
//   brook status JOB [--watch] [--interval S]   where a job stands
//   brook list                                  every job the chief knows
//   brook cancel JOB [--reason TEXT]            stop a queued or running job
//   brook logs JOB [--follow] [--trainer ID]     the job's event log, or a
//                                               trainer's own process log
// Each takes --chief HOST:PORT (else $BROOK_CHIEF, else TF_CONFIG's
// cluster.chief) and --output table|json. Exit codes: job_exit_codes.h.
//
// `status --watch` polls every --interval seconds and prints a progress line
// (rewritten in place on a terminal, one line per poll otherwise; with
// --output json one JSON object per poll), then a summary when the job ends,
// exiting 0 if it succeeded and 1 if it failed or was cancelled. A chief that
// stops answering mid-watch (a restart) is waited for up to a minute.
//
// `logs --follow` is `tail -f` of the event log: what is there, then each
// new event as it comes (--output json: one JSON object per event), until
// the job ends, with `status --watch`'s exit codes and minute of patience
// for a restarting chief. `logs --trainer ID` prints the file the trainer
// (a `brook trainer --chief` process) said its stderr and stdout go to, if
// it is on this machine (`brook local`: WORK_DIR/logs/trainer-N.err/.out),
// else prints where it is; a trainer logging to a pipe (a container) is an
// error pointing at kubectl logs.
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chief/client/chief_client.h"
#include "chief/client/cluster_spec.h"
#include "chief/client/job_format.h"
#include "cli/commands.h"
#include "cli/job_exit_codes.h"
#include "cli/security_flags.h"

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
  bool follow = false;
  std::string trainer;
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

// Polls the job every --interval until `on_job` returns an exit code. A
// chief that stops answering after the first reply (a restart) is retried
// for up to kWatchUnreachableBudget, `before_note` running before the note
// on stderr; the first failure, any other error, or a longer outage ends it
// with the error's exit code.
int PollJob(chief::ChiefClient& client, const JobFlags& f, const std::string& cmd, bool with_events,
            const std::function<std::optional<int>(const v1::JobStatus&, absl::Time)>& on_job,
            const std::function<void()>& before_note) {
  v1::GetJobRequest request;
  request.set_job_id(f.job);
  request.set_with_events(with_events);
  bool first = true;
  std::optional<absl::Time> failing_since;
  while (true) {
    absl::StatusOr<v1::JobStatus> job = client.GetJob(request);
    const absl::Time now = absl::Now();
    if (!job.ok()) {
      const bool unreachable = job_exit::ForError(job.status()) == job_exit::kUnreachable;
      if (first || !unreachable ||
          (failing_since && now - *failing_since > kWatchUnreachableBudget)) {
        before_note();
        return Fail(cmd, job.status());
      }
      if (!failing_since) {
        failing_since = now;
        before_note();
        std::cerr << "brook " << cmd << ": " << job.status().message() << "; retrying for up to "
                  << absl::FormatDuration(kWatchUnreachableBudget) << "\n";
      }
      absl::SleepFor(absl::Seconds(f.interval_seconds));
      continue;
    }
    first = false;
    failing_since.reset();
    if (std::optional<int> rc = on_job(*job, now)) return *rc;
    absl::SleepFor(absl::Seconds(f.interval_seconds));
  }
}

int Watch(chief::ChiefClient& client, const JobFlags& f) {
  const bool tty = isatty(STDOUT_FILENO) != 0;
  bool line_open = false;  // a \r-updated line is on the terminal
  auto close_line = [&] {
    if (line_open) std::cout << "\n" << std::flush;
    line_open = false;
  };
  return PollJob(
      client, f, "status", /*with_events=*/false,
      [&](const v1::JobStatus& job, absl::Time now) -> std::optional<int> {
        const bool finished = chief::IsFinishedState(job.state());
        if (f.json()) {
          std::cout << chief::ToJson(job) << std::endl;
        } else if (tty) {
          std::string line = chief::ProgressLine(job, now);
          if (const size_t width = TerminalWidth(); width > 1 && line.size() >= width) {
            line.resize(width - 1);
          }
          std::cout << "\r" << line << "\033[K" << std::flush;
          line_open = true;
        } else {
          std::cout << chief::ProgressLine(job, now) << std::endl;
        }
        if (!finished) return std::nullopt;
        if (line_open) std::cout << "\n";
        if (!f.json()) std::cout << chief::JobSummary(job, now);
        std::cout << std::flush;
        return job_exit::ForJobState(job.state());
      },
      close_line);
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

// `logs --follow`: the events as they come, until the job ends.
int FollowLogs(chief::ChiefClient& client, const JobFlags& f) {
  uint64_t seen = 0;
  return PollJob(
      client, f, "logs", /*with_events=*/true,
      [&](const v1::JobStatus& job, absl::Time) -> std::optional<int> {
        const chief::NewEvents fresh = chief::FollowEvents(job, &seen);
        if (fresh.missed > 0 && !f.json()) {
          std::cout << "(" << fresh.missed << " events dropped before they could be shown)\n";
        }
        for (int i = fresh.first; i < job.events_size(); ++i) {
          if (f.json()) {
            std::cout << chief::ToJson(job.events(i)) << "\n";
          } else {
            std::cout << chief::EventLine(job.events(i));
          }
        }
        std::cout << std::flush;
        if (!chief::IsFinishedState(job.state())) return std::nullopt;
        return job_exit::ForJobState(job.state());
      },
      [] {});
}

std::string HostName() {
  char host[256] = {};
  return gethostname(host, sizeof(host) - 1) == 0 ? std::string(host) : std::string();
}

// Prints what `path` holds from *offset on and advances *offset; false
// (with the error on stderr) if it cannot be read.
bool PrintFrom(const std::string& path, uint64_t* offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "brook logs: cannot read " << path << ": " << std::strerror(errno) << "\n";
    return false;
  }
  in.seekg(static_cast<std::streamoff>(*offset));
  char buf[1 << 16];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    std::cout.write(buf, in.gcount());
    *offset += static_cast<uint64_t>(in.gcount());
  }
  std::cout << std::flush;
  return true;
}

// `logs JOB --trainer ID`: the trainer's own process log, as the trainer
// told the chief where it is (v1::NodeLog). Printed when it is a file on
// this machine (with --follow: and what it gains until the job ends), else
// where it is.
int TrainerLogs(chief::ChiefClient& client, const JobFlags& f) {
  v1::GetJobRequest request;
  request.set_job_id(f.job);
  request.set_with_events(true);
  absl::StatusOr<v1::JobStatus> job = client.GetJob(request);
  if (!job.ok()) return Fail("logs", job.status());
  const v1::ChiefTrainerLog* found = nullptr;
  std::vector<std::string> known;
  for (const v1::ChiefTrainerLog& t : job->trainer_logs()) {
    if (t.node_id() == f.trainer) found = &t;
    known.push_back(t.node_id());
  }
  if (found == nullptr) {
    return Fail("logs", absl::NotFoundError(absl::StrCat(
                            "the chief knows no trainer '", f.trainer, "' (it knows: ",
                            known.empty() ? "none" : absl::StrJoin(known, ", "), ")")));
  }
  const v1::NodeLog& log = found->log();
  if (f.json()) {
    std::cout << chief::ToJson(*found) << std::endl;
    return job_exit::kOk;
  }
  if (log.paths_size() == 0) {
    return Fail("logs", absl::FailedPreconditionError(absl::StrCat(
                            "trainer ", f.trainer, " on ", log.host(),
                            " writes its log to a terminal or a pipe, not a file (on Kubernetes: "
                            "kubectl logs on its pod)")));
  }
  if (log.host() != HostName()) {
    for (const std::string& path : log.paths()) {
      std::cout << "trainer " << f.trainer << " logs to " << log.host() << ":" << path << "\n";
    }
    std::cerr << "brook logs: that is another machine (this is " << HostName()
              << "); not printed\n";
    return job_exit::kOk;
  }
  std::vector<uint64_t> offsets(log.paths_size(), 0);
  auto print_all = [&]() -> bool {
    for (int i = 0; i < log.paths_size(); ++i) {
      if (log.paths_size() > 1) std::cout << "==> " << log.paths(i) << " <==\n";
      if (!PrintFrom(log.paths(i), &offsets[i])) return false;
    }
    return true;
  };
  if (!print_all()) return job_exit::kFailed;
  if (!f.follow || chief::IsFinishedState(job->state())) return job_exit::kOk;
  return PollJob(
      client, f, "logs", /*with_events=*/false,
      [&](const v1::JobStatus& now_job, absl::Time) -> std::optional<int> {
        for (int i = 0; i < log.paths_size(); ++i) {
          if (!PrintFrom(log.paths(i), &offsets[i])) return job_exit::kFailed;
        }
        if (!chief::IsFinishedState(now_job.state())) return std::nullopt;
        return job_exit::ForJobState(now_job.state());
      },
      [] {});
}

int RunLogs(const JobFlags& f) {
  int rc = job_exit::kOk;
  std::unique_ptr<chief::ChiefClient> client = ConnectToChief("logs", f, &rc);
  if (client == nullptr) return rc;
  if (!f.trainer.empty()) return TrainerLogs(*client, f);
  if (f.follow) return FollowLogs(*client, f);
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
    CLI::App* cmd = app.add_subcommand(
        "logs",
        "Print a job's event log (--follow: as it grows; --trainer ID: a trainer's own log)");
    cmd->add_option("job", f->job, "Job id")->required();
    cmd->add_flag("-f,--follow", f->follow,
                  "Keep printing new events (or the trainer's new log lines) until the job ends; "
                  "exit 0 if it succeeded, 1 if not");
    cmd->add_option("--trainer", f->trainer,
                    "Print this trainer's process log (its node id, e.g. trainer-0) when it is a "
                    "file on this machine, else where it is");
    cmd->add_option("--interval", f->interval_seconds, "Seconds between polls with --follow")
        ->check(CLI::Range(0.05, 3600.0))
        ->capture_default_str();
    AddChiefFlags(cmd, f.get());
    cmd->callback([f, exit_code] { *exit_code = RunLogs(*f); });
  }
}

}  // namespace brook::cli
