// One PS shard as a running server: a ParameterServer, its gRPC service on
// `listen`, its Prometheus endpoint on `metrics_listen` and the periodic TTL
// eviction. `brook ps` is this class plus flags and signals; tests start it
// in process on 127.0.0.1:0.
//
// Thread-safe. Shutdown() may be called from any thread, once or more.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/part_runner.h"
#include "ps/parameter_server.h"
#include "security/tls.h"

namespace boost::asio {
class thread_pool;
}
namespace grpc {
class Channel;
class Server;
}  // namespace grpc
namespace prometheus {
class Collectable;
class Counter;
class Registry;
}  // namespace prometheus
namespace brook::metrics {
class MetricsExposer;
class RpcMetrics;
}  // namespace brook::metrics
namespace brook::rpc {
class NodeService;
}  // namespace brook::rpc

namespace brook::ps::rpc {

class PsService;

struct PsServerOptions {
  // host:port for gRPC; port 0 picks a free one. Loopback unless asked
  // (docs/architecture.md "Security").
  std::string listen = "127.0.0.1:0";
  // host:port for /metrics; empty turns the endpoint off.
  std::string metrics_listen = "127.0.0.1:0";
  // Request handler threads. 0 runs handlers on gRPC's own callback threads
  // (fewest thread hops; the default); N > 0 posts them to a pool of N.
  int threads = 0;
  // Helper threads a large pull's lookup or a large push's optimizer work is
  // split over while no other pull or push is in progress
  // (common/part_runner.h). -1: half the usable cores (common/usable_cpus.h:
  // within a pod's CPU limit) less one, at most 7 (none on 2 cores, where
  // clients and the kernel's TCP share them: BENCHMARKS.md, issue 3); 0:
  // every request runs on one thread.
  int helpers = -1;
  // Largest request and reply, in bytes. 64 MiB: a pull of 64K keys x dim 256
  // (the client splits larger ones) with room to spare, while a runaway or
  // hostile client still cannot make one request cost gigabytes. gRPC's own
  // default receive limit, 4 MiB, is only ~16K keys x dim 64.
  int max_message_bytes = 64 << 20;
  // How often TTL eviction runs (ParameterServer::Evict with the highest push
  // step seen); zero or negative: never.
  absl::Duration evict_interval = absl::Seconds(10);
  // How often free pages inside malloc's heaps go back to the kernel
  // (TrimMalloc, common/malloc_tuning.h); zero or negative: never.
  absl::Duration malloc_trim_interval = absl::Seconds(5);
  // Certificates for the gRPC port; off by default (security/tls.h). The
  // metrics port stays plain HTTP: it carries counts, never keys or values.
  security::TlsOptions tls;
  // When not empty, every call but Health (and brook.v1.Node/Describe) must
  // carry "authorization: Bearer auth_token" (security/bearer_token.h), else
  // UNAUTHENTICATED at once.
  std::string auth_token;
  // Serve a non-loopback `listen` with neither mutual TLS nor auth_token
  // (security/server_auth.h); without it Validate() refuses that.
  bool allow_unauthenticated = false;
  ParameterServerOptions ps;

  absl::Status Validate() const;
};

class PsServer {
 public:
  // Builds the core and binds both ports. UNAVAILABLE when an address cannot
  // be bound, INVALID_ARGUMENT for bad options (an unauthenticated PS open to
  // the network among them).
  static absl::StatusOr<std::unique_ptr<PsServer>> Start(const PsServerOptions& options);
  // Shuts down with no drain time if Shutdown() was not called.
  ~PsServer();
  PsServer(const PsServer&) = delete;
  PsServer& operator=(const PsServer&) = delete;

  int port() const { return port_; }
  // The listen host with the bound port, e.g. "127.0.0.1:40123".
  std::string address() const;
  // 0 when metrics are off.
  int metrics_port() const;
  std::string metrics_address() const;

  ParameterServer* parameter_server() { return ps_.get(); }
  // Threads a large pull or push is split over (PsServerOptions::helpers resolved).
  int helpers() const { return helpers_ ? helpers_->helpers() : 0; }
  PsService* service() { return service_.get(); }
  // A channel to this server that bypasses TCP (tests, co-located clients).
  std::shared_ptr<grpc::Channel> InProcessChannel();

  // Drains: marks the service not serving (new requests UNAVAILABLE), stops
  // accepting, waits up to `drain` for in-flight requests, cancels the rest,
  // stops eviction and the handler threads. Blocks until done. Idempotent.
  void Shutdown(absl::Duration drain);

 private:
  explicit PsServer(const PsServerOptions& options);
  // Runs fn every `interval` until Shutdown (the eviction and trim threads).
  void Every(absl::Duration interval, absl::FunctionRef<void()> fn);

  // Constant after Start(). Declaration order is destruction order reversed:
  // everything that borrows ps_ is destroyed before it.
  const PsServerOptions options_;
  std::unique_ptr<ParameterServer> ps_;
  std::unique_ptr<PartRunner> helpers_;  // handlers and the stats collector borrow it
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<metrics::RpcMetrics> rpc_metrics_;
  std::shared_ptr<prometheus::Collectable> stats_collector_;
  std::unique_ptr<metrics::MetricsExposer> exposer_;
  std::unique_ptr<boost::asio::thread_pool> pool_;
  std::unique_ptr<PsService> service_;
  std::unique_ptr<::brook::rpc::NodeService> node_service_;  // brook.v1.Node: "a PS, shard i of n"
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::thread evict_thread_;
  std::thread trim_thread_;
  prometheus::Counter* trims_ = nullptr;  // owned by registry_
  prometheus::Counter* trim_seconds_ = nullptr;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace brook::ps::rpc
