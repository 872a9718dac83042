// UsableCpus: how many CPUs this process can keep busy. The CPUs its
// affinity mask allows, capped by its cgroup's CPU quota (a Kubernetes
// pod's CPU limit), rounded up.
//
// Why not std::thread::hardware_concurrency(): it counts the node's CPUs. A
// pod limited to 4 CPUs on a 64-core node would start 64 compute threads,
// spend its quota in the first few milliseconds of each period and sit
// throttled for the rest. Every "0 / -1 = one per core" default in Brook
// (trainer compute threads, parse threads, PS helpers) sizes itself with
// this instead.
#pragma once

#include <optional>
#include <string_view>

namespace brook {

// Computed once per process (the first call reads /proc and /sys); >= 1.
int UsableCpus();

// The same, read afresh, for the calling thread's affinity mask.
int ReadUsableCpus();

// The parts, for tests. A CPU limit in CPUs (quota / period), or nullopt
// when there is none or the text does not parse:
//   cgroup v2 `cpu.max`: "max 100000" (no limit) or "250000 100000" (2.5);
//   cgroup v1 `cpu.cfs_quota_us` ("-1": no limit) and `cpu.cfs_period_us`.
std::optional<double> CpuLimitFromCgroupV2(std::string_view cpu_max);
std::optional<double> CpuLimitFromCgroupV1(std::string_view quota_us, std::string_view period_us);
// min(affinity_cpus, ceil(limit)), at least 1.
int UsableCpusFrom(int affinity_cpus, std::optional<double> limit);

}  // namespace brook
