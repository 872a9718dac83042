// WorkLeases <-> brook.v1.WorkLeasesState: the persisted form of a lease
// table (inside a job's record, job_queue_state.h). Only the chief's state
// code includes this; work_leases.h knows no protobuf.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/core/work_leases.h"

namespace brook::v1 {
class WorkLeasesState;
}  // namespace brook::v1

namespace brook::chief {

class WorkLeasesCodec {
 public:
  // Everything but the heartbeat clocks.
  static v1::WorkLeasesState ToState(const WorkLeases& leases);
  // Rebuilds a table from ToState's state. Leases stay with their holders;
  // every trainer's heartbeat clock starts at `now`. DATA_LOSS for a state
  // that is not self-consistent (unknown holder, bad offsets, queue entries).
  static absl::StatusOr<std::unique_ptr<WorkLeases>> FromState(const v1::WorkLeasesState& state,
                                                               absl::Time now);
};

}  // namespace brook::chief
