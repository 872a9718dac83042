// Server-side batching: concurrent predict requests are scored together in
// one model step by a pool of workers. A free worker takes every queued
// request up to max_batch examples; when it took more than one (the queue
// grew while the workers were busy: load) and no other worker is idle, it
// waits up to max_wait for more to fill the batch. A lone request runs at once, so batching costs a
// lone client no latency. A request is never split: one larger than max_batch runs alone.
//
// Every batch scores on the servable current when it starts. Examples are
// checked there, not before: a request with one that does not parse fails
// alone, INVALID_ARGUMENT naming it ("instances[3]: ..."), and the batch is
// scored again without it.
//
//   Batcher b(repo, {.max_batch = 64, .workers = 2});
//   b.Submit(std::move(examples), [](absl::StatusOr<Prediction> p) { ... });
//
// Thread-safe. Drain() answers what is queued and stops; the destructor
// fails queued requests with UNAVAILABLE and waits for the batches being
// scored.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <condition_variable>
#include <mutex>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "serving/model_repository.h"

namespace brook::serving {

struct BatcherOptions {
  int max_batch = 64;  // examples
  absl::Duration max_wait = absl::Milliseconds(2);
  int workers = 2;
  // Examples queued (not yet in a batch) beyond which Submit refuses with
  // RESOURCE_EXHAUSTED: load shedding instead of an unbounded queue. A
  // single request of more is INVALID_ARGUMENT (it would never fit).
  int64_t max_queued_examples = 1 << 16;
  // After every batch, from the worker: its examples and seconds scoring.
  std::function<void(int examples, double seconds)> on_batch;
};

struct Prediction {
  std::vector<float> scores;  // one per example
  int64_t version = 0;        // the version that scored them
};

class Batcher {
 public:
  using Done = std::function<void(absl::StatusOr<Prediction>)>;

  Batcher(const ModelRepository* repo, BatcherOptions options);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues the examples (serialized tf.train.Example); `done` is called
  // once, from a worker (or from here when refused). `examples_name` names
  // them in errors: "instances" gives "instances[3]: ...".
  void Submit(std::vector<std::string> examples, Done done, std::string examples_name = "examples");

  // A graceful stop: Submit refuses from now on (UNAVAILABLE); what is
  // queued is scored, for up to `timeout` (then failed UNAVAILABLE); the
  // workers are joined. The destructor does the same with no wait.
  void Drain(absl::Duration timeout);

  struct Stats {
    uint64_t batches = 0;
    uint64_t examples = 0;
    int64_t queued_examples = 0;
  };
  Stats stats() const;

 private:
  struct Request {
    std::vector<std::string> examples;
    Done done;
    std::string examples_name;
  };
  void Work();
  // Takes the next batch's requests; empty once stopping.
  std::vector<Request> NextBatch();
  void Run(std::vector<Request> batch);

  const ModelRepository* const repo_;
  const BatcherOptions options_;
  // std::mutex, not absl::Mutex: TSan sees it (docs/decisions.md). Guards
  // everything below but workers_.
  mutable std::mutex mu_;
  std::condition_variable queued_;  // a request arrived, or stop_
  std::condition_variable idle_;    // the queue emptied and no batch runs
  std::deque<Request> queue_;
  int64_t queued_examples_ = 0;
  bool draining_ = false;  // Submit refuses
  bool stop_ = false;      // workers exit
  int running_ = 0;        // batches being scored
  int idle_workers_ = 0;   // workers waiting for a request
  Stats stats_;
  std::vector<std::thread> workers_;
};

}  // namespace brook::serving
