#include "chief/client/chief_client.h"

#include <grpcpp/grpcpp.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/endpoint_error.h"
#include "common/rpc/grpc_error.h"
#include "common/rpc/status_mapping.h"
#include "common/status_macros.h"
#include "security/bearer_token.h"

namespace brook::chief {

absl::StatusOr<std::unique_ptr<ChiefClient>> ChiefClient::Connect(
    const std::string& address, const ChiefClientOptions& options) {
  if (address.empty()) return absl::InvalidArgumentError("chief address is empty");
  if (options.deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("chief client deadline must be positive");
  }
  if (!options.bearer_token.empty() && !options.tls.enabled() &&
      !security::IsLoopbackAddress(address)) {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing to send the chief token in plaintext to ", address,
                     ": turn TLS on (--tls-ca), or reach the chief on a loopback address"));
  }
  if (!options.bearer_token.empty()) {
    RETURN_IF_ERROR(security::ValidateToken(options.bearer_token, "--token"));
  }
  grpc::ChannelArguments args;
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                   security::ChannelCredentials(options.tls, &args));
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  return std::unique_ptr<ChiefClient>(
      new ChiefClient(grpc::CreateCustomChannel(address, creds, args), address, options));
}

std::unique_ptr<ChiefClient> ChiefClient::FromChannel(std::shared_ptr<grpc::Channel> channel,
                                                      const std::string& address,
                                                      const ChiefClientOptions& options) {
  return std::unique_ptr<ChiefClient>(new ChiefClient(std::move(channel), address, options));
}

ChiefClient::ChiefClient(std::shared_ptr<grpc::Channel> channel, std::string address,
                         const ChiefClientOptions& options)
    : address_(std::move(address)),
      options_(options),
      channel_(std::move(channel)),
      stub_(v1::Chief::NewStub(channel_)) {}

template <typename Request, typename Response, typename Method>
absl::StatusOr<Response> ChiefClient::Call(Method method, const Request& request,
                                           const char* rpc_name) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.deadline));
  context.set_wait_for_ready(options_.wait_for_ready);
  // Metadata, not call credentials: gRPC drops call credentials on a
  // plaintext channel even to 127.0.0.1, and Connect already refused
  // plaintext to anywhere else.
  if (!options_.bearer_token.empty()) {
    context.AddMetadata(security::kAuthorizationHeader,
                        security::AuthorizationValue(options_.bearer_token));
  }
  Response response;
  const grpc::Status status = ((*stub_).*method)(&context, request, &response);
  if (status.ok()) return response;
  const rpc::Peer peer{.address = address_,
                       .expected = v1::NODE_KIND_CHIEF,
                       .tls = options_.tls,
                       .channel = channel_};
  absl::Status s = rpc::FromGrpcError(status, rpc_name, peer, options_.wait_for_ready);
  if (IsWrongEndpoint(s)) return s;  // "X is a brook PS (shard 0 of 2), not a chief"
  if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
    // FromGrpcError's explanations start with the address; say it once.
    absl::string_view why = s.message();
    if (absl::ConsumePrefix(&why, address_)) absl::ConsumePrefix(&why, ": ");
    std::string text(why);
    if (absl::IsDeadlineExceeded(s) && !options_.wait_for_ready) {
      text = absl::StrCat("no reply within ", absl::FormatDuration(options_.deadline), " (", text,
                          ")");
    }
    return absl::Status(s.code(), absl::StrCat("chief at ", address_, " unreachable: ", text));
  }
  return s;
}

absl::StatusOr<v1::HealthResponse> ChiefClient::Health(const v1::HealthRequest& request) {
  return Call<v1::HealthRequest, v1::HealthResponse>(&v1::Chief::Stub::Health, request, "Health");
}

absl::StatusOr<v1::SubmitJobResponse> ChiefClient::SubmitJob(const v1::SubmitJobRequest& request) {
  return Call<v1::SubmitJobRequest, v1::SubmitJobResponse>(&v1::Chief::Stub::SubmitJob, request,
                                                           "SubmitJob");
}

absl::StatusOr<v1::JobStatus> ChiefClient::GetJob(const v1::GetJobRequest& request) {
  return Call<v1::GetJobRequest, v1::JobStatus>(&v1::Chief::Stub::GetJob, request, "GetJob");
}

absl::StatusOr<v1::ListJobsResponse> ChiefClient::ListJobs(const v1::ListJobsRequest& request) {
  return Call<v1::ListJobsRequest, v1::ListJobsResponse>(&v1::Chief::Stub::ListJobs, request,
                                                         "ListJobs");
}

absl::StatusOr<v1::JobStatus> ChiefClient::CancelJob(const v1::CancelJobRequest& request) {
  return Call<v1::CancelJobRequest, v1::JobStatus>(&v1::Chief::Stub::CancelJob, request,
                                                   "CancelJob");
}

absl::StatusOr<v1::RegisterNodeResponse> ChiefClient::RegisterNode(
    const v1::RegisterNodeRequest& request) {
  return Call<v1::RegisterNodeRequest, v1::RegisterNodeResponse>(&v1::Chief::Stub::RegisterNode,
                                                                 request, "RegisterNode");
}

absl::StatusOr<v1::HeartbeatResponse> ChiefClient::Heartbeat(const v1::HeartbeatRequest& request) {
  return Call<v1::HeartbeatRequest, v1::HeartbeatResponse>(&v1::Chief::Stub::Heartbeat, request,
                                                           "Heartbeat");
}

absl::StatusOr<v1::AcquireWorkResponse> ChiefClient::AcquireWork(
    const v1::AcquireWorkRequest& request) {
  return Call<v1::AcquireWorkRequest, v1::AcquireWorkResponse>(&v1::Chief::Stub::AcquireWork,
                                                               request, "AcquireWork");
}

absl::StatusOr<v1::CompleteWorkResponse> ChiefClient::CompleteWork(
    const v1::CompleteWorkRequest& request) {
  return Call<v1::CompleteWorkRequest, v1::CompleteWorkResponse>(&v1::Chief::Stub::CompleteWork,
                                                                 request, "CompleteWork");
}

absl::StatusOr<v1::ReportMetricsResponse> ChiefClient::ReportMetrics(
    const v1::ReportMetricsRequest& request) {
  return Call<v1::ReportMetricsRequest, v1::ReportMetricsResponse>(&v1::Chief::Stub::ReportMetrics,
                                                                   request, "ReportMetrics");
}

}  // namespace brook::chief
