#include "common/usable_cpus.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

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

std::string_view Trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\n");
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(" \t\n") + 1 - begin);
}

// The whole of `text` as a decimal integer.
bool ParseInt(std::string_view text, int64_t* value) {
  if (text.empty()) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && end == text.data() + text.size();
}

std::optional<double> Ratio(int64_t quota, int64_t period) {
  if (quota <= 0 || period <= 0) return std::nullopt;
  return static_cast<double>(quota) / static_cast<double>(period);
}

}  // namespace

std::optional<double> CpuLimitFromCgroupV2(std::string_view cpu_max) {
  const std::string_view rest = Trim(cpu_max);
  const size_t space = rest.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view quota_text = rest.substr(0, space);
  if (quota_text == "max") return std::nullopt;
  int64_t quota = 0, period = 0;
  if (!ParseInt(quota_text, &quota) || !ParseInt(Trim(rest.substr(space)), &period)) {
    return std::nullopt;
  }
  return Ratio(quota, period);
}

std::optional<double> CpuLimitFromCgroupV1(std::string_view quota_us, std::string_view period_us) {
  int64_t quota = 0, period = 0;
  if (!ParseInt(Trim(quota_us), &quota) || !ParseInt(Trim(period_us), &period)) {
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
