#include "datatools/synthetic.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/process_cpu.h"
#include "common/status_macros.h"

namespace brook::datatools {
namespace {

constexpr int kMaxRank = 64;
constexpr int kMaxShards = 99999;                     // file names carry 5 digits
constexpr int64_t kMaxExamples = 10'000'000'000'000;  // keeps n * shard in int64
constexpr int kCalibrationExamples = 20000;

// Criteo Display Advertising Challenge (Kaggle) cardinalities of C1..C26.
constexpr std::array<uint64_t, 26> kCriteoCardinalities = {
    1460, 583,   10131227, 2202608, 305,  24,   12517, 633,     3,  93145, 5683,   8351593, 3194,
    27,   14992, 5461306,  10,      5652, 2173, 4,     7046547, 18, 15,    286181, 105,     142572};
constexpr uint64_t kCriteoMaxCardinality = 10131227;

// Dense marginals: y = mu + sigma * z; I = 0 if y <= 0 else floor(e^y) - 1.
// Zero-inflated, heavy-tailed counts whose medians and spreads resemble
// Criteo's I1..I13 (I5 is the large one, I10/I12 mostly zero).
constexpr std::array<double, 13> kDenseMu = {0.5, 2.5, 1.8, 1.6, 7.5, 3.5, 1.5,
                                             2.4, 3.8, 0.3, 1.0, 0.2, 1.7};
constexpr std::array<double, 13> kDenseSigma = {1.2, 1.8, 1.4, 1.1, 2.0, 1.7, 1.5,
                                                1.1, 1.4, 0.8, 1.0, 0.9, 1.3};
// Loading of every dense feature on one shared factor (activity level), so
// the counts are correlated as Criteo's are.
constexpr double kDenseRho = 0.5;
// Counts stay below 2^24 so they are exact in a float.
constexpr double kMaxLogCount = 16.6;  // log(2^24) = 16.635

// Salt tags: every random quantity hangs off HashMix(seed, tag).
enum SaltTag : uint64_t {
  kWeightTag = 1,
  kFactorTag = 2,
  kPermutationTag = 3,
  kSplitTag = 4,
  kDenseNetTag = 5
};

// Approximately standard normal from one 64-bit hash: the sum of its four
// 16-bit lanes is Irwin-Hall(4) (variance 4/12), centred and scaled to unit
// variance. Bounded at +-3.46, which keeps per-id weights free of outliers;
// one hash instead of Box-Muller's log and sincos keeps Logit cheap.
inline double HashNormal(uint64_t h) {
  const uint64_t sum = (h & 0xFFFF) + ((h >> 16) & 0xFFFF) + ((h >> 32) & 0xFFFF) + (h >> 48);
  return (static_cast<double>(sum + 2) * (1.0 / 65536.0) - 2.0) * std::numbers::sqrt3;
}

// Four independent uniforms with unit variance (on [-sqrt 3, sqrt 3]) from
// the 16-bit lanes of one hash: factor components need only be independent
// and centred, and this takes a quarter of the hashes Irwin-Hall would.
inline void HashUniform4(uint64_t h, double out[4]) {
  constexpr double kScale = 2.0 * std::numbers::sqrt3 / 65536.0;
  for (int lane = 0; lane < 4; ++lane) {
    out[lane] =
        (static_cast<double>((h >> (16 * lane)) & 0xFFFF) + 0.5) * kScale - std::numbers::sqrt3;
  }
}

// Box-Muller: two independent standard normals.
inline void NormalPair(SplitMix64* rng, double* a, double* b) {
  const double u1 = 1.0 - rng->Uniform();  // (0, 1]: log stays finite
  const double u2 = rng->Uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double t = 2.0 * std::numbers::pi * u2;
  *a = r * std::cos(t);
  *b = r * std::sin(t);
}

double Helper2(double x) {  // expm1(x) / x, exact near 0
  return std::abs(x) > 1e-8 ? std::expm1(x) / x
                            : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
}

}  // namespace

// ---------------------------------------------------------------- ZipfSampler

ZipfSampler::ZipfSampler(uint64_t n, double exponent)
    : n_(n),
      exponent_(exponent),
      one_minus_s_(1.0 - exponent),
      inv_one_minus_s_(exponent == 1.0 ? 0.0 : 1.0 / (1.0 - exponent)) {
  h_integral_x1_ = H(1.5) - 1.0;
  h_integral_n_ = H(static_cast<double>(n) + 0.5);
  s_ = 2.0 - HInverse(H(2.5) - h(2.0));
  if (n_ < 2) return;
  const uint64_t k_max = std::min(n_, kTableRanks);
  table_ranks_ = k_max;
  std::vector<double> width(k_max);
  accept_.resize(k_max);
  double lo = h_integral_x1_;
  for (uint64_t k = 1; k <= k_max; ++k) {
    const double kd = static_cast<double>(k);
    const double hi = H(kd + 0.5);
    width[k - 1] = hi - lo;
    // Rank 1's bucket starts at H(1.5) - h(1): all of it is accepted.
    accept_[k - 1] = k == 1 ? 1.0 : h(kd) / width[k - 1];
    lo = hi;
  }
  head_end_ = lo;
  head_scale_ = static_cast<double>(k_max) / (head_end_ - h_integral_x1_);
  // Vose's alias method over the bucket widths.
  alias_.resize(k_max);
  std::vector<double> p(k_max);
  std::vector<uint32_t> small, large;
  for (uint64_t k = 0; k < k_max; ++k) {
    p[k] = width[k] * head_scale_;
    (p[k] < 1.0 ? small : large).push_back(static_cast<uint32_t>(k));
  }
  while (!small.empty() && !large.empty()) {
    const uint32_t s = small.back(), l = large.back();
    small.pop_back();
    alias_[s] = {p[s], l};
    p[l] -= 1.0 - p[s];
    if (p[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  // What is left has probability 1 up to rounding: it keeps its own bucket.
  for (uint32_t k : small) alias_[k] = {1.0, k};
  for (uint32_t k : large) alias_[k] = {1.0, k};
}

double ZipfSampler::H(double x) const {
  const double log_x = std::log(x);
  return Helper2(one_minus_s_ * log_x) * log_x;
}

double ZipfSampler::HInverse(double x) const {
  // (1 + (1-s) x)^(1/(1-s)), or e^x at s = 1. log(1 + t) rather than
  // Apache's log1p(t)/t: half the cost. Its relative error (~1e-16 / |t|)
  // only grows when s is very close to 1, and even then it moves a bucket
  // edge by a tiny fraction of a bucket, far below any sampling noise.
  if (inv_one_minus_s_ == 0.0) return std::exp(x);
  double t = x * one_minus_s_;
  if (t < -1.0) t = -1.0;  // rounding can push it just below the domain
  return std::exp(std::log(1.0 + t) * inv_one_minus_s_);
}

double ZipfSampler::h(double x) const { return std::exp(-exponent_ * std::log(x)); }

uint64_t ZipfSampler::Sample(SplitMix64* rng) const {
  if (n_ == 1) return 1;
  const double n = static_cast<double>(n_);
  while (true) {
    // u is uniform on (H(1.5) - 1, H(n + 0.5)]: the area under the hat.
    const double u = h_integral_n_ + rng->Uniform() * (h_integral_x1_ - h_integral_n_);
    if (u < head_end_) {
      // u's position in the head, times K: the integer part picks an alias
      // entry and the fraction (independent and uniform) decides within it.
      const double pos = (u - h_integral_x1_) * head_scale_;
      const uint64_t j = std::min(static_cast<uint64_t>(pos), table_ranks_ - 1);
      const AliasEntry& e = alias_[j];
      const uint64_t k = pos - static_cast<double>(j) < e.cut ? j : e.alias;
      if (rng->Uniform() < accept_[k]) return k + 1;
      continue;
    }
    const double x = HInverse(u);
    double k = std::floor(x + 0.5);
    if (k < 1.0) {
      k = 1.0;
    } else if (k > n) {
      k = n;
    }
    // The first test accepts most draws without evaluating H or h.
    if (k - x <= s_ || u >= H(k + 0.5) - h(k)) return static_cast<uint64_t>(k);
  }
}

// -------------------------------------------------------------- IdPermutation

IdPermutation::IdPermutation(uint64_t n, uint64_t salt) : n_(n) {
  const int bits = n <= 1 ? 0 : std::bit_width(n - 1);
  mask_ = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  shift_ = std::max(1, (bits + 1) / 2);
  SplitMix64 rng(salt);
  add_ = rng.Next();
  mul1_ = rng.Next() | 1;  // odd: a bijection mod 2^bits
  mul2_ = rng.Next() | 1;
}

uint64_t IdPermutation::operator()(uint64_t x) const {
  if (n_ <= 1) return 0;
  // Each step is a bijection on [0, 2^bits); walking the cycle until the value
  // lands below n restricts it to a bijection on [0, n). 2^bits < 2n, so the
  // expected number of rounds is under 2.
  do {
    x = (x + add_) & mask_;
    x ^= x >> shift_;
    x = (x * mul1_) & mask_;
    x ^= x >> shift_;
    x = (x * mul2_) & mask_;
    x ^= x >> shift_;
  } while (x >= n_);
  return x;
}

// ------------------------------------------------------------------- options

absl::Status SyntheticOptions::Validate() const {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (train_examples < 0 || train_examples > kMaxExamples)
    return bad("train_examples must be in [0, ", kMaxExamples, "], got ", train_examples);
  if (test_examples < 0 || test_examples > kMaxExamples)
    return bad("test_examples must be in [0, ", kMaxExamples, "], got ", test_examples);
  if (shards < 1 || shards > kMaxShards)
    return bad("shards must be in [1, ", kMaxShards, "], got ", shards);
  if (test_shards < 0 || test_shards > kMaxShards)
    return bad("test_shards must be in [0, ", kMaxShards, "] (0 = shards), got ", test_shards);
  if (num_dense < 0 || num_dense > 1000)
    return bad("num_dense must be in [0, 1000], got ", num_dense);
  if (num_categorical < 0 || num_categorical > 1000)
    return bad("num_categorical must be in [0, 1000], got ", num_categorical);
  if (!cardinalities.empty() && cardinalities.size() != static_cast<size_t>(num_categorical))
    return bad("cardinalities has ", cardinalities.size(), " entries for ", num_categorical,
               " categorical features");
  for (size_t i = 0; i < cardinalities.size(); ++i) {
    if (cardinalities[i] < 1 || cardinalities[i] > kMaxCardinality)
      return bad("cardinality of C", i + 1, " must be in [1, ", kMaxCardinality, "], got ",
                 cardinalities[i]);
  }
  if (max_cardinality < 1 || max_cardinality > kMaxCardinality)
    return bad("max_cardinality must be in [1, ", kMaxCardinality, "], got ", max_cardinality);
  if (!(zipf_exponent > 0.0 && zipf_exponent <= 10.0))
    return bad("zipf_exponent must be in (0, 10], got ", zipf_exponent);
  if (interaction_rank < 0 || interaction_rank > kMaxRank)
    return bad("interaction_rank must be in [0, ", kMaxRank, "], got ", interaction_rank);
  if (!(base_ctr >= 0.001 && base_ctr <= 0.999))
    return bad("base_ctr must be in [0.001, 0.999], got ", base_ctr);
  if (!(logit_std >= 0.0 && logit_std <= 10.0))
    return bad("logit_std must be in [0, 10], got ", logit_std);
  if (compression_level < 0 || compression_level > 9)
    return bad("compression_level must be in [0, 9], got ", compression_level);
  if (threads < 1 || threads > 1024) return bad("threads must be in [1, 1024], got ", threads);
  return absl::OkStatus();
}

std::vector<uint64_t> SyntheticOptions::EffectiveCardinalities() const {
  if (!cardinalities.empty()) return cardinalities;
  std::vector<uint64_t> out(static_cast<size_t>(std::max(num_categorical, 0)), 1);
  if (max_cardinality <= 1) return out;
  // Scaling log(cardinality) keeps Criteo's shape (a few huge features, many
  // small ones) at any size.
  const double scale = std::log(static_cast<double>(max_cardinality)) /
                       std::log(static_cast<double>(kCriteoMaxCardinality));
  for (size_t i = 0; i < out.size(); ++i) {
    const double c = std::exp(
        std::log(static_cast<double>(kCriteoCardinalities[i % kCriteoCardinalities.size()])) *
        scale);
    out[i] = std::clamp<uint64_t>(static_cast<uint64_t>(std::llround(c)), 1, max_cardinality);
  }
  return out;
}

std::string_view SplitName(Split split) { return split == Split::kTrain ? "train" : "test"; }

std::string SyntheticShardName(Split split, int shard, int num_shards, storage::Compression c) {
  const char* suffix = c == storage::Compression::kGzip   ? ".gz"
                       : c == storage::Compression::kZlib ? ".zz"
                                                          : "";
  return absl::StrFormat("%s-%05d-of-%05d.tfrecord%s", SplitName(split), shard, num_shards, suffix);
}

// ------------------------------------------------------------ GroundTruthModel

double GroundTruthModel::Weight(int feature, uint64_t id) const {
  return weight_scale_ * HashNormal(HashMix(weight_salt_[feature], id));
}

void GroundTruthModel::Factor(int feature, uint64_t id, std::span<double> out) const {
  const int hashes = (rank_ + 3) / 4;
  for (int j = 0; j < hashes; ++j) {
    double u[4];
    HashUniform4(HashMix(factor_salt_[feature * hashes + j], id), u);
    for (int lane = 0; lane < 4 && 4 * j + lane < rank_; ++lane) {
      out[4 * j + lane] = factor_scale_ * u[lane];
    }
  }
}

double GroundTruthModel::RawWide(std::span<const uint64_t> ids) const {
  double sum = 0;
  for (size_t f = 0; f < ids.size(); ++f) sum += HashNormal(HashMix(weight_salt_[f], ids[f]));
  return sum;
}

double GroundTruthModel::RawInteractions(std::span<const uint64_t> ids) const {
  if (rank_ == 0) return 0;
  // sum_{f<g} <v_f, v_g> = ((sum_f v_f)^2 - sum_f v_f^2) / 2 per component:
  // O(F k) instead of O(F^2 k).
  double sum[kMaxRank + 4] = {};
  double sum_sq = 0;
  const int hashes = (rank_ + 3) / 4;
  for (size_t f = 0; f < ids.size(); ++f) {
    const uint64_t* salt = &factor_salt_[f * hashes];
    for (int j = 0; j < hashes; ++j) {
      double u[4];
      HashUniform4(HashMix(salt[j], ids[f]), u);
      // Lanes past rank_ in the last hash are unused.
      const int lanes = std::min(4, rank_ - 4 * j);
      for (int lane = 0; lane < lanes; ++lane) {
        sum[4 * j + lane] += u[lane];
        sum_sq += u[lane] * u[lane];
      }
    }
  }
  double total = 0;
  for (int c = 0; c < rank_; ++c) total += sum[c] * sum[c];
  return 0.5 * (total - sum_sq);
}

double GroundTruthModel::RawDense(std::span<const float> dense) const {
  const size_t d = center_.size();
  if (d == 0) return 0;
  double x[1000];  // Validate caps num_dense at 1000
  for (size_t j = 0; j < d; ++j) {
    // Counts are mostly small integers: look those up (same values as
    // std::log1p, computed once) and call log1p only for the rest.
    // Counts are never negative or infinite here; clamp what a foreign file
    // might hold (negative or NaN to 0, inf to FLT_MAX) so Logit stays
    // finite. The range test comes before the cast, UB for a huge float.
    const float v = dense[j] > 0.0f ? std::min(dense[j], std::numeric_limits<float>::max()) : 0.0f;
    const bool small = v >= 0.0f && v < static_cast<float>(kLog1pTableSize);
    const int iv = small ? static_cast<int>(v) : 0;
    const double l = small && static_cast<float>(iv) == v ? log1p_table_[iv]
                                                          : std::log1p(static_cast<double>(v));
    x[j] = (l - center_[j]) * inv_spread_[j];
  }
  double out = 0;
  for (int i = 0; i < kHidden; ++i) {
    const double* w = &w1_[i * d];
    double a = b1_[i];
    for (size_t j = 0; j < d; ++j) a += w[j] * x[j];
    // tanh(a) = 1 - 2 / (e^{2a} + 1): one exp, where glibc's tanh costs an
    // expm1 and more. Clamped so e^{2a} stays finite; tanh(20) is 1 in
    // double precision anyway.
    a = std::clamp(a, -20.0, 20.0);
    out += w2_[i] * (1.0 - 2.0 / (std::exp(2.0 * a) + 1.0));
  }
  return out;
}

double GroundTruthModel::DenseTerm(std::span<const float> dense) const {
  if (center_.empty()) return 0;
  return dense_scale_ * (RawDense(dense) - dense_mean_);
}

double GroundTruthModel::Logit(std::span<const float> dense, std::span<const uint64_t> ids) const {
  return bias_ + weight_scale_ * RawWide(ids) +
         factor_scale_ * factor_scale_ * RawInteractions(ids) + DenseTerm(dense);
}

// ---------------------------------------------------------- SyntheticGenerator

SyntheticGenerator::SyntheticGenerator(const SyntheticOptions& options)
    : options_(options), cardinalities_(options.EffectiveCardinalities()) {
  const uint64_t seed = options.seed;
  const int d = options.num_dense;
  const int f = options.num_categorical;
  const int k = options.interaction_rank;
  model_.rank_ = k;
  for (int i = 0; i < f; ++i) {
    model_.weight_salt_.push_back(HashMix(HashMix(seed, kWeightTag), i));
    for (int j = 0; j < (k + 3) / 4; ++j) {
      model_.factor_salt_.push_back(HashMix(HashMix(seed, kFactorTag), i * kMaxRank + j));
    }
    zipf_.emplace_back(cardinalities_[i], options.zipf_exponent);
    permutation_.emplace_back(cardinalities_[i], HashMix(HashMix(seed, kPermutationTag), i));
    categorical_names_.push_back(absl::StrCat("C", i + 1));
  }
  for (int j = 0; j < d; ++j) {
    dense_mu_.push_back(kDenseMu[j % kDenseMu.size()]);
    dense_sigma_.push_back(kDenseSigma[j % kDenseSigma.size()]);
    model_.center_.push_back(dense_mu_.back());
    model_.inv_spread_.push_back(1.0 / dense_sigma_.back());
    dense_names_.push_back(absl::StrCat("I", j + 1));
  }
  model_.log1p_table_.resize(GroundTruthModel::kLog1pTableSize);
  for (int i = 0; i < GroundTruthModel::kLog1pTableSize; ++i) {
    model_.log1p_table_[i] = std::log1p(static_cast<double>(i));
  }
  // The dense net: pre-activations of about 1.5 standard deviations, so tanh
  // bends (saturates on heavy users) rather than staying linear.
  SplitMix64 rng(HashMix(seed, kDenseNetTag));
  auto normal = [&rng] {
    double a, b;
    NormalPair(&rng, &a, &b);
    return a;
  };
  if (d > 0) {
    for (int i = 0; i < GroundTruthModel::kHidden * d; ++i)
      model_.w1_.push_back(normal() * 1.5 / std::sqrt(static_cast<double>(d)));
    for (int i = 0; i < GroundTruthModel::kHidden; ++i) model_.b1_.push_back(normal() * 0.5);
    for (int i = 0; i < GroundTruthModel::kHidden; ++i)
      model_.w2_.push_back(normal() / std::sqrt(double{GroundTruthModel::kHidden}));
  }
  for (int s = 0; s < 3; ++s) split_salt_[s] = HashMix(HashMix(seed, kSplitTag), s);
}

absl::StatusOr<std::unique_ptr<SyntheticGenerator>> SyntheticGenerator::Create(
    const SyntheticOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<SyntheticGenerator> gen(new SyntheticGenerator(options));
  gen->Calibrate();
  return gen;
}

void SyntheticGenerator::Calibrate() {
  // Variance shares of the three parts before the final rescale: per-id
  // weights carry most of the signal, as in real CTR data where a linear
  // model over ids gets most of the way.
  constexpr double kWideShare = 0.5, kInteractionShare = 0.25, kDenseShare = 0.25;
  const int num_f = options_.num_categorical;
  const int k = options_.interaction_rank;
  const double pairs = 0.5 * num_f * (num_f - 1);
  const double w_share = num_f > 0 ? kWideShare : 0;
  const double i_share = pairs > 0 && k > 0 ? kInteractionShare : 0;
  const double d_share = options_.num_dense > 0 ? kDenseShare : 0;
  const double shares = w_share + i_share + d_share;
  const double var = options_.logit_std * options_.logit_std;

  std::vector<double> wide(kCalibrationExamples), inter(kCalibrationExamples),
      dense(kCalibrationExamples);
  std::vector<float> dense_values;
  std::vector<uint64_t> ids;
  for (int i = 0; i < kCalibrationExamples; ++i) {
    DrawFeatures(split_salt_[2], i, &dense_values, &ids);
    wide[i] = model_.RawWide(ids);
    inter[i] = model_.RawInteractions(ids);
    dense[i] = model_.RawDense(dense_values);
  }
  auto mean_std = [](const std::vector<double>& v) {
    double m = 0, s = 0;
    for (double x : v) m += x;
    m /= static_cast<double>(v.size());
    for (double x : v) s += (x - m) * (x - m);
    return std::pair<double, double>(m, std::sqrt(s / static_cast<double>(v.size())));
  };
  // Analytic scales from the shares: Var(sum of F weights) = F sw^2 and
  // Var(sum over pairs of k-dim dots) = pairs k sv^4.
  if (shares > 0) {
    model_.weight_scale_ = w_share > 0 ? std::sqrt(w_share / shares * var / num_f) : 0;
    model_.factor_scale_ = i_share > 0 ? std::pow(i_share / shares * var / (pairs * k), 0.25) : 0;
    const auto [dm, ds] = mean_std(dense);
    model_.dense_mean_ = dm;
    model_.dense_scale_ = d_share > 0 && ds > 0 ? std::sqrt(d_share / shares * var) / ds : 0;
  }
  // Zipf concentration makes the realized spread differ from the analytic
  // one, so rescale all parts together to hit logit_std on the sample.
  std::vector<double> t(kCalibrationExamples);
  auto fill_t = [&] {
    const double fs2 = model_.factor_scale_ * model_.factor_scale_;
    for (int i = 0; i < kCalibrationExamples; ++i) {
      t[i] = model_.weight_scale_ * wide[i] + fs2 * inter[i] +
             model_.dense_scale_ * (dense[i] - model_.dense_mean_);
    }
  };
  fill_t();
  const double realized = mean_std(t).second;
  if (realized > 0) {
    const double a = options_.logit_std / realized;
    model_.weight_scale_ *= a;
    model_.factor_scale_ *= std::sqrt(a);
    model_.dense_scale_ *= a;
    fill_t();
  }
  // Bias: mean sigmoid(bias + t) is increasing in bias; bisect to base_ctr.
  double lo = -40, hi = 40;
  for (int it = 0; it < 100; ++it) {
    const double mid = 0.5 * (lo + hi);
    double mean_p = 0;
    for (double x : t) mean_p += 1.0 / (1.0 + std::exp(-(mid + x)));
    mean_p /= static_cast<double>(t.size());
    (mean_p < options_.base_ctr ? lo : hi) = mid;
  }
  model_.bias_ = 0.5 * (lo + hi);
}

SplitMix64 SyntheticGenerator::DrawFeatures(uint64_t split_salt, int64_t index,
                                            std::vector<float>* dense,
                                            std::vector<uint64_t>* ids) const {
  const size_t d = dense_mu_.size();
  const size_t f = zipf_.size();
  dense->resize(d);
  ids->resize(f);
  SplitMix64 rng(HashMix(split_salt, static_cast<uint64_t>(index)));
  if (d > 0) {
    const double own = std::sqrt(1.0 - kDenseRho * kDenseRho);
    double shared, spare;
    NormalPair(&rng, &shared, &spare);
    bool have_spare = true;
    for (size_t j = 0; j < d; ++j) {
      double z;
      if (have_spare) {
        z = spare;
        have_spare = false;
      } else {
        NormalPair(&rng, &z, &spare);
        have_spare = true;
      }
      const double y = dense_mu_[j] + dense_sigma_[j] * (kDenseRho * shared + own * z);
      // floor(e^y) - 1 rather than floor(expm1(y)): exp is twice as fast,
      // and the counts are defined by this line either way.
      (*dense)[j] =
          y <= 0 ? 0.0f : static_cast<float>(std::floor(std::exp(std::min(y, kMaxLogCount))) - 1);
    }
  }
  for (size_t i = 0; i < f; ++i) (*ids)[i] = permutation_[i](zipf_[i].Sample(&rng) - 1);
  return rng;
}

void SyntheticGenerator::Draw(Split split, int64_t index, SyntheticExample* example) const {
  SplitMix64 rng =
      DrawFeatures(split_salt_[static_cast<int>(split)], index, &example->dense, &example->ids);
  example->logit = model_.Logit(example->dense, example->ids);
  example->probability = 1.0 / (1.0 + std::exp(-example->logit));
  example->label = rng.Uniform() < example->probability ? 1.0f : 0.0f;
}

std::string_view SyntheticGenerator::Encode(const SyntheticExample& example,
                                            ExampleBuilder* builder) const {
  builder->Clear();
  builder->AddFloats("label", std::span<const float>(&example.label, 1));
  for (size_t j = 0; j < dense_names_.size(); ++j) {
    builder->AddFloats(dense_names_[j], std::span<const float>(&example.dense[j], 1));
  }
  for (size_t i = 0; i < categorical_names_.size(); ++i) {
    const int64_t id = static_cast<int64_t>(example.ids[i]);
    builder->AddInt64s(categorical_names_[i], std::span<const int64_t>(&id, 1));
  }
  return builder->Serialize();
}

absl::Status SyntheticGenerator::WriteRange(Split split, int64_t begin, int64_t end,
                                            storage::TFRecordWriter* writer,
                                            RangeSink* sink) const {
  SyntheticExample ex;
  ExampleBuilder builder;
  if (sink->logit_histogram != nullptr) sink->logit_histogram->resize(2 * kLogitBins, 0);
  for (int64_t i = begin; i < end; ++i) {
    Draw(split, i, &ex);
    const double p = ex.probability;
    const double log_p = std::log(p), log_q = std::log1p(-p);
    const bool positive = ex.label > 0.5f;
    ++sink->examples;
    sink->positives += positive;
    sink->sum_probability += p;
    sink->sum_logloss -= positive ? log_p : log_q;
    sink->sum_entropy -= p * log_p + (1.0 - p) * log_q;
    if (sink->probabilities != nullptr) sink->probabilities->push_back(p);
    if (sink->labels != nullptr) sink->labels->push_back(positive ? 1 : 0);
    if (sink->logit_histogram != nullptr) {
      const double pos = std::clamp((ex.logit + kLogitRange) * (kLogitBins / (2 * kLogitRange)),
                                    0.0, static_cast<double>(kLogitBins - 1));
      const int bin = static_cast<int>(pos);
      ++(*sink->logit_histogram)[(positive ? kLogitBins : 0) + bin];
    }
    RETURN_IF_ERROR(writer->Write(Encode(ex, &builder)));
    // In batches: one shared counter bumped per example would bounce its
    // cache line between the writer threads.
    if (options_.progress != nullptr && ((i - begin) & 4095) == 4095) {
      options_.progress->fetch_add(4096, std::memory_order_relaxed);
    }
  }
  if (options_.progress != nullptr) {
    options_.progress->fetch_add((end - begin) & 4095, std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------------ AUC

double ExactAuc(std::span<const double> scores, std::span<const uint8_t> labels) {
  std::vector<std::pair<double, uint8_t>> v(scores.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = {scores[i], labels[i] != 0};
  std::sort(v.begin(), v.end());
  // Ascending by score, one tie group at a time: each positive outranks every
  // negative below its group and half of those tied with it. Counted twice
  // over in integers, so the sum is exact up to ~4e9 examples.
  uint64_t twice = 0, neg_below = 0, pos = 0;
  for (size_t i = 0; i < v.size();) {
    uint64_t a = 0, b = 0;
    size_t j = i;
    for (; j < v.size() && v[j].first == v[i].first; ++j) (v[j].second ? a : b) += 1;
    twice += 2 * a * neg_below + a * b;
    neg_below += b;
    pos += a;
    i = j;
  }
  if (pos == 0 || neg_below == 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(twice) /
         (2.0 * static_cast<double>(pos) * static_cast<double>(neg_below));
}

namespace {

// The same walk over logit bins (negatives in [0, kLogitBins), positives
// after). Pairs in one bin count half; bins are 1.5e-4 logits wide, so the
// error is far below the AUC's sampling noise.
double HistogramAuc(const std::vector<uint64_t>& hist) {
  if (hist.size() != 2 * static_cast<size_t>(kLogitBins))
    return std::numeric_limits<double>::quiet_NaN();
  double twice = 0;
  uint64_t neg_below = 0, pos = 0;
  for (int b = 0; b < kLogitBins; ++b) {
    const uint64_t n = hist[b], p = hist[kLogitBins + b];
    twice += 2.0 * static_cast<double>(p) * static_cast<double>(neg_below) +
             static_cast<double>(p) * static_cast<double>(n);
    neg_below += n;
    pos += p;
  }
  if (pos == 0 || neg_below == 0) return std::numeric_limits<double>::quiet_NaN();
  return twice / (2.0 * static_cast<double>(pos) * static_cast<double>(neg_below));
}

struct ShardJob {
  Split split;
  int64_t begin, end;
  std::string path;
};

struct ShardOutput {
  RangeSink sink;
  std::vector<double> probabilities;  // test shards only
  std::vector<uint8_t> labels;
  absl::Status status;
};

absl::Status RunShard(const SyntheticGenerator& gen, const ShardJob& job,
                      std::vector<uint64_t>* histogram, ShardOutput* out) {
  storage::TFRecordWriterOptions wo;
  wo.compression = gen.options().compression;
  wo.compression_level = gen.options().compression_level;
  ASSIGN_OR_RETURN(std::unique_ptr<storage::TFRecordWriter> writer,
                   storage::TFRecordWriter::Open(job.path, wo));
  if (job.split == Split::kTest) {
    out->probabilities.reserve(static_cast<size_t>(job.end - job.begin));
    out->labels.reserve(static_cast<size_t>(job.end - job.begin));
    out->sink.probabilities = &out->probabilities;
    out->sink.labels = &out->labels;
  } else {
    out->sink.logit_histogram = histogram;
  }
  const absl::Status written =
      gen.WriteRange(job.split, job.begin, job.end, writer.get(), &out->sink);
  // Close even after a failed write so the descriptor is released; the
  // first error is the one worth reporting.
  const absl::Status closed = writer->Close();
  out->sink.probabilities = nullptr;
  out->sink.labels = nullptr;
  out->sink.logit_histogram = nullptr;
  RETURN_IF_ERROR(written);
  return closed;
}

SplitSummary Summarize(Split split, const std::vector<ShardJob>& jobs,
                       const std::vector<ShardOutput>& outputs,
                       const std::vector<uint64_t>& histogram) {
  SplitSummary s;
  double sum_p = 0, sum_ll = 0, sum_h = 0;
  std::vector<double> probabilities;
  std::vector<uint8_t> labels;
  // Shard order, so the sums do not depend on which thread ran what.
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].split != split) continue;
    const RangeSink& r = outputs[i].sink;
    s.files.push_back(jobs[i].path);
    s.examples += r.examples;
    s.positives += r.positives;
    sum_p += r.sum_probability;
    sum_ll += r.sum_logloss;
    sum_h += r.sum_entropy;
    probabilities.insert(probabilities.end(), outputs[i].probabilities.begin(),
                         outputs[i].probabilities.end());
    labels.insert(labels.end(), outputs[i].labels.begin(), outputs[i].labels.end());
  }
  if (s.examples > 0) {
    const double n = static_cast<double>(s.examples);
    s.base_rate = static_cast<double>(s.positives) / n;
    s.mean_probability = sum_p / n;
    s.bayes_logloss = sum_ll / n;
    s.expected_logloss = sum_h / n;
  }
  s.bayes_auc = split == Split::kTest ? ExactAuc(probabilities, labels) : HistogramAuc(histogram);
  return s;
}

std::string FeatureSpecYaml(const SyntheticOptions& o) {
  // features/feature_spec.h's shape: ids are varlen int64 columns (one
  // value each here), dense counts fixed floats of length 1.
  std::string y = absl::StrCat("# Written by `brook data gen` (seed ", o.seed, ").\n",
                               "label: {name: label, type: float}\n", "on_missing: default\n",
                               "on_type_mismatch: error\n", "features:\n");
  for (int j = 0; j < o.num_dense; ++j)
    absl::StrAppend(&y, "  - {name: I", j + 1, ", type: float, length: 1, default: 0.0}\n");
  for (int i = 0; i < o.num_categorical; ++i)
    absl::StrAppend(&y, "  - {name: C", i + 1, ", type: int64, kind: varlen}\n");
  return y;
}

nlohmann::json SummaryJson(const SplitSummary& s, bool exact_auc) {
  nlohmann::json j;
  j["examples"] = s.examples;
  j["positives"] = s.positives;
  j["base_rate"] = s.base_rate;
  j["mean_probability"] = s.mean_probability;
  j["bayes_auc"] = std::isnan(s.bayes_auc) ? nlohmann::json(nullptr) : nlohmann::json(s.bayes_auc);
  j["bayes_auc_method"] = exact_auc ? "exact: true probabilities vs sampled labels, ties count half"
                                    : absl::StrCat("logit histogram, ", kLogitBins, " bins over [-",
                                                   kLogitRange, ", ", kLogitRange, "]");
  j["bayes_logloss"] = s.bayes_logloss;
  j["expected_logloss"] = s.expected_logloss;
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : s.files) files.push_back(std::filesystem::path(f).filename().string());
  j["files"] = files;
  return j;
}

nlohmann::json GroundTruthJson(const SyntheticGenerator& gen, const SyntheticResult& r) {
  const SyntheticOptions& o = gen.options();
  const GroundTruthModel& m = gen.model();
  nlohmann::json j;
  j["format"] = "brook-synthetic-ctr/1";
  j["formula"] =
      "logit = bias + sum_f w_f(id_f) + sum_{f<g} <v_f(id_f), v_g(id_g)> "
      "+ dense_scale * (w2 . tanh(W1 x + b1) - dense_mean), x_j = (log1p(I_j) - mu_j) / sigma_j; "
      "w_f(id) = weight_scale * (approximately N(0,1) from hash(seed, f, id)), "
      "v_f(id)_c = factor_scale * (uniform, unit variance, from hash(seed, f, c, id)); "
      "label ~ Bernoulli(sigmoid(logit))";
  j["options"] = {
      {"seed", o.seed},
      {"train_examples", o.train_examples},
      {"test_examples", o.test_examples},
      {"shards", o.shards},
      {"test_shards", o.EffectiveTestShards()},
      {"num_dense", o.num_dense},
      {"num_categorical", o.num_categorical},
      {"cardinalities", gen.cardinalities()},
      {"zipf_exponent", o.zipf_exponent},
      {"interaction_rank", o.interaction_rank},
      {"base_ctr", o.base_ctr},
      {"logit_std", o.logit_std},
      {"compression", std::string(storage::CompressionName(o.compression))},
      {"compression_level", o.compression_level},
  };
  std::vector<double> mu, sigma;
  for (int i = 0; i < o.num_dense; ++i) {
    mu.push_back(m.dense_center()[i]);
    sigma.push_back(1.0 / m.dense_inv_spread()[i]);
  }
  j["model"] = {
      {"bias", m.bias()},
      {"weight_scale", m.weight_scale()},
      {"factor_scale", m.factor_scale()},
      {"interaction_rank", m.rank()},
      {"dense_scale", m.dense_scale()},
      {"dense_mean", m.dense_mean()},
      {"dense_mu", mu},
      {"dense_sigma", sigma},
      {"dense_shared_factor_loading", kDenseRho},
      {"hidden_units", GroundTruthModel::kHidden},
      {"w1", m.w1()},
      {"b1", m.b1()},
      {"w2", m.w2()},
  };
  j["train"] = SummaryJson(r.train, false);
  j["test"] = SummaryJson(r.test, true);
  j["feature_spec"] = "feature_spec.yaml";
  return j;
}

absl::Status WriteWholeFile(const std::string& path, std::string_view text) {
  ASSIGN_OR_RETURN(std::unique_ptr<storage::OutputStream> out, storage::OpenLocalOutput(path));
  RETURN_IF_ERROR(out->Append(text));
  return out->Close();
}

}  // namespace

absl::StatusOr<SyntheticResult> GenerateSynthetic(const SyntheticOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  if (options.output_dir.empty()) return absl::InvalidArgumentError("output_dir is empty");
  std::error_code ec;
  std::filesystem::create_directories(options.output_dir, ec);
  if (ec) {
    return absl::ErrnoToStatus(ec.value(),
                               absl::StrCat("cannot create output dir ", options.output_dir));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SyntheticGenerator> gen, SyntheticGenerator::Create(options));

  std::vector<ShardJob> jobs;
  for (Split split : {Split::kTrain, Split::kTest}) {
    const int64_t n = split == Split::kTrain ? options.train_examples : options.test_examples;
    const int k = split == Split::kTrain ? options.shards : options.EffectiveTestShards();
    // Contiguous index ranges: concatenating the shards in order gives the
    // same example sequence for any shard count.
    for (int s = 0; s < k; ++s) {
      jobs.push_back({split, n * s / k, n * (s + 1) / k,
                      (std::filesystem::path(options.output_dir) /
                       SyntheticShardName(split, s, k, options.compression))
                          .string()});
    }
  }
  std::vector<ShardOutput> outputs(jobs.size());
  const int threads = std::max(1, std::min<int>(options.threads, static_cast<int>(jobs.size())));
  std::vector<std::vector<uint64_t>> histograms(threads);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&](int t) {
    while (!failed.load(std::memory_order_relaxed)) {
      const size_t i = next.fetch_add(1);
      if (i >= jobs.size()) return;
      outputs[i].status = RunShard(*gen, jobs[i], &histograms[t], &outputs[i]);
      if (!outputs[i].status.ok()) failed.store(true, std::memory_order_relaxed);
    }
  };
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = ProcessCpuSeconds();
  if (threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
    for (auto& th : pool) th.join();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
  for (const ShardOutput& o : outputs) RETURN_IF_ERROR(o.status);

  // Counts are integers, so the merged histogram is the same for any thread
  // count.
  std::vector<uint64_t> histogram(2 * kLogitBins, 0);
  for (const auto& h : histograms) {
    for (size_t b = 0; b < h.size(); ++b) histogram[b] += h[b];
  }
  SyntheticResult result;
  result.train = Summarize(Split::kTrain, jobs, outputs, histogram);
  result.test = Summarize(Split::kTest, jobs, outputs, histogram);
  result.seconds = seconds;
  result.cpu_seconds = cpu_seconds;
  const int64_t total = result.train.examples + result.test.examples;
  result.examples_per_second = seconds > 0 ? static_cast<double>(total) / seconds : 0;
  const std::filesystem::path dir(options.output_dir);
  result.feature_spec_path = (dir / "feature_spec.yaml").string();
  result.ground_truth_path = (dir / "ground_truth.json").string();
  RETURN_IF_ERROR(WriteWholeFile(result.feature_spec_path, FeatureSpecYaml(options)));
  const std::string json =
      GroundTruthJson(*gen, result).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  RETURN_IF_ERROR(WriteWholeFile(result.ground_truth_path, json + "\n"));
  return result;
}

}  // namespace brook::datatools
