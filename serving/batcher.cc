#include "serving/batcher.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace brook::serving {

Batcher::Batcher(const ModelRepository* repo, BatcherOptions options)
    : repo_(repo), options_(std::move(options)) {
  const int n = options_.workers < 1 ? 1 : options_.workers;
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { Work(); });
}

Batcher::~Batcher() { Drain(absl::ZeroDuration()); }

void Batcher::Drain(absl::Duration timeout) {
  std::deque<Request> left;
  {
    std::unique_lock<std::mutex> lock(mu_);
    draining_ = true;
    idle_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                   [this] { return queue_.empty() && running_ == 0; });
    stop_ = true;
    left.swap(queue_);
    queued_examples_ = 0;
  }
  queued_.notify_all();
  for (Request& r : left) r.done(absl::UnavailableError("the server is shutting down"));
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

void Batcher::Submit(std::vector<std::string> examples, Done done, std::string examples_name) {
  const auto n = static_cast<int64_t>(examples.size());
  absl::Status refused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_) {
      refused = absl::UnavailableError("the server is shutting down");
    } else if (n > options_.max_queued_examples) {
      // It could never be queued beside others; scored alone it would take
      // memory in proportion (a 2-byte {} is an example with --fill-missing).
      refused = absl::InvalidArgumentError(absl::StrCat(
          examples_name, ": ", n, " examples in one request, more than the server queues at once (",
          options_.max_queued_examples, ", brook serve --max-queued-examples); split it"));
    } else if (queued_examples_ > 0 && queued_examples_ + n > options_.max_queued_examples) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat("server overloaded: ", queued_examples_, " examples already queued (limit ",
                       options_.max_queued_examples, "); retry later"));
    } else {
      queued_examples_ += n;
      queue_.push_back({std::move(examples), std::move(done), std::move(examples_name)});
    }
  }
  if (refused.ok()) {
    queued_.notify_one();
  } else {
    done(refused);
  }
}

std::vector<Batcher::Request> Batcher::NextBatch() {
  std::vector<Request> batch;
  int64_t examples = 0;
  // Moves queued requests into the batch while they fit; mu_ held.
  auto take = [&] {
    while (!queue_.empty()) {
      const auto n = static_cast<int64_t>(queue_.front().examples.size());
      if (!batch.empty() && examples + n > options_.max_batch) break;
      examples += n;
      queued_examples_ -= n;
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
      if (examples >= options_.max_batch) break;
    }
  };
  std::unique_lock<std::mutex> lock(mu_);
  ++idle_workers_;
  queued_.wait(lock, [this] { return stop_ || !queue_.empty(); });
  --idle_workers_;
  if (stop_) return batch;
  take();
  // Waiting to fill the batch pays only when every other worker is busy:
  // an idle one takes what arrives next at once (with 16 closed-loop
  // clients and 2 workers, a wait would idle a core for nothing).
  if (batch.size() > 1 && examples < options_.max_batch && idle_workers_ == 0 &&
      options_.max_wait > absl::ZeroDuration()) {
    const auto deadline =
        std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(options_.max_wait);
    while (examples < options_.max_batch && !stop_) {
      if (queue_.empty() &&
          !queued_.wait_until(lock, deadline, [this] { return stop_ || !queue_.empty(); })) {
        break;
      }
      if (stop_) break;
      const size_t before = batch.size();
      take();
      if (batch.size() == before) break;  // the next request does not fit
    }
  }
  ++running_;
  return batch;
}

void Batcher::Work() {
  for (;;) {
    std::vector<Request> batch = NextBatch();
    if (batch.empty()) return;
    Run(std::move(batch));
  }
}

void Batcher::Run(std::vector<Request> batch) {
  const absl::Time start = absl::Now();
  std::shared_ptr<const Servable> servable = repo_->Current();
  std::vector<absl::StatusOr<Prediction>> results(batch.size(), absl::UnknownError(""));
  // The requests still to score: a request with an example that does not
  // parse is answered with its error and the rest scored again without it
  // (parsing comes before the model step, so that costs little).
  std::vector<size_t> live(batch.size());
  for (size_t r = 0; r < batch.size(); ++r) live[r] = r;
  std::vector<std::string_view> views;
  std::vector<float> scores;
  int scored = 0;
  while (!live.empty()) {
    views.clear();
    for (size_t r : live) {
      for (const std::string& e : batch[r].examples) views.push_back(e);
    }
    size_t bad = views.size();
    absl::Status s = servable->Score(views, &scores, &bad);
    if (s.ok()) {
      size_t at = 0;
      for (size_t r : live) {
        Prediction p;
        p.version = servable->version();
        const size_t n = batch[r].examples.size();
        p.scores.assign(scores.begin() + static_cast<std::ptrdiff_t>(at),
                        scores.begin() + static_cast<std::ptrdiff_t>(at + n));
        at += n;
        results[r] = std::move(p);
      }
      scored += static_cast<int>(views.size());
      break;
    }
    if (bad < views.size()) {
      size_t at = 0;
      for (size_t i = 0; i < live.size(); ++i) {
        const Request& req = batch[live[i]];
        if (bad < at + req.examples.size()) {
          results[live[i]] = absl::Status(
              s.code(), absl::StrCat(req.examples_name, "[", bad - at, "]: ", s.message()));
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
        at += req.examples.size();
      }
      continue;
    }
    // Not an example's fault (a lookup or the model step failed): each
    // request alone, so one that can score does.
    for (size_t r : live) {
      std::vector<std::string_view> own(batch[r].examples.begin(), batch[r].examples.end());
      Prediction p;
      p.version = servable->version();
      absl::Status one = live.size() == 1 ? s : servable->Score(own, &p.scores);
      if (one.ok()) {
        scored += static_cast<int>(own.size());
        results[r] = std::move(p);
      } else {
        results[r] = one;
      }
    }
    break;
  }
  // Counted before the replies go out: a client that has its reply sees
  // its examples in the stats and metrics.
  const int n = scored;
  if (options_.on_batch && n > 0) {
    options_.on_batch(n, absl::ToDoubleSeconds(absl::Now() - start));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.batches;
    stats_.examples += static_cast<uint64_t>(n);
  }
  for (size_t i = 0; i < batch.size(); ++i) batch[i].done(std::move(results[i]));
  bool idle = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
    idle = draining_ && running_ == 0 && queue_.empty();
  }
  if (idle) idle_.notify_all();
}

Batcher::Stats Batcher::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.queued_examples = queued_examples_;
  return s;
}

}  // namespace brook::serving
