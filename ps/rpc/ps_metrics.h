// The PS's per-table metrics, read from ParameterServer::Stats() when
// /metrics is scraped (the core keeps plain counters; nothing is updated per
// key). Families, all labelled {table} unless noted:
//   brook_ps_rows_pulled_total, brook_ps_rows_pushed_total,
//   brook_ps_admissions_total, brook_ps_evictions_total,
//   brook_ps_rejected_gradients_total, brook_ps_duplicate_pushes_total (counters)
//   brook_ps_pending_forgotten_total, brook_ps_budget_rejections_total,
//   brook_ps_budget_deferred_total (counters)
//   brook_ps_table_rows, brook_ps_table_pending_keys,
//   brook_ps_table_memory_bytes, brook_ps_table_memory_budget_bytes (gauges)
//   brook_ps_dense_pushes_total{variable}, brook_ps_dense_rejected_gradients_total{variable},
//   brook_ps_dense_floats{variable}
//   brook_ps_shard_info{num_shards,shard_index} = 1
//   brook_ps_memory_limit_bytes, brook_ps_memory_used_bytes (gauges, no labels),
//   brook_ps_memory_limit_rejections_total (counter, no labels)
// Request counts and latencies come from metrics::RpcMetrics ("brook_ps").
// brook_ps_unauthenticated_requests_total{method} (counter): calls refused
// for a missing or wrong bearer token (NewUnauthenticatedCounters).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace prometheus {
class Collectable;
class Counter;
class Registry;
}  // namespace prometheus

namespace brook {
class PartRunner;
}
namespace brook::ps {
class ParameterServer;
}

namespace brook::ps::rpc {

// `ps` and `helpers` (may be null: the PS splits no requests) must outlive
// the collector (unregister it, or destroy it, first).
std::shared_ptr<prometheus::Collectable> NewPsStatsCollector(const ParameterServer* ps,
                                                             const PartRunner* helpers);

// brook_ps_unauthenticated_requests_total, one series per method (index as
// in `methods`), all created at 0. The counters live as long as `registry`.
std::vector<prometheus::Counter*> NewUnauthenticatedCounters(
    prometheus::Registry& registry, const std::vector<std::string>& methods);

}  // namespace brook::ps::rpc
