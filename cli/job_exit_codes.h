// Exit codes of the job CLI (`brook submit`, `status`, `list`, `cancel`,
// `logs`), so scripts and CI can tell a failed job from a typo from a chief
// that is down. The first three are commands.h's codes for every subcommand.
//
//   0  ok (for `status`: the job is queued, running or succeeded)
//   1  the job failed or was cancelled (or the chief refused the request:
//      an invalid spec, an active job of that name, a finished job to cancel)
//   2  usage: bad flags, or no chief address (--chief / BROOK_CHIEF / TF_CONFIG)
//   3  not found: the chief knows no job of that id
//   4  the chief is unreachable (UNAVAILABLE or no reply within the deadline;
//      with TLS also a refused handshake: a missing or untrusted certificate),
//      or what answers at the address is no chief: a PS, a /metrics port, a
//      TLS port dialled in plaintext (common/endpoint_error.h)
//   5  the chief refused the caller: no token or a wrong one (UNAUTHENTICATED,
//      PERMISSION_DENIED)
//
// Header-only, with no CLI dependency, so the mapping is unit-tested.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "common/endpoint_error.h"

namespace brook::cli::job_exit {

inline constexpr int kOk = 0;
inline constexpr int kFailed = 1;
inline constexpr int kUsage = 2;
inline constexpr int kNotFound = 3;
inline constexpr int kUnreachable = 4;
inline constexpr int kUnauthenticated = 5;

// A job's state as an exit code: FAILED and CANCELLED are kFailed; QUEUED,
// RUNNING and SUCCEEDED kOk (an unknown state too: it is not a failure).
inline int ForJobState(std::string_view state) {
  return state == "FAILED" || state == "CANCELLED" ? kFailed : kOk;
}

// A failed chief call as an exit code: NOT_FOUND kNotFound; a wrong
// endpoint, UNAVAILABLE and DEADLINE_EXCEEDED kUnreachable; UNAUTHENTICATED
// and PERMISSION_DENIED kUnauthenticated; anything else kFailed.
inline int ForError(const absl::Status& status) {
  if (status.ok()) return kOk;
  if (absl::IsNotFound(status)) return kNotFound;
  if (IsWrongEndpoint(status)) return kUnreachable;
  if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) return kUnreachable;
  if (absl::IsUnauthenticated(status) || absl::IsPermissionDenied(status)) return kUnauthenticated;
  return kFailed;
}

}  // namespace brook::cli::job_exit
