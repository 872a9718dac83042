#include "cli/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace brook::cli {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::string& name, const std::vector<std::string>& argv, const std::string& log_prefix) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  const std::string out = log_prefix + ".out", err = log_prefix + ".err";
  const int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err_fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0 || err_fd < 0) {
    if (out_fd >= 0) close(out_fd);
    if (err_fd >= 0) close(err_fd);
    return absl::InternalError(absl::StrCat("cannot create ", log_prefix, ".{out,err}"));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(out_fd);
    close(err_fd);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    // Async-signal-safe calls only from here to exec.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // the parent blocks SIGINT/SIGTERM
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out_fd);
  close(err_fd);
  return std::unique_ptr<ChildProcess>(new ChildProcess(name, pid, log_prefix));
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
  }
}

bool ChildProcess::Running() {
  if (reaped_) return false;
  if (waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
  return !reaped_;
}

void ChildProcess::Signal(int sig) {
  if (!reaped_) kill(pid_, sig);
}

std::string ChildProcess::StderrTail(size_t bytes) const {
  std::string err = ReadFile(log_prefix_ + ".err");
  return err.size() > bytes ? err.substr(err.size() - bytes) : err;
}

absl::StatusOr<std::string> ChildProcess::WaitForLine(const std::string& prefix,
                                                      absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    std::istringstream lines(ReadFile(log_prefix_ + ".out"));
    for (std::string line; std::getline(lines, line);) {
      if (absl::StartsWith(line, prefix) && !lines.eof()) return line;  // a whole line
    }
    if (!Running()) {
      return absl::FailedPreconditionError(absl::StrCat(name_,
                                                        " exited before it was ready; its stderr (",
                                                        log_prefix_, ".err):\n", StderrTail()));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(name_, " did not say '", prefix, "' within ",
                                                      absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

int ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (Running()) {
    if (absl::Now() > deadline) return -1;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
}

int ChildProcess::Stop(absl::Duration grace) {
  Signal(SIGTERM);
  int code = Wait(grace);
  if (code < 0) {
    Signal(SIGKILL);
    code = Wait(absl::Seconds(10));
  }
  return code;
}

}  // namespace brook::cli
