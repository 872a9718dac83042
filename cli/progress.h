// Progress of a long command (data gen, convert, stats, ...) on stderr. On a
// terminal a live line rewritten in place (done/total when known, rate, ETA);
// otherwise a plain log line every few seconds, and nothing at all for a run
// shorter than that (so a quick `--json` run's output stays clean).
//
//   ProgressPrinter p({.label = "brook data convert", .unit = "rows"});
//   options.progress_items = p.items();   // the worker bumps these
//   p.Start();
//   ... work ...
//   p.Finish();
//
// The work counts into two atomics the printer owns (items, and bytes when
// the total is only known in bytes); a background thread started by Start()
// reads them and prints. items()/bytes() may be bumped from any thread
// (relaxed); Start/Finish/Tick are for one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace brook::cli {

// One progress snapshot. A zero total is unknown.
struct ProgressState {
  std::string label;  // e.g. "brook data convert"
  std::string unit;   // plural, e.g. "rows"
  int64_t done = 0;
  int64_t total = 0;
  int64_t bytes_done = 0;
  int64_t bytes_total = 0;  // used for percent and ETA when total is unknown
  double seconds = 0;       // since the start
};

// "brook data gen: 1.20M / 3.00M examples (40%), 410K examples/s, ETA 4s".
// Percent and ETA come from items when their total is known, else from
// bytes; without either, just the count and the rate.
std::string FormatProgressLine(const ProgressState& state);
// 999 -> "999", 12345 -> "12.3K", 3000000 -> "3.00M".
std::string FormatCount(double n);
// Seconds as "42s", "3m05s", "2h07m".
std::string FormatDuration(double seconds);

enum class ProgressMode { kAuto, kTty, kLog, kOff };

struct ProgressOptions {
  std::string label;
  std::string unit = "records";
  int64_t total = 0;
  int64_t bytes_total = 0;
  // kAuto: kTty if stderr is a terminal, else kLog.
  ProgressMode mode = ProgressMode::kAuto;
  absl::Duration tty_interval = absl::Milliseconds(250);
  absl::Duration log_interval = absl::Seconds(5);
  std::ostream* out = nullptr;  // nullptr: std::cerr
};

class ProgressPrinter {
 public:
  explicit ProgressPrinter(ProgressOptions options);
  ~ProgressPrinter();  // Finish() if not called
  ProgressPrinter(const ProgressPrinter&) = delete;
  ProgressPrinter& operator=(const ProgressPrinter&) = delete;

  std::atomic<int64_t>* items() { return &items_; }
  std::atomic<int64_t>* bytes() { return &bytes_; }

  // Starts the clock at `start` and, with `background`, the printing thread
  // (tests pass false and call Tick themselves).
  void Start(absl::Time start = absl::Now(), bool background = true);
  // Stops the thread. A live line is completed (final figures and a
  // newline); in log mode a last line is printed only if one was before.
  void Finish(absl::Time now = absl::Now());

  // What the thread does every tick: prints when an interval has passed.
  void Tick(absl::Time now);
  ProgressMode mode() const { return mode_; }

 private:
  ProgressState Snapshot(absl::Time now) const;

  // Constant after construction.
  const ProgressOptions options_;
  const ProgressMode mode_;
  std::ostream* const out_;

  std::atomic<int64_t> items_{0};
  std::atomic<int64_t> bytes_{0};
  // Touched by the printing thread, or by the caller when no thread runs.
  absl::Time start_ = absl::InfinitePast();
  absl::Time last_print_ = absl::InfinitePast();
  bool printed_ = false;
  bool finished_ = false;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace brook::cli
