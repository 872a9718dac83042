// The one place a failed gRPC call becomes the error a user reads. gRPC
// alone says UNIMPLEMENTED with no message when a chief is asked a PS's
// RPC, UNAVAILABLE "failed to connect to all addresses" for a refused
// connect, an HTTP/1 port and a TLS mismatch alike. FromGrpcError asks the
// address what it is (brook.v1.Node/Describe, then endpoint_probe.h) and
// says so, every message starting with the address:
//
//   127.0.0.1:7070 is a brook PS (shard 1 of 2), not a chief
//   127.0.0.1:9100 does not speak brook's gRPC (HTTP/1 answered: is it a /metrics port?)
//   127.0.0.1:7000: connection refused (nothing listens there)
//   127.0.0.1:7000: TLS handshake failed: the server expects TLS (give --tls-ca)
//   127.0.0.1:7000: TLS handshake failed: the server requires a client certificate ...
//
// Mistakes no retry fixes carry common/endpoint_error.h's mark: a wrong
// kind of node (FAILED_PRECONDITION, or UNIMPLEMENTED when gRPC said so),
// and no brook gRPC on the transport -- HTTP/1, TLS on one side only, a
// refused certificate (UNAVAILABLE, as gRPC says). A refused or silent
// address keeps UNAVAILABLE / DEADLINE_EXCEEDED unmarked: callers may retry
// it. Statuses with a message of their own pass through unchanged.
//
// Thread-safe. Costs nothing on success; on a failure worth explaining, one
// Describe call and at most two probe connections, within `probe_timeout`.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "brook/v1/node.pb.h"
#include "security/tls.h"

namespace grpc {
class Channel;
class Status;
}  // namespace grpc

namespace brook::rpc {

// "PS", "chief", "trainer", "node".
const char* NodeKindName(v1::NodeKind kind);

// Who the caller meant to reach, and how it dials.
struct Peer {
  std::string address;
  v1::NodeKind expected = v1::NODE_KIND_UNSPECIFIED;
  security::TlsOptions tls;
  // The caller's channel, asked Describe; null: one is made from `tls`.
  std::shared_ptr<grpc::Channel> channel;
  absl::Duration probe_timeout = absl::Seconds(2);
};

// What is wrong with `peer`'s address, found without the failed call:
// OK when a brook node of the expected kind answers Describe (or, when
// `expected` is unspecified, any brook node), or when the probes found
// nothing wrong with the transport; UNIMPLEMENTED (unmarked) for a gRPC
// server without brook.v1.Node; else the explanation (see above).
absl::Status DiagnoseEndpoint(const Peer& peer);

// A failed call of `rpc` (e.g. "ListJobs") to `peer` as a library status.
// `waited_for_ready`: the call had wait_for_ready set, so a timeout may hide
// a failed connection.
absl::Status FromGrpcError(const grpc::Status& status, const std::string& rpc, const Peer& peer,
                           bool waited_for_ready = false);

}  // namespace brook::rpc
