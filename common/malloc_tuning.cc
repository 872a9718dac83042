#include "common/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace brook {
namespace {

std::mutex& TuningMutex() {
  static std::mutex mu;
  return mu;
}

MallocTuning& LastTuning() {
  static MallocTuning t;
  return t;
}

// Why TuneMalloc leaves the allocator alone, or "" to tune it.
std::string SkipReason() {
  if (const char* preload = std::getenv("LD_PRELOAD"); preload != nullptr && *preload != '\0') {
    if (std::strstr(preload, "malloc") != nullptr) {
      return absl::StrCat("LD_PRELOAD=", preload);
    }
  }
  if (const char* tunables = std::getenv("GLIBC_TUNABLES");
      tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) {
    return absl::StrCat("glibc, GLIBC_TUNABLES=", tunables);
  }
  if (const char* off = std::getenv("BROOK_MALLOC_TUNING");
      off != nullptr && std::strcmp(off, "0") == 0) {
    return "glibc default (BROOK_MALLOC_TUNING=0)";
  }
  return "";
}

}  // namespace

MallocTuning TuneMalloc() {
  std::lock_guard<std::mutex> lock(TuningMutex());
  MallocTuning& t = LastTuning();
  t = MallocTuning{};
  t.description = SkipReason();
  if (!t.description.empty()) return t;
  // Setting either value also turns off glibc's dynamic threshold, which
  // would otherwise lower the trim threshold again.
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMallocMmapThreshold)) != 1 ||
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(kMallocTrimThreshold)) != 1) {
    t.description = "glibc default (mallopt refused the thresholds)";
    return t;
  }
  t.applied = true;
  t.mmap_threshold = kMallocMmapThreshold;
  t.trim_threshold = kMallocTrimThreshold;
  t.description = absl::StrCat("glibc, tuned by brook: mmap_threshold=", kMallocMmapThreshold >> 20,
                               " MiB trim_threshold=", kMallocTrimThreshold >> 20, " MiB");
  return t;
}

bool TrimMalloc() {
  // Not SkipReason(): a glibc left at its defaults by the user is still
  // glibc, and trimming it is as safe.
  if (const char* preload = std::getenv("LD_PRELOAD");
      preload != nullptr && std::strstr(preload, "malloc") != nullptr) {
    return false;
  }
  malloc_trim(0);
  return true;
}

std::string MallocDescription() {
  std::lock_guard<std::mutex> lock(TuningMutex());
  const MallocTuning& t = LastTuning();
  if (!t.description.empty()) return t.description;
  std::string env = SkipReason();
  return env.empty() ? "glibc default" : env;
}

}  // namespace brook
