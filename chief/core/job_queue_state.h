// JobQueue <-> brook.v1.ChiefJobRecord: the persisted form of each job
// (chief_state_store.h writes the records), and the wire form of a job's
// checkpoints, eval and events, which the Chief API shares. Only the chief's
// state code and its gRPC replies include this; job_queue.h knows no protobuf.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/core/job_queue.h"

namespace brook::v1 {
class ChiefCheckpoint;
class ChiefEvalResult;
class ChiefJobEvent;
class ChiefJobRecord;
}  // namespace brook::v1

namespace brook::chief {

void ToProto(const JobCheckpoint& checkpoint, v1::ChiefCheckpoint* out);
void ToProto(const JobEval& eval, v1::ChiefEvalResult* out);
void ToProto(const JobEvent& event, v1::ChiefJobEvent* out);

class JobQueueCodec {
 public:
  // The record of one job (NOT_FOUND for an unknown id).
  static absl::StatusOr<v1::ChiefJobRecord> ToRecord(const JobQueue& queue,
                                                     const std::string& job_id);
  // Rebuilds a queue from ToRecord's records (any order). Assigned
  // trainers rejoin the pool with heartbeat clocks at `now`. A record that is
  // not self-consistent, or that clashes with another (a second active job
  // of a name, a trainer in two jobs), is restored as a FAILED job whose
  // message says why: one bad record never stops the chief.
  static absl::StatusOr<std::unique_ptr<JobQueue>> Restore(
      const JobQueueOptions& options, const std::vector<v1::ChiefJobRecord>& records,
      uint64_t next_seq, absl::Time now);

 private:
  static absl::StatusOr<std::unique_ptr<JobQueue::Job>> JobFromRecord(
      const v1::ChiefJobRecord& record, absl::Time now);
  // What Restore keeps of a record it cannot restore: a FAILED job saying why.
  static std::unique_ptr<JobQueue::Job> UnrestorableJob(const v1::ChiefJobRecord& record,
                                                        const std::string& why, absl::Time now);
};

}  // namespace brook::chief
