#include "bench/interrupt_cleanup.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <map>
#include <mutex>
#include <thread>

namespace brook::bench {
namespace {

std::mutex mu;
std::map<int, std::function<void()>>* cleanups = nullptr;  // guarded by mu; never freed
int next_id = 0;

}  // namespace

InterruptCleanup::InterruptCleanup() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  cleanups = new std::map<int, std::function<void()>>();
  std::thread([this] { Wait(); }).detach();
}

InterruptCleanup& InterruptCleanup::Install() {
  static InterruptCleanup* instance = new InterruptCleanup();
  return *instance;
}

int InterruptCleanup::Add(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu);
  cleanups->emplace(next_id, std::move(fn));
  return next_id++;
}

void InterruptCleanup::Remove(int id) {
  std::lock_guard<std::mutex> lock(mu);
  cleanups->erase(id);
}

void InterruptCleanup::Wait() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  std::cerr << "\nbrook bench: " << (sig == SIGINT ? "interrupted" : "terminated")
            << "; cleaning up\n";
  std::map<int, std::function<void()>> todo;
  {
    std::lock_guard<std::mutex> lock(mu);
    todo.swap(*cleanups);
  }
  for (auto it = todo.rbegin(); it != todo.rend(); ++it) it->second();
  std::cerr.flush();
  _exit(128 + sig);
}

}  // namespace brook::bench
