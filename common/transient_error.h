// Marks an error as transient: the condition clears by itself (a full disk
// gets space back) and the same request may be sent again later, unlike the
// same code for a permanent refusal (RESOURCE_EXHAUSTED for a key limit or a
// memory budget is final). The mark is an absl::Status payload, so it
// survives RETURN_IF_ERROR; the PS sends it on the wire as a trailer
// (common/rpc/status_mapping.h), and GrpcPsClient retries such replies.
//
// Header-only, absl only.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace brook {

inline constexpr char kTransientPayloadUrl[] = "type.brook/brook.Transient";

// What a transient error is waiting for; the payload's value.
inline constexpr char kOutOfSpace[] = "out-of-space";

// `status` with the transient mark (`reason`, e.g. kOutOfSpace). OK stays OK.
inline absl::Status MarkTransient(absl::Status status, const char* reason) {
  if (!status.ok()) status.SetPayload(kTransientPayloadUrl, absl::Cord(absl::string_view(reason)));
  return status;
}

// The mark's reason, "" when `status` is not marked transient.
inline std::string TransientReason(const absl::Status& status) {
  auto p = status.GetPayload(kTransientPayloadUrl);
  return p.has_value() ? std::string(*p) : std::string();
}

inline bool IsTransient(const absl::Status& status) {
  return status.GetPayload(kTransientPayloadUrl).has_value();
}

}  // namespace brook
