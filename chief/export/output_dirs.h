// Where a job writes (export.dir, checkpoint.dir) must be its own: the
// chief writes DIR/<job id>/ under each, and neither DIR may be, or lie
// inside, an export or a checkpoint of another run, or be the other one.
// Checked by `brook submit` (--dry-run too) and again by the chief.
#pragma once

#include "absl/status/status.h"
#include "chief/job/job_spec.h"

namespace brook::chief {

// FAILED_PRECONDITION naming the field and the export or checkpoint it is
// in. With `create`, makes both dirs (a dir the chief cannot write fails
// the submit, not the job's end); without, a dir that does not exist yet is
// fine as long as no ancestor is another run's.
absl::Status CheckOutputDirs(const JobSpec& spec, bool create);

}  // namespace brook::chief
