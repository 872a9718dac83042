// Child processes for integration tests: start a binary with its stdout on a
// pipe, wait (bounded) for a line, signal it, wait (bounded) for its exit.
// The destructor SIGKILLs and reaps a child still running, so a failing test
// never leaves processes behind. Plus StartBrookPs(), which starts
// `brook ps` on 127.0.0.1:0 and parses the ports it printed.
//
// Thread-compatible.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace brook::testing {

class ChildProcess {
 public:
  // Starts argv (argv[0] a path). stdout is captured; stderr is inherited so
  // the child's log lands in the test's output. nullptr (with *error set)
  // if the process could not be started.
  static std::unique_ptr<ChildProcess> Start(const std::vector<std::string>& argv,
                                             std::string* error);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads stdout until a line starting with `prefix` arrives and returns it
  // (no newline); nullopt on timeout or EOF. Everything read is kept in
  // stdout_text().
  std::optional<std::string> WaitForLine(std::string_view prefix,
                                         std::chrono::milliseconds timeout);
  const std::string& stdout_text() const { return out_; }
  // kill(pid, sig); false if the child is already reaped.
  bool Signal(int sig);
  // Exit code, or 128 + signal number if a signal ended it; nullopt if it
  // is still running after `timeout`.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  bool running() const { return !exit_code_.has_value(); }

 private:
  ChildProcess() = default;
  bool ReapNoHang();

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string out_;
  size_t scanned_ = 0;  // out_ before this offset holds no wanted line
  std::optional<int> exit_code_;
};

// A running `brook ps`.
struct PsProcess {
  std::unique_ptr<ChildProcess> process;
  std::string address;          // 127.0.0.1:PORT
  std::string metrics_address;  // 127.0.0.1:MPORT, empty if metrics are off
};

// Starts `BrookBinary() ps --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0
// --shard-index I --num-shards N` plus `extra_args` and waits up to `timeout`
// for its "brook ps listening on ..." line. nullopt (with *error set) on
// failure; the process is killed then.
// `listen` replaces 127.0.0.1:0 (e.g. to restart a PS on its old port).
std::optional<PsProcess> StartBrookPs(int shard_index, int num_shards,
                                      const std::vector<std::string>& extra_args,
                                      std::chrono::milliseconds timeout, std::string* error,
                                      const std::string& listen = "127.0.0.1:0");

// Parses "brook ps listening on HOST:PORT metrics on HOST:MPORT" (the
// metrics part may be "off"). False if the line has another shape.
bool ParsePsListeningLine(std::string_view line, std::string* address,
                          std::string* metrics_address);

// A running `brook serve`: its addresses from its "brook serve listening on
// http H:P grpc H:P metrics H:P" line ("" for one that is off).
struct ServeProcess {
  std::unique_ptr<ChildProcess> process;
  std::string http, grpc, metrics;
  int http_port() const;  // 0 when unknown
};

// Starts `BrookBinary() serve` plus `args` (the addresses included: give
// 127.0.0.1:0 for free ports) and waits up to `timeout` for its listening
// line. nullopt (with *error set) on failure; the process is killed then.
std::optional<ServeProcess> StartBrookServe(const std::vector<std::string>& args,
                                            std::chrono::milliseconds timeout, std::string* error);

}  // namespace brook::testing
