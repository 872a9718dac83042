// `brook bench soak`: the verdict on a soak run, separate from the run (which
// lives in the CLI: it starts processes) so it is unit-tested on its own.
//
// A run is a series of samples taken every few seconds while a local cluster
// serves a push/pull load and trains a job at once. After a warm-up, the
// samples are split into an early and a late half. The run passes when
//   - throughput holds: the late half's mean is at least min_throughput_ratio
//     of the early half's, for the load and for training;
//   - memory is flat: no process's RSS in the late half exceeds its RSS at
//     the end of the warm-up by more than max_rss_growth (relative) plus
//     rss_slack_bytes (allocator and page-cache noise);
//   - nothing failed: zero errors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace brook::bench {

struct SoakSample {
  double seconds = 0;                       // since the load started
  double load_rows_per_second = 0;          // rows pulled + pushed by the load, this interval
  double train_examples_per_second = 0;     // examples the job committed, this interval
  std::map<std::string, double> rss_bytes;  // per process ("ps-0", "chief", ...)
  uint64_t errors = 0;  // failed load calls, dead processes, a failed job: cumulative
};

struct SoakCriteria {
  double warmup_fraction = 0.25;
  double min_throughput_ratio = 0.7;
  double max_rss_growth = 0.15;
  double rss_slack_bytes = 64.0 * (1 << 20);
};

struct SoakVerdict {
  bool pass = false;
  std::vector<std::string> failures;       // one line per broken criterion, empty when pass
  double load_early = 0, load_late = 0;    // mean rows/s
  double train_early = 0, train_late = 0;  // mean examples/s
  // Per process: RSS at the end of the warm-up and the late half's maximum.
  std::map<std::string, std::pair<double, double>> rss;
  uint64_t errors = 0;
};

SoakVerdict JudgeSoak(const std::vector<SoakSample>& samples, const SoakCriteria& criteria);

}  // namespace brook::bench
