// Metrics computed at scrape time from a node's own stats structs (leveldb
// GetProperty style): core libraries keep plain counters, and a collector
// turns a snapshot of them into Prometheus families when /metrics is read,
// so nothing is updated per key on the hot path.
//
//   auto c = std::make_shared<metrics::FunctionCollector>([ps] {
//     metrics::FamilySet set;
//     auto* rows = set.Gauge("brook_ps_table_rows", "Rows held");
//     for (const auto& t : ps->Stats().tables) set.Add(rows, {{"table", t.name}}, t.rows);
//     return set.Take();
//   });
//   exposer->RegisterCollectable(c);
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace brook::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Builds the families of one scrape. Thread-compatible.
class FamilySet {
 public:
  // The returned pointer stays valid until Take().
  prometheus::MetricFamily* Counter(std::string name, std::string help);
  prometheus::MetricFamily* Gauge(std::string name, std::string help);
  // Adds one sample to a counter or gauge family.
  void Add(prometheus::MetricFamily* family, const Labels& labels, double value);
  std::vector<prometheus::MetricFamily> Take();

 private:
  prometheus::MetricFamily* New(std::string name, std::string help, prometheus::MetricType type);
  // Stable addresses while families are being filled.
  std::vector<std::unique_ptr<prometheus::MetricFamily>> families_;
};

// A Collectable whose Collect() calls a function. The function runs on the
// exposer's scrape thread and must be thread-safe with respect to the
// objects it reads.
class FunctionCollector : public prometheus::Collectable {
 public:
  explicit FunctionCollector(std::function<std::vector<prometheus::MetricFamily>()> fn)
      : fn_(std::move(fn)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return fn_(); }

 private:
  std::function<std::vector<prometheus::MetricFamily>()> fn_;
};

}  // namespace brook::metrics
