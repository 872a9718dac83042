#include "common/rpc/grpc_error.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "brook/v1/node.grpc.pb.h"
#include "common/endpoint_error.h"
#include "common/rpc/endpoint_probe.h"
#include "common/rpc/status_mapping.h"

namespace brook::rpc {
namespace {

// Not the node wanted (another kind, not brook): FAILED_PRECONDITION.
absl::Status Wrong(const std::string& message) {
  return MarkWrongEndpoint(absl::FailedPreconditionError(message));
}

// No brook gRPC on this transport (HTTP/1, TLS on one side only, a refused
// certificate): UNAVAILABLE, as gRPC says, but marked: no retry fixes it.
absl::Status NoTransport(const std::string& message) {
  return MarkWrongEndpoint(absl::UnavailableError(message));
}

std::string Describe(const v1::DescribeResponse& node) {
  std::string out = absl::StrCat("a brook ", NodeKindName(node.kind()));
  if (node.kind() == v1::NODE_KIND_PS && node.num_shards() > 0) {
    absl::StrAppend(&out, " (shard ", node.shard_index(), " of ", node.num_shards(), ")");
  }
  return out;
}

// Transport-level explanations from the probes; OK when they found nothing.
absl::Status ExplainTransport(const Peer& peer) {
  const std::string& a = peer.address;
  const PlaintextProbe plain = ProbePlaintext(a, peer.probe_timeout);
  const bool tls_on = peer.tls.enabled();
  switch (plain.transport) {
    case Transport::kUnparsed:
      return absl::OkStatus();
    case Transport::kUnresolved:
      return absl::UnavailableError(absl::StrCat(a, ": host not found (", plain.detail, ")"));
    case Transport::kRefused:
      return absl::UnavailableError(
          absl::StrCat(a, ": connection refused (nothing listens there)"));
    case Transport::kNoConnect:
      return absl::UnavailableError(
          absl::StrCat(a, ": no connection within ", absl::FormatDuration(peer.probe_timeout), " (",
                       plain.detail, "; is the host up, and the port open to this machine?)"));
    case Transport::kHttp1:
      return NoTransport(absl::StrCat(
          a, " does not speak brook's gRPC (HTTP/1 answered: is it a /metrics port?)"));
    case Transport::kHttp2:
      if (tls_on) {
        return NoTransport(absl::StrCat(a,
                                        ": TLS handshake failed: the server speaks plaintext gRPC "
                                        "(turn TLS on there, or drop --tls-* here)"));
      }
      return absl::OkStatus();  // a gRPC server: the call's own error stands
    case Transport::kSilent:
    case Transport::kClosed:
    case Transport::kTls:
    case Transport::kOther:
      break;
  }
  // Connected, and the server did not answer plaintext HTTP/2: try TLS.
  const TlsProbe t = ProbeTls(a, peer.tls, peer.probe_timeout);
  if (t.transport != Transport::kTls) {
    if (plain.transport == Transport::kSilent) {
      return absl::UnavailableError(absl::StrCat(a, ": connected, but no reply within ",
                                                 absl::FormatDuration(peer.probe_timeout)));
    }
    if (plain.transport == Transport::kClosed) {
      // Not marked: a node that is stopping or starting (a PS killed and
      // restarted mid-job) hangs up the same way, and comes back.
      return absl::UnavailableError(
          absl::StrCat(a, ": the connection was closed without a reply (", plain.detail,
                       "; a node restarting, or a server that is no brook node)"));
    }
    return NoTransport(absl::StrCat(a, " does not speak brook's gRPC (",
                                    TransportName(plain.transport), ": ", plain.detail, ")"));
  }
  const bool has_cert = !peer.tls.cert_file.empty() && !peer.tls.key_file.empty();
  if (!tls_on) {
    return NoTransport(absl::StrCat(
        a, ": TLS handshake failed: the server expects TLS (give --tls-ca",
        t.asked_for_client_cert ? ", and --tls-cert and --tls-key: it requires a client certificate"
                                : "",
        ")"));
  }
  if (!t.server_verified && !t.verify_error.empty()) {
    return NoTransport(absl::StrCat(a,
                                    ": TLS handshake failed: the server's certificate is not "
                                    "trusted by --tls-ca ",
                                    peer.tls.ca_file, " for this name (", t.verify_error,
                                    "; --tls-server-name sets the name when it differs)"));
  }
  if (t.asked_for_client_cert && !has_cert) {
    return NoTransport(absl::StrCat(a,
                                    ": TLS handshake failed: the server requires a client "
                                    "certificate (give --tls-cert and --tls-key)"));
  }
  if (!t.accepted) {
    return NoTransport(absl::StrCat(
        a, ": TLS handshake failed: the server refused ",
        has_cert ? absl::StrCat("this client's certificate (--tls-cert ", peer.tls.cert_file, ")")
                 : std::string("the connection"),
        t.server_alert.empty() ? "" : absl::StrCat(": ", t.server_alert)));
  }
  return absl::OkStatus();
}

}  // namespace

const char* NodeKindName(v1::NodeKind kind) {
  switch (kind) {
    case v1::NODE_KIND_PS:
      return "PS";
    case v1::NODE_KIND_CHIEF:
      return "chief";
    case v1::NODE_KIND_TRAINER:
      return "trainer";
    case v1::NODE_KIND_SERVER:
      return "model server (brook serve)";
    default:
      return "node";
  }
}

absl::Status DiagnoseEndpoint(const Peer& peer) {
  std::shared_ptr<grpc::Channel> channel = peer.channel;
  if (channel == nullptr) {
    grpc::ChannelArguments args;
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
        security::ChannelCredentials(peer.tls, &args);
    if (!creds.ok()) return absl::OkStatus();  // the caller's own setup reports it
    channel = grpc::CreateCustomChannel(peer.address, *creds, args);
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + peer.probe_timeout));
  v1::DescribeResponse node;
  const grpc::Status s = v1::Node::NewStub(channel)->Describe(&context, {}, &node);
  if (s.ok()) {
    if (peer.expected == v1::NODE_KIND_UNSPECIFIED || node.kind() == peer.expected) {
      return absl::OkStatus();
    }
    return Wrong(absl::StrCat(peer.address, " is ", Describe(node), ", not a ",
                              NodeKindName(peer.expected)));
  }
  if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    // Unmarked: a test double or an older brook may still serve the call.
    return absl::UnimplementedError(
        absl::StrCat(peer.address,
                     " speaks gRPC but is not a brook node (it has no brook.v1.Node service), "
                     "or runs a brook older than this client"));
  }
  return ExplainTransport(peer);
}

absl::Status FromGrpcError(const grpc::Status& status, const std::string& rpc, const Peer& peer,
                           bool waited_for_ready) {
  if (status.ok()) return absl::OkStatus();
  const grpc::StatusCode code = status.error_code();
  const absl::StatusCode absl_code = FromGrpcCode(code);
  const bool vague = status.error_message().empty();
  const bool transport = code == grpc::StatusCode::UNAVAILABLE ||
                         code == grpc::StatusCode::UNIMPLEMENTED ||
                         (code == grpc::StatusCode::DEADLINE_EXCEEDED && waited_for_ready);
  if (transport || vague) {
    absl::Status why = DiagnoseEndpoint(peer);
    if (IsWrongEndpoint(why)) {
      return code == grpc::StatusCode::UNIMPLEMENTED
                 ? MarkWrongEndpoint(absl::UnimplementedError(why.message()))
                 : why;
    }
    if (absl::IsUnimplemented(why)) {
      // No brook node there, and not the RPC either: the wrong address.
      if (code == grpc::StatusCode::UNIMPLEMENTED) {
        return MarkWrongEndpoint(
            absl::UnimplementedError(absl::StrCat(why.message(), " (", rpc, " is UNIMPLEMENTED)")));
      }
    } else if (!why.ok() && (code == grpc::StatusCode::UNAVAILABLE ||
                             code == grpc::StatusCode::DEADLINE_EXCEEDED)) {
      return absl::Status(absl_code, why.message());
    }
  }
  if (vague) {
    return absl::Status(absl_code,
                        absl::StrCat(peer.address, ": ", rpc, " failed with ",
                                     absl::StatusCodeToString(absl_code), " and no message"));
  }
  return FromGrpcStatus(status);
}

}  // namespace brook::rpc
