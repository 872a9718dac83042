#include "trainer/model/quality_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace brook::trainer {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool Positive(float label) { return label >= 0.5f; }

bool Usable(absl::Span<const float> p, absl::Span<const float> y) {
  return p.size() == y.size() && !p.empty();
}

}  // namespace

double Auc(absl::Span<const float> predictions, absl::Span<const float> labels) {
  if (!Usable(predictions, labels)) return kNaN;
  std::vector<uint32_t> order(predictions.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    // NaN sorts lowest so that the order is strict and weak.
    const float x = predictions[a], y = predictions[b];
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && !std::isnan(y);
    return x < y;
  });
  // Walk groups of equal predictions in increasing order: each positive
  // beats every negative below its group and ties with those inside it.
  double wins = 0, negatives_below = 0, positives = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    double pos = 0, neg = 0;
    const float v = predictions[order[i]];
    while (j < order.size() &&
           (predictions[order[j]] == v || (std::isnan(v) && std::isnan(predictions[order[j]])))) {
      (Positive(labels[order[j]]) ? pos : neg) += 1;
      ++j;
    }
    wins += pos * negatives_below + 0.5 * pos * neg;
    negatives_below += neg;
    positives += pos;
    i = j;
  }
  if (positives == 0 || negatives_below == 0) return kNaN;
  return wins / (positives * negatives_below);
}

double LogLoss(absl::Span<const float> predictions, absl::Span<const float> labels) {
  if (!Usable(predictions, labels)) return kNaN;
  constexpr double kEps = 1e-15;
  double sum = 0;
  for (size_t i = 0; i < predictions.size(); ++i) {
    const double p = std::clamp(static_cast<double>(predictions[i]), kEps, 1.0 - kEps);
    const double y = labels[i];
    sum -= y * std::log(p) + (1.0 - y) * std::log(1.0 - p);
  }
  return sum / static_cast<double>(predictions.size());
}

double Accuracy(absl::Span<const float> predictions, absl::Span<const float> labels) {
  if (!Usable(predictions, labels)) return kNaN;
  size_t right = 0;
  for (size_t i = 0; i < predictions.size(); ++i) {
    right += (predictions[i] >= 0.5f) == Positive(labels[i]);
  }
  return static_cast<double>(right) / static_cast<double>(predictions.size());
}

double Calibration(absl::Span<const float> predictions, absl::Span<const float> labels) {
  if (!Usable(predictions, labels)) return kNaN;
  double p = 0, y = 0;
  for (size_t i = 0; i < predictions.size(); ++i) {
    p += predictions[i];
    y += labels[i];
  }
  if (y == 0) return kNaN;
  return p / y;
}

StreamingAuc::StreamingAuc(int buckets)
    : pos_(std::max(buckets, 1), 0), neg_(std::max(buckets, 1), 0) {}

bool StreamingAuc::Add(absl::Span<const float> predictions, absl::Span<const float> labels) {
  if (predictions.size() != labels.size()) return false;
  const size_t buckets = pos_.size();
  for (size_t i = 0; i < predictions.size(); ++i) {
    const float p = predictions[i];
    size_t b = 0;
    if (p >= 1.0f) {
      b = buckets - 1;
    } else if (p > 0.0f) {  // false for NaN
      b = std::min(buckets - 1, static_cast<size_t>(static_cast<double>(p) * buckets));
    }
    if (Positive(labels[i])) {
      ++pos_[b];
      ++positives_;
    } else {
      ++neg_[b];
      ++negatives_;
    }
  }
  return true;
}

bool StreamingAuc::Merge(const StreamingAuc& other) {
  if (other.pos_.size() != pos_.size()) return false;
  for (size_t b = 0; b < pos_.size(); ++b) {
    pos_[b] += other.pos_[b];
    neg_[b] += other.neg_[b];
  }
  positives_ += other.positives_;
  negatives_ += other.negatives_;
  return true;
}

void StreamingAuc::Reset() {
  std::fill(pos_.begin(), pos_.end(), 0);
  std::fill(neg_.begin(), neg_.end(), 0);
  positives_ = negatives_ = 0;
}

double StreamingAuc::Auc() const {
  if (positives_ == 0 || negatives_ == 0) return kNaN;
  double wins = 0, negatives_below = 0;
  for (size_t b = 0; b < pos_.size(); ++b) {
    const double pos = static_cast<double>(pos_[b]), neg = static_cast<double>(neg_[b]);
    wins += pos * negatives_below + 0.5 * pos * neg;
    negatives_below += neg;
  }
  return wins / (static_cast<double>(positives_) * static_cast<double>(negatives_));
}

double StreamingAuc::ErrorBound() const {
  if (positives_ == 0 || negatives_ == 0) return kNaN;
  double same_bucket_pairs = 0;
  for (size_t b = 0; b < pos_.size(); ++b) {
    same_bucket_pairs += static_cast<double>(pos_[b]) * static_cast<double>(neg_[b]);
  }
  return 0.5 * same_bucket_pairs /
         (static_cast<double>(positives_) * static_cast<double>(negatives_));
}

}  // namespace brook::trainer
