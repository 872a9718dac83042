// A Brook cluster as child processes of this one, on 127.0.0.1: PS shards
// (durable under WORK/ps-I), a chief (state under WORK/chief-state) and
// trainers working for it, every port chosen at run time, every log under
// WORK/logs. `brook local` and `brook bench soak` run on it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/child_process.h"

namespace brook::cli {

struct LocalClusterOptions {
  int ps = 2;
  int trainers = 2;
  double lease_seconds = 5;
  int cpu_threads = 1;  // CPU backend threads per trainer
};

class LocalCluster {
 public:
  explicit LocalCluster(std::string work_dir) : work_dir_(std::move(work_dir)) {}
  ~LocalCluster() { StopAll(); }
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Runs `brook ARGS...` (this binary) as a child named `name`.
  absl::StatusOr<ChildProcess*> Start(const std::string& name, std::vector<std::string> args);
  // Starts the PS shards, the chief and the trainers; returns once the PS
  // and the chief listen.
  absl::Status StartNodes(const LocalClusterOptions& options);

  const std::vector<std::string>& ps_addresses() const { return ps_addresses_; }
  const std::string& chief_address() const { return chief_address_; }
  // Where child `name` logs: LogPrefix(name) + ".err" (stderr), ".out".
  std::string LogPrefix(const std::string& name) const { return work_dir_ + "/logs/" + name; }
  // Every child still held, in start order.
  std::vector<ChildProcess*> children() const;

  // Trainers first (they commit what they trained), then the chief, then
  // the PS shards (which drain).
  void StopAll();
  // A child that died on its own (not a trainer unless asked: the chief
  // re-leases theirs).
  const ChildProcess* Dead(bool include_trainers);

 private:
  const std::string work_dir_;
  std::vector<std::unique_ptr<ChildProcess>> children_;
  std::vector<std::string> ps_addresses_;
  std::string chief_address_;
};

// This binary's path (/proc/self/exe).
std::string SelfPath();

// `dir` made absolute with a logs/ folder in it; empty: a new
// /tmp/brook-PREFIX-XXXXXX.
absl::StatusOr<std::string> MakeWorkDir(const std::string& dir, const std::string& prefix);

}  // namespace brook::cli
