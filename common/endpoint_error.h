// Marks an error as "the address is not what the caller wanted": nothing
// listens there that speaks brook's gRPC the way the caller dials (an HTTP/1
// /metrics port, a TLS port dialled in plaintext, a node of another kind).
// Retrying never helps; the user must fix a flag. The job CLI exits 4 for
// it, like an unreachable chief (cli/job_exit_codes.h), and retry
// loops give up at once. The mark is an absl::Status payload, so it
// survives RETURN_IF_ERROR (common/transient_error.h does the same).
//
// Header-only, absl only.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/cord.h"

namespace brook {

inline constexpr char kWrongEndpointPayloadUrl[] = "type.brook/brook.WrongEndpoint";

// `status` with the mark. OK stays OK.
inline absl::Status MarkWrongEndpoint(absl::Status status) {
  if (!status.ok()) status.SetPayload(kWrongEndpointPayloadUrl, absl::Cord("1"));
  return status;
}

inline bool IsWrongEndpoint(const absl::Status& status) {
  return status.GetPayload(kWrongEndpointPayloadUrl).has_value();
}

}  // namespace brook
