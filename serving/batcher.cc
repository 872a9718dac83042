#include "serving/batcher.h"

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
    absl::MutexLock lock(&mu_);
    draining_ = true;
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](Batcher* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->mu_) {
                               return b->queue_.empty() && b->running_ == 0;
                             },
                             this),
                         timeout);
    stop_ = true;
    left.swap(queue_);
    queued_examples_ = 0;
  }
  for (Request& r : left) r.done(absl::UnavailableError("the server is shutting down"));
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

void Batcher::Submit(std::vector<std::string> examples, Done done) {
  const auto n = static_cast<int64_t>(examples.size());
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    if (draining_) {
      refused = absl::UnavailableError("the server is shutting down");
    } else if (queued_examples_ > 0 && queued_examples_ + n > options_.max_queued_examples) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat("server overloaded: ", queued_examples_, " examples already queued (limit ",
                       options_.max_queued_examples, "); retry later"));
    } else {
      queued_examples_ += n;
      queue_.push_back({std::move(examples), std::move(done)});
      return;
    }
  }
  done(refused);
}

std::vector<Batcher::Request> Batcher::NextBatch() {
  std::vector<Request> batch;
  int64_t examples = 0;
  auto take = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Batcher* b)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->mu_) { return b->stop_ || !b->queue_.empty(); },
      this));
  if (stop_) return batch;
  take();
  ++running_;
  if (batch.size() > 1 && examples < options_.max_batch &&
      options_.max_wait > absl::ZeroDuration()) {
    const absl::Time deadline = absl::Now() + options_.max_wait;
    while (examples < options_.max_batch && !stop_) {
      if (queue_.empty() &&
          !mu_.AwaitWithDeadline(absl::Condition(
                                     +[](Batcher* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->mu_) {
                                       return b->stop_ || !b->queue_.empty();
                                     },
                                     this),
                                 deadline)) {
        break;
      }
      const size_t before = batch.size();
      take();
      if (batch.size() == before) break;  // the next request does not fit
    }
  }
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
  std::vector<std::string_view> views;
  for (const Request& r : batch) {
    for (const std::string& e : r.examples) views.push_back(e);
  }
  std::vector<float> scores;
  absl::Status s = servable->Score(views, &scores);
  if (s.ok()) {
    size_t at = 0;
    for (Request& r : batch) {
      Prediction p;
      p.version = servable->version();
      p.scores.assign(scores.begin() + static_cast<std::ptrdiff_t>(at),
                      scores.begin() + static_cast<std::ptrdiff_t>(at + r.examples.size()));
      at += r.examples.size();
      r.done(std::move(p));
    }
  } else {
    // One request's bad example must not fail the others: score each alone.
    for (Request& r : batch) {
      std::vector<std::string_view> own(r.examples.begin(), r.examples.end());
      Prediction p;
      p.version = servable->version();
      absl::Status one = batch.size() == 1 ? s : servable->Score(own, &p.scores);
      if (one.ok()) {
        r.done(std::move(p));
      } else {
        r.done(one);
      }
    }
  }
  const auto n = static_cast<int>(views.size());
  if (options_.on_batch) options_.on_batch(n, absl::ToDoubleSeconds(absl::Now() - start));
  absl::MutexLock lock(&mu_);
  --running_;
  ++stats_.batches;
  stats_.examples += static_cast<uint64_t>(n);
}

Batcher::Stats Batcher::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.queued_examples = queued_examples_;
  return s;
}

}  // namespace brook::serving
