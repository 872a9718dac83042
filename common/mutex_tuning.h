// TuneMutexes: turns off abseil's Mutex deadlock detector in a `brook`
// process.
//
// Why: Debian builds abseil without NDEBUG, so its debug-mode default holds:
// every absl::Mutex acquisition (gRPC's own locks are absl::Mutex) records
// the lock order in a global graph to report cycles. Under PS load that
// graph upkeep alone (GraphCycles::GetId, InsertEdge, RemoveNode) took ~1.6%
// of the process's CPU (perf of `brook bench ps`), paid by every RPC; an
// optimized abseil build has it off.
//
// Tests keep the detector (they do not call this): lock-order bugs still
// fail there. BROOK_MUTEX_DEADLOCK_DETECTION=1 keeps it in `brook` too.
//
// Call first thing in main(), before threads start.
#pragma once

#include <string>

namespace brook {

// Returns what the process runs with, e.g. for logs.
std::string TuneMutexes();

}  // namespace brook
