#include "metrics/collector.h"

#include <algorithm>
#include <memory>

namespace brook::metrics {

prometheus::MetricFamily* FamilySet::New(std::string name, std::string help,
                                         prometheus::MetricType type) {
  auto f = std::make_unique<prometheus::MetricFamily>();
  f->name = std::move(name);
  f->help = std::move(help);
  f->type = type;
  families_.push_back(std::move(f));
  return families_.back().get();
}

prometheus::MetricFamily* FamilySet::Counter(std::string name, std::string help) {
  return New(std::move(name), std::move(help), prometheus::MetricType::Counter);
}

prometheus::MetricFamily* FamilySet::Gauge(std::string name, std::string help) {
  return New(std::move(name), std::move(help), prometheus::MetricType::Gauge);
}

void FamilySet::Add(prometheus::MetricFamily* family, const Labels& labels, double value) {
  prometheus::ClientMetric m;
  m.label.reserve(labels.size());
  for (const auto& [name, label_value] : labels) m.label.push_back({name, label_value});
  // Sorted by name, as prometheus-cpp's own families print them.
  std::sort(m.label.begin(), m.label.end());
  if (family->type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  family->metric.push_back(std::move(m));
}

std::vector<prometheus::MetricFamily> FamilySet::Take() {
  std::vector<prometheus::MetricFamily> out;
  out.reserve(families_.size());
  for (auto& f : families_) out.push_back(std::move(*f));
  families_.clear();
  return out;
}

}  // namespace brook::metrics
