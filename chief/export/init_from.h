// A job's warm start (job spec `init_from`, issue 23): which of a finished
// job's tables and dense variables a new job takes, checked against the
// source (an export or a complete checkpoint) and the new job's model, and
// the load itself onto the new job's tables. No network in here: the load
// goes through a PsClient.
//
// Thread-compatible (no shared state).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chief/job/job_spec.h"
#include "ps/client/ps_client.h"

namespace brook::chief {

struct InitFromPlan {
  std::string checkpoint_dir;  // the export's tables/, or the checkpoint itself
  bool is_export = false;
  std::string from_prefix;  // the source job's "<job id>/"
  // Model table and dense variable names to load, sorted.
  std::vector<std::string> names;
};

// Checks spec.init_from against its source and the spec's model:
// InvalidArgument naming the field and YAML line when the path is neither
// an export (manifest.json, read and verified) nor a complete checkpoint,
// when a listed name is not one of the model's or not in the source, or
// when a table's dim (a dense variable's size) differs from the model's.
// Without tables listed: every model table and dense variable the source
// holds (none in common is an error too).
// REQUIRES: !spec.init_from.path.empty().
absl::StatusOr<InitFromPlan> PlanInitFrom(const JobSpec& spec);

// What LoadInitFrom loaded: one line for the job's events.
struct InitFromResult {
  std::string event;
  uint64_t rows = 0;
};

// Creates the job's tables and dense variables with its own options
// (Trainer::Setup) through `job_ps` (the job's PrefixedPsClient), then
// imports `plan` into them. Safe to run again after a failure: the import
// replaces the rows it loads.
absl::StatusOr<InitFromResult> LoadInitFrom(ps::PsClient* job_ps, const JobSpec& spec,
                                            const InitFromPlan& plan);

}  // namespace brook::chief
