// How the job CLI shows jobs (`brook status`, `brook list`, `brook logs`):
// pure functions of a JobStatus and the current time, so that every line a
// user sees is unit-tested.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "brook/v1/chief.pb.h"

namespace brook::chief {

// "SUCCEEDED", "FAILED", "CANCELLED" (what the chief sends as JobStatus.state).
bool IsFinishedState(std::string_view state);

// "42s", "3m05s", "2h07m", "3d04h". Negative durations count as zero.
std::string ShortDuration(absl::Duration d);
// "999", "12.3k", "1.23M", "4.56G".
std::string FormatCount(double n);

// Time left for a running job, from its progress and its current rate:
// total examples ~= examples_trained / progress, left at examples_per_second;
// without a rate, from the time elapsed since it started:
// elapsed * (1 - progress) / progress. Zero once progress reaches 1; nullopt
// when there is nothing to go on (no progress yet, not started, finished).
std::optional<absl::Duration> EstimateEta(const v1::JobStatus& job, absl::Time now);

// The one live line of `brook status --watch`, e.g.
//   RUNNING 42.0% epoch 2/4 | 1.23M examples 12.3k/s ETA 3m05s |
//   loss 0.4321 AUC train 0.8765 eval 0.8701 | units 10 done 2 leased 20 left
// A queued job shows its place instead of rates; a finalizing one says so.
std::string ProgressLine(const v1::JobStatus& job, absl::Time now);

// What `brook status` prints when the job has ended (or for a one-shot
// status): identity, state and duration, training and eval metrics, the
// export dir, checkpoints and the chief's message. Lines end with '\n'.
// The AUC line labels both AUCs, e.g.
//   AUC:        train 0.8765 (last 64K-128K examples)  eval 0.8701 (step 4000)
std::string JobSummary(const v1::JobStatus& job, absl::Time now);

// The AUC line's text: "train 0.8765 (last 64K-128K examples)  eval 0.8701
// (step 4000)"; "-" for an AUC not reported yet ("eval - (not yet)").
std::string AucLine(const v1::JobStatus& job);

// Columns aligned to their widest cell, two spaces apart; cells in
// right_align[i] columns are right-aligned (missing entries: left). Every
// line ends with '\n'; no trailing blanks.
std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows,
                        const std::vector<bool>& right_align = {});

// `brook list`: ID NAME STATE PRIORITY PROGRESS EXAMPLES TRAIN AUC EVAL AUC
// AGE. An AUC not reported yet is "-"; AGE is since submit.
std::string JobsTable(const google::protobuf::RepeatedPtrField<v1::JobStatus>& jobs,
                      absl::Time now);

// `brook logs`: one "TIME  TEXT" line per event (UTC, RFC 3339 with ms),
// after a note when older events were dropped.
std::string EventLog(const v1::JobStatus& job);
// One event's line of it, with its '\n'.
std::string EventLine(const v1::ChiefJobEvent& event);

// `brook logs --follow`: which of `job`'s events are new when the first
// `*seen` (counted from the job's first event, dropped ones included) were
// shown: events[first..] are, and `missed` were dropped by the chief before
// they could be shown. Advances *seen past them.
struct NewEvents {
  int first = 0;
  uint64_t missed = 0;
};
NewEvents FollowEvents(const v1::JobStatus& job, uint64_t* seen);

// A message as one line of JSON, the `-o json` of the job CLI: an object
// with every field (zeros too) under its proto name (snake_case), in proto
// order. Integers of every width are JSON numbers (not proto3 JSON's quoted
// 64-bit strings), a non-finite double is null, bytes are base64, an enum is
// its value's name, a map an object keyed by the key's text. README, "Job
// CLI JSON", promises the shape.
std::string ToJson(const google::protobuf::Message& message);

}  // namespace brook::chief
