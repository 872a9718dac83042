// The input pipeline's autotuner, as one pure function so its rule is tested
// on its own. Every kAutotuneEveryBatches batches the consumer samples how
// each stage spent the interval and applies at most one change:
//
//  1. Nothing, unless the consumer (the trainer) waited for data at least
//     kConsumerWaitFraction of the interval.
//  2. Parse workers busy at least kParseBusyFraction of the interval (per
//     worker): parsing is the slowest stage. Add a parse worker (if the
//     thread count is autotuned and below its max).
//  3. Else parse workers blocked on the prefetch window at least
//     kParseBlockedFraction: a slow batch holds up the finished ones behind
//     it (output is in order). Grow prefetch by one (if autotuned, below max).
//  4. Else the workers were starved: the single read thread is the slowest
//     stage. Nothing to add; it shows as parse.wait_input_seconds.
//
// Threads are only ever added, up to max_parse_threads and at most one per
// core (busy is wall time: on an oversubscribed machine a descheduled worker
// still looks busy, and parsing is CPU-bound, so more workers than cores
// would not help). An idle worker costs a blocked thread, not CPU. Internal
// to trainer/input.
#pragma once

#include <cstdint>

namespace brook::input::internal {

inline constexpr int kAutotuneEveryBatches = 8;
inline constexpr double kConsumerWaitFraction = 0.10;
inline constexpr double kParseBusyFraction = 0.80;
inline constexpr double kParseBlockedFraction = 0.10;

struct AutotuneSignals {
  uint64_t interval_ns = 0;           // wall time since the last decision
  uint64_t consumer_wait_ns = 0;      // Next() blocked on the window
  uint64_t parse_busy_ns = 0;         // summed over workers
  uint64_t parse_wait_output_ns = 0;  // workers blocked on the window, summed
  int parse_threads = 1;              // workers during the interval
  bool tune_parse_threads = false;
  int max_parse_threads = 1;
  bool tune_prefetch = false;
  int prefetch = 1;
  int max_prefetch = 1;
};

enum class AutotuneAction { kNone, kAddParseThread, kGrowPrefetch };

inline AutotuneAction DecideAutotune(const AutotuneSignals& s) {
  if (s.interval_ns == 0 || s.parse_threads <= 0) return AutotuneAction::kNone;
  const double interval = static_cast<double>(s.interval_ns);
  if (static_cast<double>(s.consumer_wait_ns) < kConsumerWaitFraction * interval) {
    return AutotuneAction::kNone;
  }
  const double worker_time = interval * s.parse_threads;
  if (static_cast<double>(s.parse_busy_ns) >= kParseBusyFraction * worker_time) {
    return s.tune_parse_threads && s.parse_threads < s.max_parse_threads
               ? AutotuneAction::kAddParseThread
               : AutotuneAction::kNone;
  }
  if (static_cast<double>(s.parse_wait_output_ns) >= kParseBlockedFraction * worker_time) {
    return s.tune_prefetch && s.prefetch < s.max_prefetch ? AutotuneAction::kGrowPrefetch
                                                          : AutotuneAction::kNone;
  }
  return AutotuneAction::kNone;
}

}  // namespace brook::input::internal
