// `brook serve` assembled: the model repository (versions), the batcher, the
// TF Serving-compatible REST API on Boost.Beast, brook.v1.Predict on gRPC,
// /metrics on its own port and, with follow_ps, the PS follower that keeps
// the weights fresh. docs/serving.md describes it from a user's side.
//
//   ASSIGN_OR_RETURN(auto server, ModelServer::Start(options));
//   std::cout << "HTTP on " << server->http_port() << "\n";
//   ... ~ModelServer stops it: no new requests, queued ones answered
//   UNAVAILABLE, the rest finish.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "security/bearer_token.h"
#include "security/tls.h"
#include "serving/batcher.h"
#include "serving/model_repository.h"

namespace brook::metrics {
class MetricsExposer;
class RpcMetrics;
}  // namespace brook::metrics
namespace brook::ps {
class PsClient;
}  // namespace brook::ps
namespace grpc {
class Server;
}  // namespace grpc

namespace brook::storage {
class DirLock;
}  // namespace brook::storage

namespace brook::serving {

class HttpServer;
class PredictService;
class PsFollower;
struct ServingMetrics;

struct ModelServerOptions {
  std::string model_path;
  std::string model_name = "brook";
  std::string http_listen = "127.0.0.1:8501";
  std::string grpc_listen = "127.0.0.1:8500";  // "" = no gRPC
  std::string metrics_listen = "127.0.0.1:0";  // "" = no /metrics
  int http_threads = 2;
  uint64_t max_request_bytes = 4 << 20;
  BatcherOptions batching;
  ServableOptions servable;
  absl::Duration poll_interval = absl::Seconds(2);  // for new versions; 0 = never
  // Fresh weights (ps_follower.h): PS addresses of the training cluster and
  // the job whose tables the model came from ("" = the export's own job).
  std::vector<std::string> follow_ps;
  std::string follow_job;
  absl::Duration sync_interval = absl::Seconds(10);
  security::TlsOptions ps_tls;
  security::ClientToken ps_token;
  std::function<void(const std::string& line)> log;
};

class ModelServer {
 public:
  static absl::StatusOr<std::unique_ptr<ModelServer>> Start(ModelServerOptions options);
  // The listen addresses: INVALID_ARGUMENT naming the flag for one that
  // does not parse, does not resolve or is not this machine's; with
  // `bind_ports` (Start does) UNAVAILABLE for a port already taken.
  // `--check-config` checks without binding the ports.
  static absl::Status CheckAddresses(const ModelServerOptions& options, bool bind_ports);
  ~ModelServer();

  int http_port() const;
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const;
  const ModelRepository& repository() const { return *repo_; }

 private:
  ModelServer() = default;
  ModelServerOptions options_;
  std::unique_ptr<metrics::MetricsExposer> exposer_;
  std::unique_ptr<ServingMetrics> metrics_;
  std::unique_ptr<ModelRepository> repo_;
  std::unique_ptr<ps::PsClient> follow_client_;
  std::unique_ptr<PsFollower> follower_;
  std::unique_ptr<Batcher> batcher_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<PredictService> grpc_service_;
  std::unique_ptr<grpc::Server> grpc_;
  int grpc_port_ = 0;
  std::unique_ptr<storage::DirLock> data_dir_lock_;  // with --data-dir
};

}  // namespace brook::serving
