#include "bench/paired_rate.h"

#include <algorithm>
#include <vector>

namespace brook::bench {

RatioSpread SliceRatios(absl::Span<const double> a, absl::Span<const double> b) {
  std::vector<double> ratios;
  ratios.reserve(a.size());
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (b[i] > 0) ratios.push_back(a[i] / b[i]);
  }
  if (ratios.empty()) return {};
  std::sort(ratios.begin(), ratios.end());
  const size_t n = ratios.size();
  const double median = n % 2 == 1 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
  return {median, ratios.front(), ratios.back()};
}

}  // namespace brook::bench
