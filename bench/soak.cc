#include "bench/soak.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace brook::bench {
namespace {

double Mean(const std::vector<SoakSample>& s, size_t begin, size_t end, double SoakSample::*field) {
  if (end <= begin) return 0;
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += s[i].*field;
  return sum / static_cast<double>(end - begin);
}

}  // namespace

SoakVerdict JudgeSoak(const std::vector<SoakSample>& samples, const SoakCriteria& c) {
  SoakVerdict v;
  if (samples.size() < 4) {
    v.failures.push_back(absl::StrFormat(
        "only %d samples: too few to judge (run longer or sample more often)", samples.size()));
    return v;
  }
  const double total = samples.back().seconds;
  size_t warm = 0;
  while (warm < samples.size() && samples[warm].seconds < c.warmup_fraction * total) ++warm;
  warm = std::min(warm, samples.size() - 2);  // at least two samples to judge
  const size_t mid = warm + (samples.size() - warm) / 2;

  v.load_early = Mean(samples, warm, mid, &SoakSample::load_rows_per_second);
  v.load_late = Mean(samples, mid, samples.size(), &SoakSample::load_rows_per_second);
  v.train_early = Mean(samples, warm, mid, &SoakSample::train_examples_per_second);
  v.train_late = Mean(samples, mid, samples.size(), &SoakSample::train_examples_per_second);
  auto holds = [&](const char* what, double early, double late) {
    if (early <= 0) {
      v.failures.push_back(absl::StrFormat("%s: no throughput after the warm-up", what));
    } else if (late < c.min_throughput_ratio * early) {
      v.failures.push_back(
          absl::StrFormat("%s throughput fell: late %.0f/s is %.2f of early %.0f/s (bar %.2f)",
                          what, late, late / early, early, c.min_throughput_ratio));
    }
  };
  holds("load", v.load_early, v.load_late);
  holds("training", v.train_early, v.train_late);

  // The first sample after the warm-up is every process's baseline.
  const SoakSample& base = samples[warm];
  for (const auto& [name, start] : base.rss_bytes) {
    double late_max = 0;
    for (size_t i = mid; i < samples.size(); ++i) {
      auto it = samples[i].rss_bytes.find(name);
      if (it != samples[i].rss_bytes.end()) late_max = std::max(late_max, it->second);
    }
    v.rss[name] = {start, late_max};
    const double limit = start * (1 + c.max_rss_growth) + c.rss_slack_bytes;
    if (late_max > limit) {
      v.failures.push_back(absl::StrFormat(
          "%s RSS grew from %.0f MiB to %.0f MiB after the warm-up (limit %.0f MiB)", name,
          start / (1 << 20), late_max / (1 << 20), limit / (1 << 20)));
    }
  }
  v.errors = samples.back().errors;
  if (v.errors > 0) v.failures.push_back(absl::StrFormat("%d errors", v.errors));
  v.pass = v.failures.empty();
  return v;
}

}  // namespace brook::bench
