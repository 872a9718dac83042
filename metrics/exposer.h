// The Prometheus endpoint of one Brook node (PS, trainer, chief): a registry
// plus an HTTP exposer serving it at /metrics on its own port. Every node
// exports brook_build_info{version,commit} = 1, process_start_time_seconds
// and the process_* families (CPU seconds, resident/virtual memory, open/max
// fds) from here, so dashboards can join on them.
//
// Thread-safe: registry() and RegisterCollectable() may be used from any
// thread; scrapes run on the exposer's own (civetweb) threads.
//
//   ASSIGN_OR_RETURN(auto exposer, metrics::MetricsExposer::Start("127.0.0.1:0"));
//   metrics::RpcMetrics rpc(exposer->registry(), "brook_ps", {"Pull", "Push"});
//   std::cout << "metrics on port " << exposer->port() << "\n";
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace prometheus {
class Collectable;
class Exposer;
class Registry;
}  // namespace prometheus

namespace brook::metrics {

// The HTTP server's worker threads (civetweb: one connection per thread) and
// how long a connection may take to send its request (and to take the reply)
// before it is dropped. Together they bound what slow or idle connections
// can do to scrapes: held connections beyond the workers wait at most
// about (held / kExposerThreads) x kExposerRequestTimeoutMs. See Start().
inline constexpr int kExposerThreads = 32;
inline constexpr int kExposerRequestTimeoutMs = 2000;

class MetricsExposer {
 public:
  // Binds `bind_address` ("host:port"; port 0 picks a free one) and starts
  // serving. UNAVAILABLE if the address cannot be bound, INVALID_ARGUMENT if
  // it has no port.
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(const std::string& bind_address);
  // Start's INVALID_ARGUMENT for an address it could never bind, without
  // binding: not host:port, IPv6, or an IPv4 address not in full a.b.c.d.
  static absl::Status CheckAddress(const std::string& bind_address);
  // A registry with the build-info and start-time metrics but no HTTP
  // endpoint: for nodes run with metrics off and for tests.
  static std::shared_ptr<prometheus::Registry> NewRegistry();

  ~MetricsExposer();
  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;

  // The registry scraped at /metrics. Owned by this object (shared so that
  // metric handles can outlive a scrape in flight).
  prometheus::Registry& registry() { return *registry_; }
  const std::shared_ptr<prometheus::Registry>& shared_registry() const { return registry_; }
  // Adds another source of metrics (e.g. a collector reading core stats) to
  // /metrics. The exposer holds it weakly: the caller keeps it alive and it
  // disappears from scrapes once destroyed.
  void RegisterCollectable(const std::weak_ptr<prometheus::Collectable>& collectable);
  // The bound TCP port.
  int port() const { return port_; }
  // "host:port" as bound, e.g. "127.0.0.1:39217".
  std::string address() const;

 private:
  MetricsExposer() = default;

  std::string host_;
  int port_ = 0;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> process_collector_;  // process_* at scrape time
  std::unique_ptr<prometheus::Exposer> exposer_;
};

// Registers brook_build_info{version,commit} (=1, common/version.h) and
// process_start_time_seconds (unix seconds) in `registry`. NewRegistry() and
// Start() already do this; exposed for a node that brings its own registry.
void RegisterProcessMetrics(prometheus::Registry& registry);

// Unix time, in seconds, at which this process started (from /proc; falls back
// to the first call's time where /proc is unavailable).
double ProcessStartTimeSeconds();

}  // namespace brook::metrics
