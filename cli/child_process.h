// A child process of `brook local`: started with its stdout and stderr in
// files (so nothing blocks on a full pipe and every log survives for the
// user), in its own process group (a terminal's Ctrl-C reaches only
// `brook local`, which stops the children in order), and with
// PR_SET_PDEATHSIG so a `brook local` killed with -9 takes them along.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace brook::cli {

class ChildProcess {
 public:
  // argv[0] is the program's path. `log_prefix`.out / .err receive the
  // child's stdout / stderr.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::string& name,
                                                             const std::vector<std::string>& argv,
                                                             const std::string& log_prefix);
  ~ChildProcess();  // SIGKILLs and reaps a child still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The first stdout line starting with `prefix`, waiting up to `timeout`.
  // FAILED_PRECONDITION (with the tail of its stderr) if the child exits
  // first, DEADLINE_EXCEEDED if the line does not come.
  absl::StatusOr<std::string> WaitForLine(const std::string& prefix, absl::Duration timeout);
  // Whether it still runs (reaps it if not).
  bool Running();
  void Signal(int sig);
  // SIGTERM, then SIGKILL after `grace`; returns the exit status (128 + sig
  // for a signal).
  int Stop(absl::Duration grace);
  // Waits up to `timeout` for it to exit by itself; -1 if still running.
  int Wait(absl::Duration timeout);

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }
  std::string StderrTail(size_t bytes = 2000) const;

 private:
  ChildProcess(std::string name, pid_t pid, std::string log_prefix)
      : name_(std::move(name)), pid_(pid), log_prefix_(std::move(log_prefix)) {}

  const std::string name_;
  const pid_t pid_;
  const std::string log_prefix_;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace brook::cli
