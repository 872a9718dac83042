// The chief's brook_chief_* families for /metrics, from a Chief::Stats
// snapshot: the Prometheus side of the chief, beside its gRPC server, as
// ps/rpc/ps_metrics.h is the PS's (chief.h knows no Prometheus).
#pragma once

#include <vector>

#include "absl/time/time.h"
#include "chief/service/chief.h"
#include "prometheus/metric_family.h"

namespace brook::chief {

// `now` ages the checkpoints (brook_chief_job_checkpoint_age_seconds).
std::vector<prometheus::MetricFamily> CollectChiefMetrics(const ChiefStats& stats, absl::Time now);

}  // namespace brook::chief
