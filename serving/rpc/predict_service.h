// brook.v1.Predict over the same repository and batcher as the REST API: a
// thin adapter (the error mapping is common/rpc/status_mapping.h's).
//
// Thread-safe: each call blocks its gRPC thread until its batch is scored.
#pragma once

#include <atomic>
#include <string>

#include "absl/time/time.h"
#include "brook/v1/serving.grpc.pb.h"
#include "metrics/rpc_metrics.h"
#include "serving/batcher.h"
#include "serving/model_repository.h"

namespace brook::serving {

class PredictService final : public v1::Predict::Service {
 public:
  // `metrics` may be null; otherwise method 0 is Predict.
  PredictService(std::string model_name, const ModelRepository* repo, Batcher* batcher,
                 metrics::RpcMetrics* metrics)
      : model_name_(std::move(model_name)), repo_(repo), batcher_(batcher), metrics_(metrics) {}

  grpc::Status Predict(grpc::ServerContext* context, const v1::PredictRequest* request,
                       v1::PredictResponse* response) override;

  // The drain: calls from now on are refused UNAVAILABLE; WaitIdle waits
  // for the ones in progress (false if some still are after `timeout`).
  void StopAccepting() { stopping_.store(true); }
  bool WaitIdle(absl::Duration timeout) const;

 private:
  absl::Status DoPredict(const v1::PredictRequest& request, v1::PredictResponse* response);

  const std::string model_name_;
  const ModelRepository* const repo_;
  Batcher* const batcher_;
  metrics::RpcMetrics* const metrics_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> in_flight_{0};
};

}  // namespace brook::serving
