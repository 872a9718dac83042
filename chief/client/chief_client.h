// A client of the chief's gRPC API (proto/brook/v1/chief.proto): the `brook`
// job CLI (submit, status, list, cancel, logs) and trainers (RegisterNode,
// Heartbeat, AcquireWork, CompleteWork, ReportMetrics) use it.
//
// One method per RPC. Each call has its own deadline (options.deadline) and
// is made once: retrying is the caller's decision (a trainer's loop retries,
// the CLI reports). A failed call returns the chief's status with its code
// and message unchanged (NOT_FOUND an unknown job, INVALID_ARGUMENT a bad
// spec naming the field, ...), except that UNAVAILABLE and DEADLINE_EXCEEDED
// keep their code but say "chief at HOST:PORT unreachable: ..." (with the
// cause when a probe finds it: "connection refused"), and an address that is
// no chief says what it is instead (common/rpc/grpc_error.h: "HOST:PORT is a
// brook PS (shard 0 of 2), not a chief", marked by common/endpoint_error.h).
//
// Thread-safe: calls from many threads proceed concurrently on one channel.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "brook/v1/chief.grpc.pb.h"
#include "security/tls.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace brook::chief {

struct ChiefClientOptions {
  // Budget of one call.
  absl::Duration deadline = absl::Seconds(10);
  // false: a chief that cannot be connected to fails the call at once
  // (UNAVAILABLE), as the CLI wants. true: the call waits for a connection
  // until its deadline, as a trainer starting before the chief wants.
  bool wait_for_ready = false;
  // Off: plaintext (the 127.0.0.1 default, docs/architecture.md "Security").
  security::TlsOptions tls;
  // Sent as "authorization: Bearer TOKEN" on every call when not empty. Only
  // over TLS or to a loopback address: Connect refuses to send it in
  // plaintext across a network.
  std::string bearer_token;
  int max_message_bytes = 64 << 20;
};

class ChiefClient {
 public:
  // Creates the channel (connecting lazily). INVALID_ARGUMENT for an empty
  // address or a non-positive deadline.
  static absl::StatusOr<std::unique_ptr<ChiefClient>> Connect(
      const std::string& address, const ChiefClientOptions& options = {});
  // Over an existing channel (e.g. grpc::Server::InProcessChannel());
  // `address` only names the chief in messages.
  static std::unique_ptr<ChiefClient> FromChannel(std::shared_ptr<grpc::Channel> channel,
                                                  const std::string& address,
                                                  const ChiefClientOptions& options = {});

  const std::string& address() const { return address_; }
  const ChiefClientOptions& options() const { return options_; }

  absl::StatusOr<v1::HealthResponse> Health(const v1::HealthRequest& request = {});
  absl::StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest& request);
  absl::StatusOr<v1::JobStatus> GetJob(const v1::GetJobRequest& request);
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& request = {});
  absl::StatusOr<v1::JobStatus> CancelJob(const v1::CancelJobRequest& request);
  absl::StatusOr<v1::RegisterNodeResponse> RegisterNode(const v1::RegisterNodeRequest& request);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  absl::StatusOr<v1::AcquireWorkResponse> AcquireWork(const v1::AcquireWorkRequest& request);
  absl::StatusOr<v1::CompleteWorkResponse> CompleteWork(const v1::CompleteWorkRequest& request);
  absl::StatusOr<v1::ReportMetricsResponse> ReportMetrics(const v1::ReportMetricsRequest& request);

 private:
  ChiefClient(std::shared_ptr<grpc::Channel> channel, std::string address,
              const ChiefClientOptions& options);

  // Runs one unary RPC of the stub with a fresh context. A failure is
  // explained by common/rpc/grpc_error.h (named `rpc_name`).
  template <typename Request, typename Response, typename Method>
  absl::StatusOr<Response> Call(Method method, const Request& request, const char* rpc_name);

  const std::string address_;
  const ChiefClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Chief::Stub> stub_;
};

}  // namespace brook::chief
