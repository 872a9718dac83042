#include "tests/testing/test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace brook::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/brook_test_XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

CommandResult RunCommand(const std::vector<std::string>& argv, int timeout_seconds) {
  CommandResult result;
  int pipefd[2];
  if (pipe(pipefd) != 0) return result;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 1);
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    close(pipefd[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipefd[1]);
  fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  char buf[65536];
  int status = 0;
  bool exited = false;
  while (true) {
    ssize_t n;
    while ((n = read(pipefd[0], buf, sizeof(buf))) > 0) result.output.append(buf, n);
    if (!exited && waitpid(pid, &status, WNOHANG) == pid) exited = true;
    if (exited && n == 0) break;  // EOF after exit
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      if (!exited) waitpid(pid, &status, 0);
      result.output += "\n[test harness: killed after timeout]\n";
      close(pipefd[0]);
      result.exit_code = -1;
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  close(pipefd[0]);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string BrookBinary() {
  const char* b = std::getenv("BROOK_BINARY");
  return b ? b : "build/bin/brook";
}

std::string SourceDir() {
  const char* s = std::getenv("BROOK_SOURCE_DIR");
  return s ? s : std::filesystem::current_path().string();
}

std::string SharedDataDir() { return SourceDir() + "/../shared/data"; }

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFileOrDie(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << contents;
  if (!out) throw std::runtime_error("short write to " + path);
}

ScopedEnv::ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
  if (const char* old = std::getenv(name)) old_ = old;
  if (value) {
    setenv(name, value->c_str(), 1);
  } else {
    unsetenv(name);
  }
}

ScopedEnv::~ScopedEnv() {
  if (old_) {
    setenv(name_, old_->c_str(), 1);
  } else {
    unsetenv(name_);
  }
}

}  // namespace brook::testing
