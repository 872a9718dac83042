#include "trainer/model/quality_metrics.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace brook::trainer {
namespace {

// A fixed set with tied predictions across classes (0.4 appears for two
// positives and two negatives). Expected values from scikit-learn 1.2.1 on
// this machine:
//   from sklearn.metrics import roc_auc_score, log_loss, accuracy_score
//   roc_auc_score(y, p) = 0.7222222222222223; log_loss(y, p) = 0.9959089496168287
//   accuracy_score(y, p >= 0.5) = 0.6666666666666666; p.mean() / y.mean() = 0.9415000000347694
// (p as float32, widened to float64).
const std::vector<float> kP = {0.1f, 0.4f, 0.35f, 0.8f,  0.4f, 0.9f,
                               0.2f, 0.4f, 0.65f, 0.05f, 0.4f, 0.999f};
const std::vector<float> kY = {0, 0, 1, 1, 1, 1, 0, 0, 1, 0, 1, 0};

TEST(MetricsTest, MatchScikitLearnOnAFixedSetWithTies) {
  EXPECT_NEAR(Auc(kP, kY), 0.7222222222222223, 1e-12);
  EXPECT_NEAR(LogLoss(kP, kY), 0.9959089496168287, 1e-9);
  EXPECT_NEAR(Accuracy(kP, kY), 0.6666666666666666, 1e-12);
  EXPECT_NEAR(Calibration(kP, kY), 0.9415000000347694, 1e-9);
}

TEST(MetricsTest, AucByHandIncludingTies) {
  // Hand count for kP/kY: positives beat 3, 5, 3 + 2 ties, 5, 5, 3 + 2 ties
  // negatives: (3 + 5 + 4 + 5 + 5 + 4) / 36 = 26/36.
  EXPECT_DOUBLE_EQ(Auc(kP, kY), 26.0 / 36.0);
  // Perfect, inverted, all tied.
  EXPECT_DOUBLE_EQ(Auc({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(Auc({0.9f, 0.8f, 0.2f, 0.1f}, {0, 0, 1, 1}), 0.0);
  EXPECT_DOUBLE_EQ(Auc({0.5f, 0.5f, 0.5f}, {0, 1, 1}), 0.5);
  // One tie between classes among otherwise ordered scores: 1 pair of 4 is half.
  EXPECT_DOUBLE_EQ(Auc({0.1f, 0.5f, 0.5f, 0.9f}, {0, 0, 1, 1}), 3.5 / 4.0);
}

TEST(MetricsTest, UndefinedCasesAreNaN) {
  EXPECT_TRUE(std::isnan(Auc({0.1f, 0.2f}, {1, 1})));  // one class
  EXPECT_TRUE(std::isnan(Auc({}, {})));
  EXPECT_TRUE(std::isnan(LogLoss({0.1f}, {1, 0})));  // size mismatch
  EXPECT_TRUE(std::isnan(Calibration({0.1f, 0.2f}, {0, 0})));
  EXPECT_TRUE(std::isnan(Accuracy({}, {})));
}

TEST(MetricsTest, LogLossClipsLikeScikitLearnAndAccuracyThresholdsAtHalf) {
  // p = 0 for a positive: clipped to 1e-15, loss -log(1e-15) = 34.538...
  EXPECT_NEAR(LogLoss({0.0f}, {1}), -std::log(1e-15), 1e-9);
  EXPECT_NEAR(LogLoss({0.5f, 0.5f}, {0, 1}), std::log(2.0), 1e-12);
  EXPECT_DOUBLE_EQ(Accuracy({0.5f, 0.49f, 0.5f}, {1, 0, 0}), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(Calibration({0.2f, 0.2f}, {1, 0}), 0.4f / 1.0);
}

TEST(StreamingAucTest, WithinItsStatedErrorOfTheExactAuc) {
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0, 1);
  std::vector<float> p, y;
  for (int i = 0; i < 20000; ++i) {
    const bool positive = rng() % 3 == 0;
    const double z = noise(rng) + (positive ? 1.2 : 0.0);
    p.push_back(static_cast<float>(1 / (1 + std::exp(-z))));
    y.push_back(positive);
  }
  const double exact = Auc(p, y);
  for (int buckets : {16, 256, 1 << 14}) {
    StreamingAuc s(buckets);
    // In two halves merged, as two trainers would report.
    StreamingAuc other(buckets);
    ASSERT_TRUE(s.Add(absl::MakeSpan(p).subspan(0, 10000), absl::MakeSpan(y).subspan(0, 10000)));
    ASSERT_TRUE(other.Add(absl::MakeSpan(p).subspan(10000), absl::MakeSpan(y).subspan(10000)));
    ASSERT_TRUE(s.Merge(other));
    EXPECT_EQ(s.positives() + s.negatives(), 20000u);
    EXPECT_LE(std::abs(s.Auc() - exact), s.ErrorBound()) << buckets;
    EXPECT_LT(s.ErrorBound(), 2.0 / buckets) << buckets;  // O(1/B) for smooth scores
  }
  StreamingAuc coarse(16);
  ASSERT_TRUE(coarse.Add(p, y));
  EXPECT_GT(std::abs(coarse.Auc() - exact), 1e-5);  // coarse buckets do lose accuracy
}

TEST(StreamingAucTest, EdgesAndMisuse) {
  StreamingAuc s(10);
  EXPECT_TRUE(std::isnan(s.Auc()));
  EXPECT_FALSE(s.Add({0.5f}, {1, 0}));
  ASSERT_TRUE(s.Add({-3.0f, 1.0f, 7.0f, std::nanf("")}, {0, 1, 1, 0}));  // clamped
  EXPECT_DOUBLE_EQ(s.Auc(), 1.0);
  EXPECT_DOUBLE_EQ(s.ErrorBound(), 0.0);
  StreamingAuc other(11);
  EXPECT_FALSE(s.Merge(other));
  s.Reset();
  EXPECT_EQ(s.positives(), 0u);
}

}  // namespace
}  // namespace brook::trainer
