// Evaluation metrics of binary classifiers (predictions are probabilities,
// a label >= 0.5 counts as positive), exact over a held set and a streaming
// AUC estimate for data that does not fit in memory. (Model quality, not the
// Prometheus metrics a node exports: those are in metrics/.)
//
// The exact functions return NaN when the metric is undefined: sizes differ,
// no examples, or (AUC) only one class, (calibration) no positive labels.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace brook::trainer {

// Area under the ROC curve, by sorting: the probability that a random
// positive scores above a random negative, a tie counting 1/2 (equivalently
// Mann-Whitney U with tied predictions given their average rank, as
// sklearn.metrics.roc_auc_score). O(n log n).
double Auc(absl::Span<const float> predictions, absl::Span<const float> labels);

// Mean binary cross-entropy with predictions clipped to [1e-15, 1 - 1e-15]
// (sklearn.metrics.log_loss's default); labels may be soft, in [0, 1].
double LogLoss(absl::Span<const float> predictions, absl::Span<const float> labels);

// Fraction with (prediction >= 0.5) == (label >= 0.5).
double Accuracy(absl::Span<const float> predictions, absl::Span<const float> labels);

// mean(prediction) / mean(label): 1 for a calibrated model, > 1 when it
// over-predicts.
double Calibration(absl::Span<const float> predictions, absl::Span<const float> labels);

// AUC from a fixed histogram of predictions in [0, 1] (values outside are
// clamped, NaN goes to bucket 0): constant memory, mergeable across trainers.
// Pairs that fall into the same bucket are counted as ties (1/2), so the
// estimate differs from the exact AUC by at most ErrorBound() =
// (sum over buckets of pos_b * neg_b) / (2 P N), computed from the same
// histogram: with a smooth score distribution and B buckets that is
// O(1 / B). Thread-compatible.
class StreamingAuc {
 public:
  explicit StreamingAuc(int buckets = 1 << 14);

  // Ignores the call (and returns false) if the sizes differ.
  bool Add(absl::Span<const float> predictions, absl::Span<const float> labels);
  // Adds `other`'s counts; false (nothing added) if the bucket counts differ.
  bool Merge(const StreamingAuc& other);
  void Reset();

  double Auc() const;         // NaN until both classes were seen
  double ErrorBound() const;  // NaN until both classes were seen
  uint64_t positives() const { return positives_; }
  uint64_t negatives() const { return negatives_; }

 private:
  std::vector<uint64_t> pos_, neg_;
  uint64_t positives_ = 0, negatives_ = 0;
};

}  // namespace brook::trainer
