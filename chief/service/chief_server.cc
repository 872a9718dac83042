#include "chief/service/chief_server.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "brook/v1/chief.grpc.pb.h"
#include "chief/service/chief_metrics.h"
#include "common/rpc/node_service.h"
#include "common/rpc/status_mapping.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "metrics/collector.h"
#include "metrics/exposer.h"
#include "metrics/rpc_metrics.h"
#include "ps/client/grpc_ps_client.h"
#include "security/bearer_token.h"

namespace brook::chief {
namespace {

enum Method {
  kHealth,
  kSubmitJob,
  kGetJob,
  kListJobs,
  kCancelJob,
  kRegisterNode,
  kHeartbeat,
  kAcquireWork,
  kCompleteWork,
  kReportMetrics,
};

std::vector<std::string> MethodNames() {
  return {"Health",       "SubmitJob", "GetJob",      "ListJobs",     "CancelJob",
          "RegisterNode", "Heartbeat", "AcquireWork", "CompleteWork", "ReportMetrics"};
}

std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

}  // namespace

// The thin adapter: each RPC calls the Chief method of the same name and maps
// its status (common/rpc/status_mapping.h, the one seam for both services).
class ChiefService final : public v1::Chief::Service {
 public:
  // `ps`: the PS nodes' client, checked at each submit (null: none).
  ChiefService(Chief* chief, metrics::RpcMetrics* metrics, std::string token, ps::GrpcPsClient* ps)
      : chief_(chief), metrics_(metrics), token_(std::move(token)), ps_(ps) {}

  grpc::Status Health(grpc::ServerContext* context, const v1::HealthRequest*,
                      v1::HealthResponse* resp) override {
    return Run(context, kHealth, [&]() -> absl::Status {
      resp->set_version(Version());
      resp->set_commit(GitCommit());
      resp->set_serving(true);
      return absl::OkStatus();
    });
  }
  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* req,
                         v1::SubmitJobResponse* resp) override {
    return Run(context, kSubmitJob, [&]() -> absl::Status {
      RETURN_IF_ERROR(CheckPs());
      ASSIGN_OR_RETURN(*resp->mutable_job(), chief_->SubmitJob(*req));
      return absl::OkStatus();
    });
  }
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* req,
                      v1::JobStatus* resp) override {
    return Run(context, kGetJob, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(*resp, chief_->GetJob(*req));
      return absl::OkStatus();
    });
  }
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest*,
                        v1::ListJobsResponse* resp) override {
    return Run(context, kListJobs, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(*resp, chief_->ListJobs());
      return absl::OkStatus();
    });
  }
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* req,
                         v1::JobStatus* resp) override {
    return Run(context, kCancelJob, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(*resp, chief_->CancelJob(*req));
      return absl::OkStatus();
    });
  }
  grpc::Status RegisterNode(grpc::ServerContext* context, const v1::RegisterNodeRequest* req,
                            v1::RegisterNodeResponse* resp) override {
    return Run(context, kRegisterNode, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(*resp, chief_->RegisterNode(*req));
      return absl::OkStatus();
    });
  }
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override {
    return Run(context, kHeartbeat, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(*resp, chief_->Heartbeat(*req));
      return absl::OkStatus();
    });
  }
  grpc::Status AcquireWork(grpc::ServerContext* context, const v1::AcquireWorkRequest* req,
                           v1::AcquireWorkResponse* resp) override {
    return Run(context, kAcquireWork, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(*resp, chief_->AcquireWork(*req));
      return absl::OkStatus();
    });
  }
  grpc::Status CompleteWork(grpc::ServerContext* context, const v1::CompleteWorkRequest* req,
                            v1::CompleteWorkResponse* resp) override {
    return Run(context, kCompleteWork, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(*resp, chief_->CompleteWork(*req));
      return absl::OkStatus();
    });
  }
  grpc::Status ReportMetrics(grpc::ServerContext* context, const v1::ReportMetricsRequest* req,
                             v1::ReportMetricsResponse*) override {
    return Run(context, kReportMetrics, [&] { return chief_->ReportMetrics(*req); });
  }

 private:
  grpc::Status Run(const grpc::ServerContext* context, Method method,
                   const std::function<absl::Status()>& fn) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = Authorize(*context, method);
    if (s.ok()) s = fn();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    metrics_->Record(method, static_cast<int>(s.code()), seconds);
    return rpc::ToGrpcStatus(s);
  }

  // Every method but Health needs the token when one is configured: Health
  // says only "serving" and is what Kubernetes probes call.
  absl::Status Authorize(const grpc::ServerContext& context, Method method) const {
    if (token_.empty() || method == kHealth) return absl::OkStatus();
    const auto& metadata = context.client_metadata();
    const auto it = metadata.find(security::kAuthorizationHeader);
    const std::string_view value = it == metadata.end()
                                       ? std::string_view()
                                       : std::string_view(it->second.data(), it->second.size());
    return security::CheckAuthorization(token_, value);
  }

  // A --ps list naming a chief, a /metrics port or the shards out of order
  // would leave a job RUNNING with nothing to say: refuse it at submit,
  // naming the address. Shards that do not answer are not judged here.
  absl::Status CheckPs() const {
    if (ps_ == nullptr) return absl::OkStatus();
    absl::Status s = ps_->CheckShards(absl::Seconds(2));
    if (s.ok()) return s;
    return absl::FailedPreconditionError(
        absl::StrCat("the chief's PS list (--ps) is wrong: ", s.message()));
  }

  Chief* const chief_;
  metrics::RpcMetrics* const metrics_;
  const std::string token_;  // empty: no token required
  ps::GrpcPsClient* const ps_;
};

absl::StatusOr<std::unique_ptr<ChiefServer>> ChiefServer::Start(const ChiefServerOptions& options) {
  if (!options.auth_token.empty()) {
    RETURN_IF_ERROR(security::ValidateToken(options.auth_token, "--auth-token"));
  }
  // Certificates are read before anything is opened: a bad file changes nothing.
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   security::ServerCredentials(options.tls));
  std::unique_ptr<ChiefServer> s(new ChiefServer());
  s->options_ = options;
  if (!options.metrics_listen.empty()) {
    ASSIGN_OR_RETURN(s->exposer_, metrics::MetricsExposer::Start(options.metrics_listen));
    s->registry_ = s->exposer_->shared_registry();
  } else {
    s->registry_ = metrics::MetricsExposer::NewRegistry();
  }
  if (!options.chief.ps_addresses.empty()) {
    ps::GrpcPsClientOptions po;
    po.addresses = options.chief.ps_addresses;
    po.tls = options.tls;
    po.token = options.ps_token;
    ASSIGN_OR_RETURN(s->ps_, ps::GrpcPsClient::Create(po));
  }
  ChiefOptions chief_options = options.chief;
  if (s->ps_ != nullptr) {
    chief_options.ps_fault = [ps = s->ps_.get()]() -> std::string {
      const std::optional<ps::GrpcPsClient::RetryEpisode> e = ps->retrying();
      return e.has_value() ? e->error : std::string();
    };
    chief_options.set_ps_admin_retry_window = [ps = s->ps_.get()](absl::Duration window) {
      ps->SetAdminRetryWindow(window);
    };
  }
  ASSIGN_OR_RETURN(s->chief_, Chief::Open(chief_options, s->ps_.get()));
  s->rpc_metrics_ =
      std::make_unique<metrics::RpcMetrics>(*s->registry_, "brook_chief", MethodNames());
  s->collector_ = std::make_shared<metrics::FunctionCollector>(
      [c = s->chief_.get()] { return CollectChiefMetrics(c->Stats(), absl::Now()); });
  if (s->exposer_) s->exposer_->RegisterCollectable(s->collector_);
  s->service_ = std::make_unique<ChiefService>(s->chief_.get(), s->rpc_metrics_.get(),
                                               options.auth_token, s->ps_.get());
  s->node_service_ = std::make_unique<rpc::NodeService>(v1::NODE_KIND_CHIEF);

  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, credentials, &s->port_);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a taken port is an error
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(64 << 20);
  builder.RegisterService(s->service_.get());
  builder.RegisterService(s->node_service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    s->server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen));
  }
  return s;
}

ChiefServer::~ChiefServer() { Shutdown(absl::ZeroDuration()); }

std::string ChiefServer::address() const {
  return absl::StrCat(HostOf(options_.listen), ":", port_);
}

std::string ChiefServer::metrics_address() const { return exposer_ ? exposer_->address() : ""; }

void ChiefServer::Shutdown(absl::Duration drain) {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(drain));
    server_->Wait();
    server_.reset();
  }
  // The chief's worker may be retrying a checkpoint, an evaluation or an
  // export against a dead PS for minutes: end it so ~Chief's join returns
  // (the task is redone by the next chief).
  if (ps_ != nullptr) ps_->Cancel();
}

}  // namespace brook::chief
