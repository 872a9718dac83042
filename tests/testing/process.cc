#include "tests/testing/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/testing/test_util.h"

namespace brook::testing {
namespace {

using Clock = std::chrono::steady_clock;

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::unique_ptr<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                                  std::string* error) {
  if (argv.empty()) {
    *error = "empty argv";
    return nullptr;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return nullptr;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return nullptr;
  }
  if (pid == 0) {
    dup2(fds[1], 1);  // dup2 clears O_CLOEXEC on the new descriptor
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  std::unique_ptr<ChildProcess> p(new ChildProcess());
  p->pid_ = pid;
  p->stdout_fd_ = fds[0];
  return p;
}

ChildProcess::~ChildProcess() {
  if (running() && pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

bool ChildProcess::ReapNoHang() {
  if (!running()) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    exit_code_ = ExitCodeOf(status);
    return true;
  }
  return false;
}

std::optional<std::string> ChildProcess::WaitForLine(std::string_view prefix,
                                                     std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    // Look for a complete line starting with prefix.
    size_t start = scanned_;
    size_t nl;
    while ((nl = out_.find('\n', start)) != std::string::npos) {
      std::string_view line(out_.data() + start, nl - start);
      if (line.substr(0, prefix.size()) == prefix) {
        scanned_ = nl + 1;
        return std::string(line);
      }
      start = nl + 1;
    }
    scanned_ = start;
    const auto now = Clock::now();
    if (now >= deadline || stdout_fd_ < 0) return std::nullopt;
    pollfd pfd{stdout_fd_, POLLIN, 0};
    int wait_ms =
        static_cast<int>(
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count()) +
        1;
    if (poll(&pfd, 1, wait_ms) < 0 && errno != EINTR) return std::nullopt;
    char buf[4096];
    ssize_t n = read(stdout_fd_, buf, sizeof(buf));
    if (n > 0) {
      out_.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {  // EOF: the child closed stdout (exited)
      close(stdout_fd_);
      stdout_fd_ = -1;
    }
  }
}

bool ChildProcess::Signal(int sig) {
  if (ReapNoHang()) return false;
  return kill(pid_, sig) == 0;
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!ReapNoHang()) {
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return exit_code_;
}

bool ParsePsListeningLine(std::string_view line, std::string* address,
                          std::string* metrics_address) {
  constexpr std::string_view kHead = "brook ps listening on ";
  constexpr std::string_view kMid = " metrics on ";
  if (line.substr(0, kHead.size()) != kHead) return false;
  line.remove_prefix(kHead.size());
  size_t mid = line.find(kMid);
  if (mid == std::string_view::npos) return false;
  *address = std::string(line.substr(0, mid));
  std::string_view metrics = line.substr(mid + kMid.size());
  *metrics_address = metrics == "off" ? "" : std::string(metrics);
  return address->find(':') != std::string::npos &&
         (metrics_address->empty() || metrics_address->find(':') != std::string::npos);
}

std::optional<PsProcess> StartBrookPs(int shard_index, int num_shards,
                                      const std::vector<std::string>& extra_args,
                                      std::chrono::milliseconds timeout, std::string* error,
                                      const std::string& listen) {
  std::vector<std::string> argv = {BrookBinary(),      "ps",
                                   "--listen",         listen,
                                   "--metrics-listen", "127.0.0.1:0",
                                   "--shard-index",    std::to_string(shard_index),
                                   "--num-shards",     std::to_string(num_shards)};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  PsProcess ps;
  ps.process = ChildProcess::Start(argv, error);
  if (!ps.process) return std::nullopt;
  std::optional<std::string> line = ps.process->WaitForLine("brook ps listening on ", timeout);
  if (!line) {
    *error = "no 'brook ps listening on' line from " + argv[0] +
             " within the timeout; stdout: " + ps.process->stdout_text();
    return std::nullopt;  // ~ChildProcess kills it
  }
  if (!ParsePsListeningLine(*line, &ps.address, &ps.metrics_address)) {
    *error = "unparseable line: " + *line;
    return std::nullopt;
  }
  return ps;
}

int ServeProcess::http_port() const {
  int port = 0;
  const size_t colon = http.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(http.substr(colon + 1), &port)) return 0;
  return port;
}

std::optional<ServeProcess> StartBrookServe(const std::vector<std::string>& args,
                                            std::chrono::milliseconds timeout, std::string* error) {
  std::vector<std::string> argv = {BrookBinary(), "serve"};
  argv.insert(argv.end(), args.begin(), args.end());
  ServeProcess s;
  s.process = ChildProcess::Start(argv, error);
  if (!s.process) return std::nullopt;
  const std::string head = "brook serve listening on ";
  std::optional<std::string> line = s.process->WaitForLine(head, timeout);
  if (!line) {
    *error =
        absl::StrCat("no '", head, "' line within the timeout; output: ", s.process->stdout_text());
    return std::nullopt;  // ~ChildProcess kills it
  }
  // "... on http H:P grpc H:P|off metrics H:P|off"
  const std::vector<std::string> words = absl::StrSplit(*line, ' ');
  if (words.size() != 10 || words[4] != "http" || words[6] != "grpc" || words[8] != "metrics") {
    *error = "unparseable line: " + *line;
    return std::nullopt;
  }
  s.http = words[5];
  s.grpc = words[7] == "off" ? "" : words[7];
  s.metrics = words[9] == "off" ? "" : words[9];
  return s;
}

}  // namespace brook::testing
