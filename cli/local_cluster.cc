#include "cli/local_cluster.h"

#include <stdlib.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/status_macros.h"

namespace brook::cli {
namespace {

// The address in "brook X listening on HOST:PORT ..." lines.
std::string ListeningAddress(const std::string& line) {
  std::vector<std::string> words = absl::StrSplit(line, ' ');
  return words.size() > 4 ? words[4] : "";
}

}  // namespace

std::string SelfPath() {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "brook" : p.string();
}

absl::StatusOr<std::string> MakeWorkDir(const std::string& dir, const std::string& prefix) {
  std::string work = dir;
  if (work.empty()) {
    std::string tmpl = absl::StrCat("/tmp/brook-", prefix, "-XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError("cannot create a work directory in /tmp");
    }
    work = tmpl;
  }
  work = std::filesystem::absolute(work).lexically_normal().string();
  std::error_code ec;
  std::filesystem::create_directories(work + "/logs", ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", work, "/logs: ", ec.message()));
  return work;
}

absl::StatusOr<ChildProcess*> LocalCluster::Start(const std::string& name,
                                                  std::vector<std::string> args) {
  args.insert(args.begin(), SelfPath());
  ASSIGN_OR_RETURN(auto child, ChildProcess::Start(name, args, LogPrefix(name)));
  children_.push_back(std::move(child));
  return children_.back().get();
}

absl::Status LocalCluster::StartNodes(const LocalClusterOptions& o) {
  std::vector<ChildProcess*> ps;
  for (int i = 0; i < o.ps; ++i) {
    ASSIGN_OR_RETURN(ChildProcess * p, Start(absl::StrCat("ps-", i),
                                             {"ps", "--listen", "127.0.0.1:0", "--metrics-listen",
                                              "127.0.0.1:0", "--shard-index", std::to_string(i),
                                              "--num-shards", std::to_string(o.ps), "--data-dir",
                                              absl::StrCat(work_dir_, "/ps-", i)}));
    ps.push_back(p);
  }
  for (ChildProcess* p : ps) {
    ASSIGN_OR_RETURN(std::string line, p->WaitForLine("brook ps listening on", absl::Seconds(60)));
    ps_addresses_.push_back(ListeningAddress(line));
  }
  ASSIGN_OR_RETURN(ChildProcess * chief_proc,
                   Start("chief", {"chief", "--listen", "127.0.0.1:0", "--metrics-listen",
                                   "127.0.0.1:0", "--state-dir", work_dir_ + "/chief-state", "--ps",
                                   absl::StrJoin(ps_addresses_, ","), "--lease-seconds",
                                   absl::StrCat(o.lease_seconds)}));
  ASSIGN_OR_RETURN(std::string chief_line,
                   chief_proc->WaitForLine("brook chief listening on", absl::Seconds(60)));
  chief_address_ = ListeningAddress(chief_line);
  for (int i = 0; i < o.trainers; ++i) {
    RETURN_IF_ERROR(
        Start(absl::StrCat("trainer-", i),
              {"trainer", "--chief", chief_address_, "--node-id", absl::StrCat("trainer-", i),
               "--metrics-listen", "127.0.0.1:0", "--cpu-threads", std::to_string(o.cpu_threads)})
            .status());
  }
  return absl::OkStatus();
}

std::vector<ChildProcess*> LocalCluster::children() const {
  std::vector<ChildProcess*> out;
  for (const auto& c : children_) out.push_back(c.get());
  return out;
}

void LocalCluster::StopAll() {
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
    (*it)->Stop(absl::Seconds(15));
  }
  children_.clear();
}

const ChildProcess* LocalCluster::Dead(bool include_trainers) {
  for (const auto& c : children_) {
    if (!include_trainers && c->name().rfind("trainer", 0) == 0) continue;
    if (c->name() == "data-gen") continue;  // done before the cluster started
    if (!c->Running()) return c.get();
  }
  return nullptr;
}

}  // namespace brook::cli
