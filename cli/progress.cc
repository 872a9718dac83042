#include "cli/progress.h"

#include <unistd.h>

#include <cmath>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace brook::cli {
namespace {

ProgressMode ResolveMode(ProgressMode m) {
  if (m != ProgressMode::kAuto) return m;
  return isatty(STDERR_FILENO) ? ProgressMode::kTty : ProgressMode::kLog;
}

// Bytes as "12.3 MB" (powers of 1000, as the counts).
std::string FormatBytes(double n) {
  if (n < 1e3) return absl::StrFormat("%.0f B", n);
  if (n < 1e6) return absl::StrFormat("%.1f KB", n / 1e3);
  if (n < 1e9) return absl::StrFormat("%.1f MB", n / 1e6);
  return absl::StrFormat("%.2f GB", n / 1e9);
}

}  // namespace

std::string FormatCount(double n) {
  if (!(n >= 0)) return "0";
  if (n < 1e3) return absl::StrFormat("%.0f", std::floor(n));
  const char* suffix = "K";
  double v = n / 1e3;
  if (n >= 1e9) {
    suffix = "G";
    v = n / 1e9;
  } else if (n >= 1e6) {
    suffix = "M";
    v = n / 1e6;
  }
  // Three significant digits: 1.23K, 12.3K, 123K.
  if (v < 10) return absl::StrFormat("%.2f%s", v, suffix);
  if (v < 100) return absl::StrFormat("%.1f%s", v, suffix);
  return absl::StrFormat("%.0f%s", v, suffix);
}

std::string FormatDuration(double seconds) {
  const int64_t s = std::llround(std::max(0.0, seconds));
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

std::string FormatProgressLine(const ProgressState& st) {
  std::string line = absl::StrCat(st.label, ": ", FormatCount(static_cast<double>(st.done)));
  double fraction = -1;
  if (st.total > 0) {
    absl::StrAppend(&line, " / ", FormatCount(static_cast<double>(st.total)), " ", st.unit);
    fraction = static_cast<double>(st.done) / static_cast<double>(st.total);
    absl::StrAppend(&line, absl::StrFormat(" (%.0f%%)", 100 * std::min(1.0, fraction)));
  } else {
    absl::StrAppend(&line, " ", st.unit);
    if (st.bytes_total > 0) {
      fraction = static_cast<double>(st.bytes_done) / static_cast<double>(st.bytes_total);
      absl::StrAppend(&line, absl::StrFormat(" (%.0f%% of %s)", 100 * std::min(1.0, fraction),
                                             FormatBytes(static_cast<double>(st.bytes_total))));
    }
  }
  if (st.seconds > 0) {
    absl::StrAppend(&line, ", ", FormatCount(static_cast<double>(st.done) / st.seconds), " ",
                    st.unit, "/s");
  }
  if (fraction >= 1) {
    absl::StrAppend(&line, ", done in ", FormatDuration(st.seconds));
  } else if (fraction > 0 && st.seconds > 0) {
    absl::StrAppend(&line, ", ETA ", FormatDuration(st.seconds * (1 - fraction) / fraction));
  }
  return line;
}

ProgressPrinter::ProgressPrinter(ProgressOptions options)
    : options_(std::move(options)),
      mode_(ResolveMode(options_.mode)),
      out_(options_.out != nullptr ? options_.out : &std::cerr) {}

ProgressPrinter::~ProgressPrinter() { Finish(); }

void ProgressPrinter::Start(absl::Time start, bool background) {
  start_ = start;
  last_print_ = start;
  if (!background || mode_ == ProgressMode::kOff) return;
  thread_ = std::thread([this] {
    const absl::Duration tick =
        mode_ == ProgressMode::kTty ? options_.tty_interval : absl::Milliseconds(500);
    while (!stop_.WaitForNotificationWithTimeout(tick)) Tick(absl::Now());
  });
}

ProgressState ProgressPrinter::Snapshot(absl::Time now) const {
  ProgressState st;
  st.label = options_.label;
  st.unit = options_.unit;
  st.done = items_.load(std::memory_order_relaxed);
  st.total = options_.total;
  st.bytes_done = bytes_.load(std::memory_order_relaxed);
  st.bytes_total = options_.bytes_total;
  st.seconds = absl::ToDoubleSeconds(now - start_);
  return st;
}

void ProgressPrinter::Tick(absl::Time now) {
  if (mode_ == ProgressMode::kOff || start_ == absl::InfinitePast()) return;
  const bool tty = mode_ == ProgressMode::kTty;
  if (now - last_print_ < (tty ? options_.tty_interval : options_.log_interval)) return;
  const std::string line = FormatProgressLine(Snapshot(now));
  if (tty) {
    *out_ << "\r\033[K" << line << std::flush;
  } else {
    *out_ << line << "\n" << std::flush;
  }
  last_print_ = now;
  printed_ = true;
}

void ProgressPrinter::Finish(absl::Time now) {
  if (finished_) return;
  finished_ = true;
  if (thread_.joinable()) {
    stop_.Notify();
    thread_.join();
  }
  if (mode_ == ProgressMode::kOff || start_ == absl::InfinitePast()) return;
  if (mode_ == ProgressMode::kTty) {
    *out_ << "\r\033[K" << FormatProgressLine(Snapshot(now)) << "\n" << std::flush;
  } else if (printed_) {
    *out_ << FormatProgressLine(Snapshot(now)) << "\n" << std::flush;
  }
}

}  // namespace brook::cli
