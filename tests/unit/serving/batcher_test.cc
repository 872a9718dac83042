// Server-side batching over a real loaded export: concurrent requests are
// scored together and each gets exactly what scoring it alone gives; a bad
// request in a batch fails alone; a full queue refuses; shutdown answers
// what was queued.
#include "serving/batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "tensorflow/example.pb.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/serving_export.h"
#include "tests/testing/test_util.h"

namespace brook::serving {
namespace {

std::string Example(int64_t id, float x) {
  tf::Example ex;
  auto& f = *ex.mutable_features()->mutable_feature();
  f["c"].mutable_int64_list()->add_value(id);
  f["tag"].mutable_bytes_list()->add_value(id % 2 ? "red" : "blue");
  f["x"].mutable_float_list()->add_value(x);
  return ex.SerializeAsString();
}

class BatcherTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    BROOK_ASSERT_OK(testing::TrainAndExport(dir_->Join("data"), dir_->Join("export")));
  }
  static void TearDownTestSuite() { delete dir_; }
  void SetUp() override {
    auto repo = ModelRepository::Open({.path = dir_->Join("export")});
    ASSERT_TRUE(repo.ok()) << repo.status();
    repo_ = std::move(*repo);
  }
  float Alone(const std::string& example) {
    std::vector<float> out;
    const std::string_view one[] = {example};
    EXPECT_TRUE(repo_->Current()->Score(one, &out).ok());
    return out.empty() ? -1 : out[0];
  }

  static testing::TempDir* dir_;
  std::unique_ptr<ModelRepository> repo_;
};

testing::TempDir* BatcherTest::dir_ = nullptr;

TEST_F(BatcherTest, ConcurrentRequestsBatchAndEachGetsItsOwnScores) {
  std::atomic<int> batches{0}, most{0};
  BatcherOptions o;
  o.max_batch = 32;
  o.workers = 1;  // one worker: requests queue behind it and batch
  o.max_wait = absl::Milliseconds(1);
  o.on_batch = [&](int n, double) {
    batches.fetch_add(1);
    int m = most.load();
    while (n > m && !most.compare_exchange_weak(m, n)) {
    }
  };
  Batcher batcher(repo_.get(), o);
  constexpr int kClients = 8, kRequests = 40;
  std::vector<std::thread> clients;
  std::atomic<int> wrong{0}, failed{0};
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int r = 0; r < kRequests; ++r) {
        // 1 or 2 examples a request, each its own id and x.
        std::vector<std::string> ex = {Example(c * 7 + r, 0.01f * static_cast<float>(r))};
        if (r % 2) ex.push_back(Example(r, -0.5f));
        const std::vector<std::string> copy = ex;
        std::promise<absl::StatusOr<Prediction>> done;
        batcher.Submit(std::move(ex), [&](absl::StatusOr<Prediction> p) { done.set_value(p); });
        absl::StatusOr<Prediction> p = done.get_future().get();
        if (!p.ok() || p->scores.size() != copy.size()) {
          failed.fetch_add(1);
          continue;
        }
        for (size_t i = 0; i < copy.size(); ++i) {
          if (std::fabs(p->scores[i] - Alone(copy[i])) > 1e-6) wrong.fetch_add(1);
        }
        if (p->version != repo_->Current()->version()) wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LT(batches.load(), kClients * kRequests);  // some requests shared a batch
  EXPECT_GT(most.load(), 2);
  EXPECT_LE(most.load(), 32);
  EXPECT_EQ(batcher.stats().examples,
            static_cast<uint64_t>(kClients * (kRequests + kRequests / 2)));
}

TEST_F(BatcherTest, ABadRequestFailsAloneInItsBatch) {
  BatcherOptions o;
  o.workers = 1;
  o.max_wait = absl::Milliseconds(50);
  Batcher batcher(repo_.get(), o);
  // Four requests queued together: two have an example that does not parse.
  std::vector<std::promise<absl::StatusOr<Prediction>>> done(4);
  std::promise<void> hold;
  std::shared_future<void> held = hold.get_future().share();
  // Occupy the worker so the three queue up and go as one batch.
  std::promise<absl::StatusOr<Prediction>> first;
  std::promise<void> started;
  batcher.Submit({Example(1, 0)}, [&](absl::StatusOr<Prediction> p) {
    started.set_value();
    held.wait();
    first.set_value(p);
  });
  started.get_future().wait();
  batcher.Submit({Example(2, 0)}, [&](absl::StatusOr<Prediction> p) { done[0].set_value(p); });
  batcher.Submit(
      {Example(5, 0), "\x0a\x05garbage"},
      [&](absl::StatusOr<Prediction> p) { done[1].set_value(p); }, "instances");
  batcher.Submit({Example(3, 0)}, [&](absl::StatusOr<Prediction> p) { done[2].set_value(p); });
  tf::Example lacks_tag;
  (*lacks_tag.mutable_features()->mutable_feature())["c"].mutable_int64_list()->add_value(4);
  (*lacks_tag.mutable_features()->mutable_feature())["x"].mutable_float_list()->add_value(1);
  batcher.Submit({Example(6, 0), lacks_tag.SerializeAsString()},
                 [&](absl::StatusOr<Prediction> p) { done[3].set_value(p); });
  hold.set_value();
  EXPECT_TRUE(first.get_future().get().ok());
  auto a = done[0].get_future().get();
  auto b = done[1].get_future().get();
  auto c = done[2].get_future().get();
  auto d = done[3].get_future().get();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_NEAR(a->scores[0], Alone(Example(2, 0)), 1e-6);
  // Each bad request named by its own example index, the caller's error.
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << b.status();
  EXPECT_EQ(b.status().message().substr(0, 14), "instances[1]: ") << b.status();
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_EQ(d.status().message().substr(0, 13), "examples[1]: ") << d.status();
  EXPECT_NE(d.status().message().find("tag"), std::string::npos) << d.status();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NEAR(c->scores[0], Alone(Example(3, 0)), 1e-6);
  // The good ones still went as one batch (not request by request): the
  // held one, then one more; only scored examples count.
  EXPECT_EQ(batcher.stats().batches, 2u);
  EXPECT_EQ(batcher.stats().examples, 3u);
}

// A request that could never be queued beside others is refused at once,
// even by an idle server: scored alone it would take memory in proportion.
TEST_F(BatcherTest, ARequestLargerThanTheQueueIsRefused) {
  BatcherOptions o;
  o.max_queued_examples = 3;
  Batcher batcher(repo_.get(), o);
  std::promise<absl::StatusOr<Prediction>> big, fits;
  batcher.Submit(
      std::vector<std::string>(4, Example(1, 0)),
      [&](absl::StatusOr<Prediction> p) { big.set_value(p); }, "instances");
  auto r = big.get_future().get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("instances: 4 examples"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("--max-queued-examples"), std::string::npos) << r.status();
  batcher.Submit(std::vector<std::string>(3, Example(1, 0)),
                 [&](absl::StatusOr<Prediction> p) { fits.set_value(p); });
  auto ok = fits.get_future().get();
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->scores.size(), 3u);
}

TEST_F(BatcherTest, FullQueueRefusesAndShutdownAnswersTheQueued) {
  BatcherOptions o;
  o.workers = 1;
  o.max_queued_examples = 2;
  std::promise<void> hold, started;
  std::shared_future<void> held = hold.get_future().share();
  std::vector<absl::Status> results(4);
  std::thread release;
  {
    Batcher batcher(repo_.get(), o);
    batcher.Submit({Example(1, 0)}, [&](absl::StatusOr<Prediction> p) {
      started.set_value();
      held.wait();
      results[0] = p.status();
    });
    started.get_future().wait();  // the worker is busy; the rest queue
    batcher.Submit({Example(2, 0), Example(3, 0)},
                   [&](absl::StatusOr<Prediction> p) { results[1] = p.status(); });
    batcher.Submit({Example(4, 0)}, [&](absl::StatusOr<Prediction> p) { results[2] = p.status(); });
    EXPECT_EQ(results[2].code(), absl::StatusCode::kResourceExhausted) << results[2];
    EXPECT_EQ(batcher.stats().queued_examples, 2);
    // The destructor answers the queued request UNAVAILABLE and waits for
    // the batch being scored, which ends once `release` lets it.
    release = std::thread([&] {
      absl::SleepFor(absl::Milliseconds(50));
      hold.set_value();
    });
  }
  release.join();
  EXPECT_TRUE(results[0].ok()) << results[0];
  EXPECT_EQ(results[1].code(), absl::StatusCode::kUnavailable) << results[1];
}

}  // namespace
}  // namespace brook::serving
