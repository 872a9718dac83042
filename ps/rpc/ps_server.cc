#include "ps/rpc/ps_server.h"

#include <grpcpp/grpcpp.h>

#include <boost/asio/thread_pool.hpp>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/malloc_tuning.h"
#include "common/rpc/node_service.h"
#include "common/status_macros.h"
#include "common/usable_cpus.h"
#include "metrics/exposer.h"
#include "metrics/rpc_metrics.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "ps/rpc/ps_metrics.h"
#include "ps/rpc/ps_service.h"
#include "security/bearer_token.h"
#include "security/server_auth.h"

namespace brook::ps::rpc {
namespace {

std::string HostOf(const std::string& address) {
  size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

}  // namespace

absl::Status PsServerOptions::Validate() const {
  if (listen.empty() || listen.rfind(':') == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", listen, "' is not host:port"));
  }
  if (threads < 0 || threads > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be in [0, 1024], got ", threads));
  }
  if (helpers < -1 || helpers > 64) {
    return absl::InvalidArgumentError(absl::StrCat("helpers must be in [-1, 64], got ", helpers));
  }
  if (max_message_bytes < (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_message_bytes must be at least 1 MiB, got ", max_message_bytes));
  }
  if (absl::Status s = tls.ValidateForServer(); !s.ok()) return s;
  if (!auth_token.empty()) {
    if (absl::Status s = security::ValidateToken(auth_token, "the PS token"); !s.ok()) return s;
  }
  if (!allow_unauthenticated && security::OpenToNetwork(listen, tls, !auth_token.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to serve ", listen,
        " without authentication: anyone who can reach it could create, overwrite, restore "
        "and drop tables. Require a token (--auth-token-file FILE or $BROOK_PS_TOKEN), turn on "
        "mutual TLS (--tls-cert, --tls-key, --tls-ca, --tls-mutual), listen on a loopback "
        "address, or pass --allow-unauthenticated to accept the risk"));
  }
  if (ps.num_shards <= 0 || ps.shard_index < 0 || ps.shard_index >= ps.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard index ", ps.shard_index, " is not in [0, num_shards=", ps.num_shards, ")"));
  }
  return absl::OkStatus();
}

PsServer::PsServer(const PsServerOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Start(const PsServerOptions& options) {
  if (absl::Status st = options.Validate(); !st.ok()) return st;
  // Certificates are read before anything is opened: a bad file changes nothing.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      security::ServerCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<PsServer> s(new PsServer(options));
  ASSIGN_OR_RETURN(s->ps_, ParameterServer::Open(options.ps));

  // Metrics first, so a bad metrics address fails before the PS port is taken.
  if (!options.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsExposer>> exposer =
        metrics::MetricsExposer::Start(options.metrics_listen);
    if (!exposer.ok()) return exposer.status();
    s->exposer_ = std::move(*exposer);
    s->registry_ = s->exposer_->shared_registry();
  } else {
    s->registry_ = metrics::MetricsExposer::NewRegistry();
  }
  s->rpc_metrics_ =
      std::make_unique<metrics::RpcMetrics>(*s->registry_, "brook_ps", PsMethodNames());
  const int helpers =
      options.helpers >= 0 ? options.helpers : std::clamp(UsableCpus() / 2 - 1, 0, 7);
  if (helpers > 0) s->helpers_ = std::make_unique<PartRunner>(helpers);
  s->stats_collector_ = NewPsStatsCollector(s->ps_.get(), s->helpers_.get());
  if (s->exposer_) s->exposer_->RegisterCollectable(s->stats_collector_);

  if (options.threads > 0) {
    s->pool_ = std::make_unique<boost::asio::thread_pool>(options.threads);
  }
  PsServiceOptions service_options;
  service_options.executor = s->pool_.get();
  service_options.metrics = s->rpc_metrics_.get();
  service_options.max_reply_bytes = static_cast<uint64_t>(options.max_message_bytes);
  service_options.helpers = s->helpers_.get();
  service_options.auth_token = options.auth_token;
  service_options.on_unauthenticated =
      [counters = NewUnauthenticatedCounters(*s->registry_, PsMethodNames())](PsMethod m) {
        counters[static_cast<size_t>(m)]->Increment();
      };
  s->service_ = std::make_unique<PsService>(s->ps_.get(), service_options);

  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *credentials, &s->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // Without this gRPC sets SO_REUSEPORT, and a second PS on a taken port
  // would "bind" and silently share the first one's traffic.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(s->service_.get());
  s->node_service_ = std::make_unique<::brook::rpc::NodeService>(
      v1::NODE_KIND_PS, options.ps.shard_index, options.ps.num_shards);
  builder.RegisterService(s->node_service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    s->server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen));
  }
  if (options.evict_interval > absl::ZeroDuration()) {
    s->evict_thread_ = std::thread([p = s.get()] {
      p->Every(p->options_.evict_interval,
               [p] { p->ps_->Evict(p->service_->handlers().max_step()); });
    });
  }
  if (options.malloc_trim_interval > absl::ZeroDuration()) {
    s->trims_ = &prometheus::BuildCounter()
                     .Name("brook_ps_malloc_trims_total")
                     .Help("Times free pages inside malloc's heaps were handed back to the kernel")
                     .Register(*s->registry_)
                     .Add({});
    s->trim_seconds_ = &prometheus::BuildCounter()
                            .Name("brook_ps_malloc_trim_seconds_total")
                            .Help("Time spent handing free malloc pages back to the kernel")
                            .Register(*s->registry_)
                            .Add({});
    s->trim_thread_ = std::thread([p = s.get()] {
      p->Every(p->options_.malloc_trim_interval, [p] {
        const absl::Time start = absl::Now();
        if (TrimMalloc()) {
          p->trims_->Increment();
          p->trim_seconds_->Increment(absl::ToDoubleSeconds(absl::Now() - start));
        }
      });
    });
  }
  return s;
}

PsServer::~PsServer() { Shutdown(absl::ZeroDuration()); }

std::string PsServer::address() const { return absl::StrCat(HostOf(options_.listen), ":", port_); }

int PsServer::metrics_port() const { return exposer_ ? exposer_->port() : 0; }

std::string PsServer::metrics_address() const { return exposer_ ? exposer_->address() : ""; }

std::shared_ptr<grpc::Channel> PsServer::InProcessChannel() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options_.max_message_bytes);
  args.SetMaxSendMessageSize(options_.max_message_bytes);
  return server_->InProcessChannel(args);
}

void PsServer::Every(absl::Duration interval, absl::FunctionRef<void()> fn) {
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval)) {
    mu_.Unlock();
    fn();
    mu_.Lock();
  }
}

void PsServer::Shutdown(absl::Duration drain) {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stopping_ = true;
  }
  if (evict_thread_.joinable()) evict_thread_.join();
  if (trim_thread_.joinable()) trim_thread_.join();
  if (server_ == nullptr) return;  // Start() failed half way
  service_->SetServing(false);
  // In-flight requests get `drain` to finish; after that gRPC cancels them
  // and Shutdown returns once every handler has finished.
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(drain));
  if (pool_) pool_->join();
}

}  // namespace brook::ps::rpc
