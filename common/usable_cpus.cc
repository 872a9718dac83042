#include "common/usable_cpus.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/absl_compat.h"

namespace brook {
namespace {

// The whole file, or "" when it cannot be read (no such cgroup controller).
std::string ReadSmallFile(const char* path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::optional<double> Ratio(int64_t quota, int64_t period) {
  if (quota <= 0 || period <= 0) return std::nullopt;
  return static_cast<double>(quota) / static_cast<double>(period);
}

}  // namespace

std::optional<double> CpuLimitFromCgroupV2(std::string_view cpu_max) {
  const std::vector<absl::string_view> fields =
      absl::StrSplit(AbslView(cpu_max), absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
  int64_t quota = 0, period = 0;
  // "max <period>": no limit; the quota then fails to parse.
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &quota) ||
      !absl::SimpleAtoi(fields[1], &period)) {
    return std::nullopt;
  }
  return Ratio(quota, period);
}

std::optional<double> CpuLimitFromCgroupV1(std::string_view quota_us, std::string_view period_us) {
  int64_t quota = 0, period = 0;  // SimpleAtoi allows the files' trailing newline
  if (!absl::SimpleAtoi(AbslView(quota_us), &quota) ||
      !absl::SimpleAtoi(AbslView(period_us), &period)) {
    return std::nullopt;
  }
  return Ratio(quota, period);  // quota -1: no limit
}

int UsableCpusFrom(int affinity_cpus, std::optional<double> limit) {
  int cpus = std::max(1, affinity_cpus);
  // Rounded up: a 2.5-CPU pod keeps 3 threads busy part of the time, which
  // beats leaving half a CPU of its quota unused.
  if (limit.has_value()) cpus = std::min(cpus, static_cast<int>(std::ceil(*limit - 1e-9)));
  return std::max(1, cpus);
}

int ReadUsableCpus() {
  // In a container /sys/fs/cgroup is the container's own cgroup (cgroup
  // namespaces); v2 first, then v1's cpu controller.
  std::optional<double> limit = CpuLimitFromCgroupV2(ReadSmallFile("/sys/fs/cgroup/cpu.max"));
  if (!limit.has_value()) {
    limit = CpuLimitFromCgroupV1(ReadSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
                                 ReadSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us"));
  }
  return UsableCpusFrom(AffinityCpus(), limit);
}

int UsableCpus() {
  static const int cpus = ReadUsableCpus();
  return cpus;
}

}  // namespace brook
