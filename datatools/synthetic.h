// `brook data gen`: Criteo-shaped synthetic CTR data drawn from a known
// ground-truth model, so the best achievable (Bayes-optimal) AUC and logloss
// are known and written beside the data.
//
// Each example has a float `label` (0/1), dense features I1..I13 (float
// counts: non-negative, zero-inflated, heavy-tailed, like Criteo's) and
// categorical features C1..C26 (one int64 id each, Zipf-distributed over
// [0, cardinality)). The label is Bernoulli(sigmoid(logit)) with
//
//   logit = bias + sum_f w_f(id_f)                          per-id weights
//               + sum_{f<g} <v_f(id_f), v_g(id_g)>           rank-k interactions
//               + dense_scale * (g(x) - g_mean)              non-linear dense part
//   x_j   = (log1p(I_j) - mu_j) / sigma_j          (I_j clamped to [0, FLT_MAX])
//   g(x)  = w2 . tanh(W1 x + b1)                             8 hidden units
//
// w_f(id) and v_f(id) are pure functions of (seed, f, id) through a hash, so
// no table is stored for 10^8 ids: w is approximately normal (Irwin-Hall of
// the four 16-bit lanes of one hash), each component of v uniform with unit
// variance (one 16-bit lane each), both times a scale. The scales and the
// bias are calibrated on a fixed sample of 20k draws so the logit's spread
// (options.logit_std) and the base CTR (options.base_ctr) come out as asked
// for any feature layout; the variance splits about 2:1:1 between the wide,
// interaction and dense parts.
//
// Example i of a split depends only on (seed, split, i): the same seed gives
// the same examples whatever the shard and thread counts (shards hold
// contiguous index ranges).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "datatools/example_builder.h"
#include "storage/tfrecord.h"

namespace brook::datatools {

// splitmix64 (Steele, Lea, Flood 2014): 64 bits of state, one add and a
// finalizer per draw. Fast enough for ~100 draws per example.
// Thread-compatible.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
  static constexpr uint64_t Finalize(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t Next() { return Finalize(state_ += kGamma); }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// Output `key` of the splitmix64 stream seeded with `salt`: a bijection in
// key for a fixed salt. The generator's one hash.
constexpr uint64_t HashMix(uint64_t salt, uint64_t key) {
  return SplitMix64::Finalize(salt + (key + 1) * SplitMix64::kGamma);
}

// Zipf over ranks {1..n}: P(k) proportional to k^-exponent, by rejection-
// inversion (Hörmann & Derflinger 1996, "Rejection-inversion to generate
// variates from monotone discrete distributions"), as Apache Commons RNG's
// RejectionInversionZipfSampler, plus an alias table for the hat's buckets
// of the 1024 most popular ranks. O(1) expected per draw for any n (fewer than ~1.1 tries).
// Any exponent > 0, 1.0 included. Immutable.
class ZipfSampler {
 public:
  // REQUIRES: n >= 1, exponent > 0 (SyntheticOptions::Validate checks).
  ZipfSampler(uint64_t n, double exponent);
  uint64_t Sample(SplitMix64* rng) const;
  uint64_t n() const { return n_; }

 private:
  // Ranks up to this many are drawn from an alias table instead of by
  // HInverse (a log and an exp): they take ~70% of the draws at s = 1.1 for
  // any n, and the tables (24 KiB per feature) stay in L2 for 26 features.
  static constexpr uint64_t kTableRanks = 1024;

  double H(double x) const;  // integral of h, shifted so H(1) = 0
  double HInverse(double x) const;
  double h(double x) const;  // x^-exponent

  uint64_t n_;
  double exponent_;
  double one_minus_s_, inv_one_minus_s_;
  double h_integral_x1_;
  double h_integral_n_;
  double s_;
  // The head: hat draws u in [h_integral_x1_, head_end_) fall in the buckets
  // of ranks 1..K, bucket k of width W_k = H(k + 1/2) - H(k - 1/2) (from
  // H(1.5) - 1 for k = 1), of which h(k) is accepted. Rather than search for
  // u's bucket, a Walker alias table over the widths picks the bucket from
  // u's position, and a second uniform accepts with probability h(k) / W_k:
  // the same joint law, in O(1) without branches on the search.
  struct AliasEntry {
    double cut;      // keep this bucket if the fraction is below cut
    uint32_t alias;  // else take this one (0-based)
  };
  uint64_t table_ranks_ = 0;
  double head_end_ = 0, head_scale_ = 0;  // head_scale_ = K / head width
  std::vector<AliasEntry> alias_;
  std::vector<double> accept_;  // h(k) / W_k, 0-based
};

// A hash-like bijection on [0, n) (multiply/xorshift rounds on the next power
// of two, cycle-walked back into range): maps Zipf ranks to ids so popular
// ids are scattered, and differently per feature. Immutable.
class IdPermutation {
 public:
  IdPermutation(uint64_t n, uint64_t salt);
  uint64_t operator()(uint64_t x) const;

 private:
  uint64_t n_, mask_;
  int shift_;
  uint64_t add_, mul1_, mul2_;
};

struct SyntheticOptions {
  uint64_t seed = 1;
  int64_t train_examples = 1'000'000;
  int64_t test_examples = 100'000;
  int shards = 1;       // train files
  int test_shards = 0;  // test files; 0 = same as shards
  int num_dense = 13;
  int num_categorical = 26;
  // One per categorical feature; empty = Criteo's Kaggle cardinalities scaled
  // in log space so the largest is max_cardinality (so 10^6 gives a spread
  // of 3 .. 10^6, like Criteo's 3 .. 10^7).
  std::vector<uint64_t> cardinalities;
  uint64_t max_cardinality = 1'000'000;
  // Criteo's id frequencies fall off roughly as rank^-1.1.
  double zipf_exponent = 1.1;
  int interaction_rank = 4;  // k of the pairwise factors; 0 = none
  // Target mean CTR; Criteo's is about 0.26.
  double base_ctr = 0.25;
  // Standard deviation of the logit. 1.4 puts the Bayes AUC near 0.8 and the
  // Bayes logloss near 0.45, where good Criteo models sit.
  double logit_std = 1.4;
  storage::Compression compression = storage::Compression::kNone;
  // zlib level for GZIP/ZLIB: 6 is zlib's default; 1 writes ~3x faster for
  // slightly larger files (the generator itself outruns zlib either way).
  int compression_level = 6;
  std::string output_dir;
  int threads = 1;  // shard-parallel
  // If set, examples written so far are added here (relaxed, every few
  // thousand per thread) for a progress printer on another thread.
  std::atomic<int64_t>* progress = nullptr;

  // INVALID_ARGUMENT naming the field.
  absl::Status Validate() const;
  std::vector<uint64_t> EffectiveCardinalities() const;
  int EffectiveTestShards() const { return test_shards > 0 ? test_shards : shards; }
};

inline constexpr uint64_t kMaxCardinality = uint64_t{1} << 40;

enum class Split { kTrain = 0, kTest = 1 };
std::string_view SplitName(Split split);  // "train" | "test"
// "train-00003-of-00016.tfrecord" (+ ".gz" / ".zz" when compressed), as
// `brook data convert` names its shards.
std::string SyntheticShardName(Split split, int shard, int num_shards, storage::Compression c);

// The ground truth. Immutable after creation: thread-safe.
class GroundTruthModel {
 public:
  static constexpr int kHidden = 8;

  // REQUIRES: dense.size() == num_dense(), ids.size() == num_categorical(),
  // ids[f] < cardinality of feature f (out-of-range ids still hash, but were
  // never generated).
  double Logit(std::span<const float> dense, std::span<const uint64_t> ids) const;
  double Probability(std::span<const float> dense, std::span<const uint64_t> ids) const {
    return 1.0 / (1.0 + std::exp(-Logit(dense, ids)));
  }
  // The parts of Logit (bias + wide + interactions + dense).
  double Weight(int feature, uint64_t id) const;                       // w_f(id)
  void Factor(int feature, uint64_t id, std::span<double> out) const;  // v_f(id), k values
  double DenseTerm(std::span<const float> dense) const;                // dense_scale * (g - g_mean)

  int num_dense() const { return static_cast<int>(center_.size()); }
  int num_categorical() const { return static_cast<int>(weight_salt_.size()); }
  int rank() const { return rank_; }
  double bias() const { return bias_; }
  double weight_scale() const { return weight_scale_; }  // std of w
  double factor_scale() const { return factor_scale_; }  // std of each v component
  double dense_scale() const { return dense_scale_; }
  double dense_mean() const { return dense_mean_; }
  // The dense net, for ground_truth.json: mu_j, 1/sigma_j, W1 (row-major
  // kHidden x num_dense), b1, w2.
  const std::vector<double>& dense_center() const { return center_; }
  const std::vector<double>& dense_inv_spread() const { return inv_spread_; }
  const std::vector<double>& w1() const { return w1_; }
  const std::vector<double>& b1() const { return b1_; }
  const std::vector<double>& w2() const { return w2_; }

 private:
  friend class SyntheticGenerator;
  GroundTruthModel() = default;
  // Unscaled pieces, used while calibrating.
  double RawWide(std::span<const uint64_t> ids) const;          // sum_f n(f, id)
  double RawInteractions(std::span<const uint64_t> ids) const;  // with unit factors
  double RawDense(std::span<const float> dense) const;          // g(x)

  int rank_ = 0;
  double bias_ = 0, weight_scale_ = 0, factor_scale_ = 0, dense_scale_ = 0, dense_mean_ = 0;
  std::vector<uint64_t> weight_salt_, factor_salt_;  // per feature
  std::vector<double> center_, inv_spread_;          // per dense feature
  std::vector<double> w1_, b1_, w2_;                 // kHidden x num_dense, kHidden, kHidden
  static constexpr int kLog1pTableSize = 4096;
  std::vector<double> log1p_table_;  // log1p(i)
};

// One drawn example.
struct SyntheticExample {
  float label = 0;
  double logit = 0;        // the model's logit
  double probability = 0;  // the model's true P(label = 1) = sigmoid(logit)
  std::vector<float> dense;
  std::vector<uint64_t> ids;
};

// Accumulates what WriteRange drew. Pointers are optional outputs.
struct RangeSink {
  int64_t examples = 0;
  int64_t positives = 0;
  double sum_probability = 0;
  double sum_logloss = 0;                        // sum of -log P(observed label)
  double sum_entropy = 0;                        // sum of the binary entropy of p: E[logloss]
  std::vector<double>* probabilities = nullptr;  // appended per example
  std::vector<uint8_t>* labels = nullptr;        // appended per example
  // 2 * kLogitBins counts (negatives, then positives) by logit, for an AUC
  // over more examples than fit in memory.
  std::vector<uint64_t>* logit_histogram = nullptr;
};
inline constexpr int kLogitBins = 1 << 18;  // over [-kLogitRange, kLogitRange]
inline constexpr double kLogitRange = 20.0;

// Immutable after Create: thread-safe.
class SyntheticGenerator {
 public:
  // Builds and calibrates the model (about 20k draws). INVALID_ARGUMENT from
  // Validate().
  static absl::StatusOr<std::unique_ptr<SyntheticGenerator>> Create(
      const SyntheticOptions& options);

  const SyntheticOptions& options() const { return options_; }
  const GroundTruthModel& model() const { return model_; }
  const std::vector<uint64_t>& cardinalities() const { return cardinalities_; }

  // Draws example `index` of `split` (deterministic in seed, split, index).
  void Draw(Split split, int64_t index, SyntheticExample* example) const;
  // Encodes it as a tf.train.Example (label, I*, C*); the view lives in
  // *builder until its next use.
  std::string_view Encode(const SyntheticExample& example, ExampleBuilder* builder) const;
  // Draws, encodes and writes examples [begin, end) of `split`: the hot loop
  // of GenerateSynthetic, public so benchmarks time exactly it. Errors are
  // the writer's.
  absl::Status WriteRange(Split split, int64_t begin, int64_t end, storage::TFRecordWriter* writer,
                          RangeSink* sink) const;

 private:
  explicit SyntheticGenerator(const SyntheticOptions& options);
  void Calibrate();
  // Draws the features of an example; returns its RNG for the label draw.
  SplitMix64 DrawFeatures(uint64_t split_salt, int64_t index, std::vector<float>* dense,
                          std::vector<uint64_t>* ids) const;

  SyntheticOptions options_;
  std::vector<uint64_t> cardinalities_;
  GroundTruthModel model_;
  std::vector<ZipfSampler> zipf_;
  std::vector<IdPermutation> permutation_;
  std::vector<double> dense_mu_, dense_sigma_;
  uint64_t split_salt_[3] = {0, 0, 0};  // train, test, calibration
  std::vector<std::string> dense_names_, categorical_names_;
};

struct SplitSummary {
  int64_t examples = 0;
  int64_t positives = 0;
  double base_rate = 0;         // positives / examples
  double mean_probability = 0;  // mean true p: the expected base rate
  // Test: exact (sort-based, ties count half). Train: from the logit
  // histogram (kLogitBins), within ~1e-5 of exact. NaN without both classes.
  double bayes_auc = NAN;
  double bayes_logloss = 0;        // mean -log P(label) under the true model
  double expected_logloss = 0;     // mean binary entropy of p
  std::vector<std::string> files;  // paths, in index order
};

struct SyntheticResult {
  SplitSummary train, test;
  std::string ground_truth_path;   // <output_dir>/ground_truth.json
  std::string feature_spec_path;   // <output_dir>/feature_spec.yaml
  double seconds = 0;              // wall time drawing + encoding + writing the shards
  double examples_per_second = 0;  // (train + test) / seconds
  // Process CPU time over the same span (all threads): examples / cpu_seconds
  // is the one-core rate even on a busy machine.
  double cpu_seconds = 0;
};

// Writes the train and test shards, feature_spec.yaml and ground_truth.json
// into options.output_dir (created if missing; existing files of the same
// names are replaced). INVALID_ARGUMENT for bad options; the writer's errors
// (e.g. PERMISSION_DENIED) otherwise.
absl::StatusOr<SyntheticResult> GenerateSynthetic(const SyntheticOptions& options);

// Exact AUC with ties counted half; NaN unless both labels occur.
// REQUIRES: scores.size() == labels.size().
double ExactAuc(std::span<const double> scores, std::span<const uint8_t> labels);

}  // namespace brook::datatools
