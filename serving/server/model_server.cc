#include "serving/server/model_server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <mutex>
#include <utility>

#include <grpcpp/grpcpp.h>
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/node_service.h"
#include "common/status_macros.h"
#include "metrics/collector.h"
#include "metrics/exposer.h"
#include "metrics/rpc_metrics.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "ps/client/grpc_ps_client.h"
#include "serving/http/http_server.h"
#include "serving/ps_follower.h"
#include "serving/rest_api.h"
#include "serving/rpc/predict_service.h"
#include "storage/dir_lock.h"

namespace brook::serving {

// The Prometheus side of serving (docs/metrics.md, "brook serve").
struct ServingMetrics {
  std::shared_ptr<prometheus::Registry> registry;
  std::unique_ptr<metrics::RpcMetrics> grpc;
  prometheus::Family<prometheus::Counter>* http_requests = nullptr;
  prometheus::Histogram* http_duration = nullptr;
  prometheus::Histogram* batch_size = nullptr;
  prometheus::Histogram* batch_duration = nullptr;
  std::mutex mu;  // http_by_code
  std::map<int, prometheus::Counter*> http_by_code;
  std::shared_ptr<metrics::FunctionCollector> collector;
  std::unique_ptr<rpc::NodeService> node_service;

  void HttpReply(int status, double seconds) {
    prometheus::Counter* c;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto [it, fresh] = http_by_code.try_emplace(status, nullptr);
      if (fresh) it->second = &http_requests->Add({{"code", std::to_string(status)}});
      c = it->second;
    }
    c->Increment();
    http_duration->Observe(seconds);
  }
};

namespace {

std::vector<double> BatchSizeBuckets() { return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}; }

std::unique_ptr<ServingMetrics> NewMetrics(std::shared_ptr<prometheus::Registry> registry) {
  auto m = std::make_unique<ServingMetrics>();
  m->registry = std::move(registry);
  prometheus::Registry& r = *m->registry;
  m->grpc = std::make_unique<metrics::RpcMetrics>(r, "brook_serve_grpc",
                                                  std::vector<std::string>{"Predict"});
  m->http_requests = &prometheus::BuildCounter()
                          .Name("brook_serve_http_requests_total")
                          .Help("HTTP requests answered, by status code")
                          .Register(r);
  m->http_by_code[200] = &m->http_requests->Add({{"code", "200"}});
  m->http_duration = &prometheus::BuildHistogram()
                          .Name("brook_serve_http_request_duration_seconds")
                          .Help("From a request's last byte read to its reply's last byte written")
                          .Register(r)
                          .Add({}, metrics::RpcMetrics::DurationBuckets());
  m->batch_size = &prometheus::BuildHistogram()
                       .Name("brook_serve_batch_size")
                       .Help("Examples per model step (server-side batching)")
                       .Register(r)
                       .Add({}, BatchSizeBuckets());
  m->batch_duration = &prometheus::BuildHistogram()
                           .Name("brook_serve_batch_duration_seconds")
                           .Help("Time to score one batch: parse, row lookups, forward pass")
                           .Register(r)
                           .Add({}, metrics::RpcMetrics::DurationBuckets());
  return m;
}

std::vector<prometheus::MetricFamily> Collect(const ModelRepository* repo, const Batcher* batcher,
                                              const PsFollower* follower) {
  metrics::FamilySet set;
  const RepositoryStats rs = repo->Stats();
  set.Add(set.Gauge("brook_serve_model_version", "The model version serving now"), {},
          static_cast<double>(rs.version));
  set.Add(set.Counter("brook_serve_model_loads_total", "Versions loaded and swapped in"), {},
          static_cast<double>(rs.loads));
  set.Add(set.Counter("brook_serve_model_load_failures_total",
                      "Versions that failed to load (the previous one kept serving)"),
          {}, static_cast<double>(rs.load_failures));
  set.Add(set.Gauge("brook_serve_model_loaded_timestamp_seconds",
                    "Unix time the serving version was swapped in"),
          {}, rs.loaded_unix_seconds);
  set.Add(set.Gauge("brook_serve_model_export_timestamp_seconds",
                    "Unix time the serving version's export was written"),
          {}, static_cast<double>(rs.export_created_unix_micros) / 1e6);
  // Staleness: how old the served weights are. With a follower, since the
  // last sync that completed; without, since the export was written.
  const double now = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  double fresh_at = static_cast<double>(rs.export_created_unix_micros) / 1e6;
  if (follower != nullptr) {
    const FollowerStats fs = follower->Stats();
    if (fs.synced_unix_seconds > fresh_at) fresh_at = fs.synced_unix_seconds;
    auto* syncs =
        set.Counter("brook_serve_ps_syncs_total", "Syncs from the PS, by kind and result");
    set.Add(syncs, {{"kind", "delta"}, {"result", "ok"}}, static_cast<double>(fs.delta_syncs));
    set.Add(syncs, {{"kind", "full"}, {"result", "ok"}}, static_cast<double>(fs.full_syncs));
    set.Add(syncs, {{"kind", "any"}, {"result", "error"}}, static_cast<double>(fs.failures));
    set.Add(set.Counter("brook_serve_ps_synced_rows_total", "Rows copied from the PS"), {},
            static_cast<double>(fs.rows));
    set.Add(set.Counter("brook_serve_ps_dropped_rows_total",
                        "Rows a full sync removed because the PS no longer holds them"),
            {}, static_cast<double>(fs.rows_dropped));
    set.Add(set.Gauge("brook_serve_ps_sync_duration_seconds", "How long the last sync took"), {},
            fs.last_sync_seconds);
  }
  set.Add(set.Gauge("brook_serve_staleness_seconds",
                    "Age of the served weights: seconds since the last PS sync completed "
                    "(--follow-ps), else since the export was written"),
          {}, now - fresh_at);
  std::shared_ptr<const Servable> s = repo->Current();
  const ServableStats ss = s->Stats();
  auto* rows = set.Gauge("brook_serve_rows",
                         "Embedding rows of the serving version, by tier (rocksdb: RocksDB's "
                         "estimate, which counts a row spilled again twice until compaction)");
  set.Add(rows, {{"tier", "memory"}}, static_cast<double>(ss.rows_in_memory));
  set.Add(rows, {{"tier", "rocksdb"}}, static_cast<double>(ss.rows_in_rocksdb));
  set.Add(set.Gauge("brook_serve_rows_memory_bytes",
                    "Bytes the serving version's tables take in memory: rows, index and each "
                    "table's arena (a fixed overhead)"),
          {}, static_cast<double>(ss.bytes_in_memory));
  set.Add(set.Gauge("brook_serve_memory_used_bytes",
                    "Bytes of the in-memory rows as --memory-limit counts them (header, weights, "
                    "index entry)"),
          {}, static_cast<double>(ss.row_bytes_in_memory));
  set.Add(set.Gauge("brook_serve_memory_limit_bytes", "--memory-limit; 0: none"), {},
          static_cast<double>(ss.memory_limit_bytes));
  const Batcher::Stats bs = batcher->stats();
  set.Add(set.Gauge("brook_serve_queued_examples", "Examples waiting for a batch"), {},
          static_cast<double>(bs.queued_examples));
  set.Add(set.Counter("brook_serve_examples_total", "Examples scored"), {},
          static_cast<double>(bs.examples));
  return set.Take();
}

// Whether `address` (HOST:PORT) can be listened on: HOST resolves to an
// address of this machine (bound with port 0, so no port is needed) and,
// with `bind_port`, PORT is free. INVALID_ARGUMENT for the address,
// UNAVAILABLE for a taken port.
absl::Status CheckListen(const char* flag, const std::string& address, bool bind_port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", address, ": expected HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int e = ::getaddrinfo(host.empty() ? nullptr : host.c_str(),
                                  bind_port ? port.c_str() : "0", &hints, &found);
      e != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", address, ": cannot resolve \"", host, "\": ", gai_strerror(e)));
  }
  int err = 0;
  const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = errno;
  } else {
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));  // as the listeners do
    if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0) err = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (err == 0) return absl::OkStatus();
  if (err == EADDRINUSE) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", flag, " ", address,
                                               ": the port is taken by another process"));
  }
  if (err == EADDRNOTAVAIL) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", address, ": \"", host, "\" is not an address of this machine (0.0.0.0: all)"));
  }
  return absl::UnavailableError(
      absl::StrCat("cannot listen on ", flag, " ", address, ": ", std::strerror(err)));
}

}  // namespace

absl::Status ModelServer::CheckAddresses(const ModelServerOptions& options, bool bind_ports) {
  if (absl::Status s = HttpServer::CheckAddress(options.http_listen); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--http: ", s.message()));
  }
  if (!options.metrics_listen.empty()) {
    if (absl::Status s = metrics::MetricsExposer::CheckAddress(options.metrics_listen); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--metrics-listen: ", s.message()));
    }
  }
  // Two of this server's own listeners on one port: the second would fail
  // after the model loaded, as if another process had the port.
  const std::pair<const char*, const std::string*> listeners[] = {
      {"--http", &options.http_listen},
      {"--grpc", &options.grpc_listen},
      {"--metrics-listen", &options.metrics_listen}};
  auto split = [](const std::string& a) {
    const size_t colon = a.rfind(':');
    return std::pair<std::string, std::string>(a.substr(0, colon), a.substr(colon + 1));
  };
  auto wildcard = [](const std::string& host) {
    return host.empty() || host == "0.0.0.0" || host == "[::]";
  };
  for (size_t i = 0; i < std::size(listeners); ++i) {
    for (size_t j = i + 1; j < std::size(listeners); ++j) {
      if (listeners[i].second->empty() || listeners[j].second->empty()) continue;
      const auto [host_i, port_i] = split(*listeners[i].second);
      const auto [host_j, port_j] = split(*listeners[j].second);
      if (port_i == port_j && port_i != "0" &&
          (host_i == host_j || wildcard(host_i) || wildcard(host_j))) {
        return absl::InvalidArgumentError(
            absl::StrCat(listeners[i].first, " ", *listeners[i].second, " and ", listeners[j].first,
                         " ", *listeners[j].second, " ask for one port: give each its own"));
      }
    }
  }
  for (const auto& [flag, address] : listeners) {
    if (!address->empty()) RETURN_IF_ERROR(CheckListen(flag, *address, bind_ports));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ModelServer>> ModelServer::Start(ModelServerOptions options) {
  // A taken port or a wrong host is found before a model that may take
  // minutes to load (or an export still to come, --wait-for-model), and
  // before gRPC and the metrics server print their own noise about it.
  RETURN_IF_ERROR(ModelRepository::CheckPath(options.model_path));
  RETURN_IF_ERROR(CheckAddresses(options, /*bind_ports=*/true));
  std::unique_ptr<ModelServer> s(new ModelServer());
  s->options_ = options;
  if (!options.metrics_listen.empty()) {
    ASSIGN_OR_RETURN(s->exposer_, metrics::MetricsExposer::Start(options.metrics_listen));
    s->metrics_ = NewMetrics(s->exposer_->shared_registry());
  } else {
    s->metrics_ = NewMetrics(metrics::MetricsExposer::NewRegistry());
  }
  if (!options.servable.data_dir.empty()) {
    // Each loaded version's rows live in a subdirectory that a load empties
    // first: two servers on one data dir would delete each other's files.
    std::error_code ec;
    std::filesystem::create_directories(options.servable.data_dir, ec);
    if (ec) {
      return absl::FailedPreconditionError(absl::StrCat("--data-dir ", options.servable.data_dir,
                                                        ": cannot create it: ", ec.message()));
    }
    absl::StatusOr<std::unique_ptr<storage::DirLock>> lock =
        storage::DirLock::Acquire(options.servable.data_dir);
    if (!lock.ok()) {
      return absl::Status(lock.status().code(), absl::StrCat("--data-dir ", lock.status().message(),
                                                             "; give each brook serve its own"));
    }
    s->data_dir_lock_ = std::move(*lock);
  }
  ASSIGN_OR_RETURN(s->repo_, ModelRepository::Open({.path = options.model_path,
                                                    .servable = options.servable,
                                                    .log = options.log}));
  if (!options.follow_ps.empty()) {
    ps::GrpcPsClientOptions po;
    po.addresses = options.follow_ps;
    po.tls = options.ps_tls;
    po.token = options.ps_token;
    // A sync that cannot reach the PS fails and the next one tries again:
    // no need to ride out an outage inside one call.
    po.deadline = std::clamp(2 * options.sync_interval, absl::Seconds(2), absl::Seconds(20));
    ASSIGN_OR_RETURN(s->follow_client_, ps::GrpcPsClient::Create(po));
    PsFollowerOptions fo;
    fo.job = options.follow_job;
    fo.interval = options.sync_interval;
    fo.log = options.log;
    ASSIGN_OR_RETURN(s->follower_, PsFollower::Start(fo, s->repo_.get(), s->follow_client_.get()));
    s->repo_->SetBeforeSwap([f = s->follower_.get()](const std::shared_ptr<const Servable>& v) {
      return f->SyncInto(v);
    });
  }
  BatcherOptions bo = options.batching;
  bo.on_batch = [m = s->metrics_.get()](int n, double seconds) {
    m->batch_size->Observe(n);
    m->batch_duration->Observe(seconds);
  };
  s->batcher_ = std::make_unique<Batcher>(s->repo_.get(), bo);
  s->metrics_->collector = std::make_shared<metrics::FunctionCollector>(
      [repo = s->repo_.get(), b = s->batcher_.get(), f = s->follower_.get()] {
        return Collect(repo, b, f);
      });
  if (s->exposer_ != nullptr) s->exposer_->RegisterCollectable(s->metrics_->collector);

  auto rest = std::make_shared<RestApi>(options.model_name, s->repo_.get(), s->batcher_.get());
  HttpServerOptions ho;
  ho.threads = options.http_threads;
  ho.max_body_bytes = options.max_request_bytes;
  ho.on_reply = [m = s->metrics_.get()](int status, double seconds) {
    m->HttpReply(status, seconds);
  };
  ASSIGN_OR_RETURN(
      s->http_,
      HttpServer::Start(
          options.http_listen, ho,
          [rest](std::string_view method, std::string_view target, std::string body,
                 HttpServer::Reply reply) {
            rest->Handle(method, target, std::move(body), [reply = std::move(reply)](RestReply r) {
              HttpReply h{r.status, std::move(r.body), {}};
              if (r.version != 0) {
                h.headers.emplace_back("X-Brook-Model-Version", std::to_string(r.version));
              }
              reply(std::move(h));
            });
          }));
  if (!options.grpc_listen.empty()) {
    s->grpc_service_ = std::make_unique<PredictService>(options.model_name, s->repo_.get(),
                                                        s->batcher_.get(), s->metrics_->grpc.get());
    s->metrics_->node_service = std::make_unique<rpc::NodeService>(v1::NODE_KIND_SERVER);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options.grpc_listen, grpc::InsecureServerCredentials(),
                             &s->grpc_port_);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a taken port is an error
    builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_request_bytes));
    builder.RegisterService(s->grpc_service_.get());
    builder.RegisterService(s->metrics_->node_service.get());
    s->grpc_ = builder.BuildAndStart();
    if (s->grpc_ == nullptr || s->grpc_port_ == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen for gRPC on ", options.grpc_listen, " (port taken?)"));
    }
  }
  if (options.poll_interval > absl::ZeroDuration()) s->repo_->StartPolling(options.poll_interval);
  return s;
}

ModelServer::~ModelServer() {
  // No new connections; the batcher answers what is queued while the HTTP
  // server can still write those replies; then the transports go.
  // Requests already begun are answered (the batcher still runs): HTTP
  // stops accepting and waits for them; a gRPC call arriving now is refused
  // UNAVAILABLE and the ones in progress finish. Then the gRPC server stops
  // at once (with a deadline it would wait out idle clients).
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  if (http_ != nullptr) http_->Shutdown();
  if (grpc_service_ != nullptr) grpc_service_->StopAccepting();
  if (http_ != nullptr && !http_->WaitIdle(give_up - absl::Now()) && options_.log) {
    options_.log("drain: HTTP requests still in progress after 10 s are dropped");
  }
  if (grpc_service_ != nullptr) grpc_service_->WaitIdle(give_up - absl::Now());
  if (batcher_ != nullptr) batcher_->Drain(absl::Seconds(1));
  if (grpc_ != nullptr) grpc_->Shutdown(std::chrono::system_clock::now());
  if (repo_ != nullptr) repo_->StopPolling();  // no before-swap call into the follower after this
  follower_.reset();
  batcher_.reset();
  http_.reset();
  grpc_.reset();
  repo_.reset();
  data_dir_lock_.reset();
}

int ModelServer::http_port() const { return http_->port(); }
int ModelServer::metrics_port() const { return exposer_ != nullptr ? exposer_->port() : 0; }

}  // namespace brook::serving
