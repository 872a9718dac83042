// Work a benchmark must undo even when it is interrupted: `brook bench ps
// --target` creates a table on someone's running PS, and Ctrl-C used to
// leave it there (with a data dir, across restarts too).
//
// Install() blocks SIGINT and SIGTERM in the calling thread, so every thread
// started after it (gRPC's included) inherits the mask, and starts a thread
// that waits for them: on one it runs the registered cleanups, newest first,
// says so on stderr and exits 128 + the signal. Call it before any other
// thread starts. Thread-safe.
#pragma once

#include <functional>

namespace brook::bench {

class InterruptCleanup {
 public:
  static InterruptCleanup& Install();
  // Registers `fn` (it must be safe to run on another thread while the
  // benchmark goes on); Remove(id) once the work is undone.
  int Add(std::function<void()> fn);
  void Remove(int id);

 private:
  InterruptCleanup();
  void Wait();
};

}  // namespace brook::bench
