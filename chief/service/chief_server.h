// The chief as a running server: a Chief (chief.h), its gRPC service on
// `listen`, a client to the PS nodes it checkpoints and exports, and its
// Prometheus endpoint. `brook chief` is this class plus flags and signals;
// tests start it in process on 127.0.0.1:0.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/service/chief.h"
#include "security/bearer_token.h"
#include "security/tls.h"

namespace grpc {
class Server;
}  // namespace grpc
namespace prometheus {
class Collectable;
class Registry;
}  // namespace prometheus
namespace brook::metrics {
class MetricsExposer;
class RpcMetrics;
}  // namespace brook::metrics
namespace brook::ps {
class GrpcPsClient;
}  // namespace brook::ps
namespace brook::rpc {
class NodeService;
}  // namespace brook::rpc

namespace brook::chief {

class ChiefService;

struct ChiefServerOptions {
  std::string listen = "127.0.0.1:0";          // port 0 picks a free one
  std::string metrics_listen = "127.0.0.1:0";  // empty turns /metrics off
  ChiefOptions chief;                          // chief.ps_addresses: the PS nodes, shard order
  // Certificates for the gRPC port and for the chief's own calls to the PS
  // nodes; off by default (security/tls.h).
  security::TlsOptions tls;
  // When not empty, every call but Health must carry "authorization: Bearer
  // auth_token" (security/bearer_token.h), else UNAUTHENTICATED.
  std::string auth_token;
  // The token the chief sends to the PS nodes (ps::GrpcPsClientOptions::token).
  security::ClientToken ps_token;
};

class ChiefServer {
 public:
  // Connects to the PS nodes (if any; it does not wait for them), opens the
  // state and binds both ports. UNAVAILABLE when an address cannot be bound.
  static absl::StatusOr<std::unique_ptr<ChiefServer>> Start(const ChiefServerOptions& options);
  ~ChiefServer();
  ChiefServer(const ChiefServer&) = delete;
  ChiefServer& operator=(const ChiefServer&) = delete;

  std::string address() const;          // "127.0.0.1:PORT"
  std::string metrics_address() const;  // "" when off
  Chief* chief() { return chief_.get(); }

  // Stops accepting, lets in-flight calls finish for up to `drain`. Idempotent.
  void Shutdown(absl::Duration drain);

 private:
  ChiefServer() = default;

  ChiefServerOptions options_;
  int port_ = 0;
  std::unique_ptr<ps::GrpcPsClient> ps_;
  std::unique_ptr<Chief> chief_;
  std::unique_ptr<metrics::MetricsExposer> exposer_;
  std::shared_ptr<prometheus::Registry> registry_;  // outlives rpc_metrics_
  std::unique_ptr<metrics::RpcMetrics> rpc_metrics_;
  std::shared_ptr<prometheus::Collectable> collector_;
  std::unique_ptr<ChiefService> service_;
  std::unique_ptr<rpc::NodeService> node_service_;  // brook.v1.Node: "a chief"
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace brook::chief
