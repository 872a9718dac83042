// CPU time of the whole process, for tools that report how busy they kept
// the machine (benchmarks, `brook data synthetic`).
#pragma once

#include <time.h>

namespace brook {

// Seconds of CPU (user + system) this process has used so far, all threads
// together; 0 if the clock cannot be read. Loopback TCP's kernel work runs
// in the sending and receiving threads, so it is counted too.
inline double ProcessCpuSeconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace brook
