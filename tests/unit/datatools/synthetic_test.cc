#include "datatools/synthetic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "features/feature_spec.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/test_util.h"

namespace brook::datatools {
namespace {

// ------------------------------------------------------------------ helpers

long double ZipfNorm(uint64_t n, double s) {
  long double h = 0;
  for (uint64_t k = n; k >= 1; --k) h += std::pow(static_cast<long double>(k), -s);
  return h;
}

// Mann-Whitney U with mid-ranks: an AUC written independently of ExactAuc.
double MidRankAuc(const std::vector<double>& scores, const std::vector<int>& labels) {
  std::vector<size_t> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  long double rank_sum = 0;
  long double pos = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
    const long double mid_rank =
        (static_cast<long double>(i + 1) + static_cast<long double>(j)) / 2;
    for (size_t k = i; k < j; ++k) {
      if (labels[order[k]]) {
        rank_sum += mid_rank;
        pos += 1;
      }
    }
    i = j;
  }
  const long double neg = static_cast<long double>(scores.size()) - pos;
  return static_cast<double>((rank_sum - pos * (pos + 1) / 2) / (pos * neg));
}

struct ParsedExample {
  float label = 0;
  std::vector<float> dense;
  std::vector<uint64_t> ids;
  std::string bytes;
};

std::vector<ParsedExample> ReadExamples(const std::string& path, int num_dense, int num_cat) {
  std::vector<ParsedExample> out;
  storage::TFRecordReaderOptions ro;
  ro.compression = storage::CompressionFromPath(path);
  auto reader = storage::TFRecordReader::Open(path, ro);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  std::string_view record;
  brook::tf::Example ex;
  while (true) {
    auto more = (*reader)->Next(&record);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    EXPECT_TRUE(ex.ParseFromArray(record.data(), static_cast<int>(record.size())));
    const auto& fmap = ex.features().feature();
    ParsedExample p;
    p.bytes = std::string(record);
    p.label = fmap.at("label").float_list().value(0);
    for (int j = 0; j < num_dense; ++j) {
      p.dense.push_back(fmap.at("I" + std::to_string(j + 1)).float_list().value(0));
    }
    for (int f = 0; f < num_cat; ++f) {
      p.ids.push_back(
          static_cast<uint64_t>(fmap.at("C" + std::to_string(f + 1)).int64_list().value(0)));
    }
    EXPECT_EQ(fmap.size(), static_cast<size_t>(1 + num_dense + num_cat));
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<ParsedExample> ReadSplit(const std::vector<std::string>& files, int d, int f) {
  std::vector<ParsedExample> all;
  for (const auto& path : files) {
    auto part = ReadExamples(path, d, f);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

nlohmann::json ReadJson(const std::string& path) {
  return nlohmann::json::parse(brook::testing::ReadFileOrDie(path));
}

SyntheticOptions SmallOptions(const std::string& dir) {
  SyntheticOptions o;
  o.seed = 11;
  o.train_examples = 6000;
  o.test_examples = 20000;
  o.shards = 3;
  o.output_dir = dir;
  return o;
}

// ------------------------------------------------------------ ZipfSampler

TEST(ZipfSamplerTest, TopRankFrequenciesMatchTheory) {
  struct Case {
    uint64_t n;
    double s;
  };
  for (const Case c : {Case{1000, 1.1}, Case{1'000'000, 1.1}, Case{1'000'000, 1.0}, Case{1000, 0.7},
                       Case{50, 2.0}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << c.n << " s=" << c.s);
    ZipfSampler z(c.n, c.s);
    SplitMix64 rng(123);
    constexpr int kDraws = 400000;
    std::vector<int> counts(11, 0);
    std::map<std::pair<uint64_t, uint64_t>, int> range_counts;
    for (int i = 0; i < kDraws; ++i) {
      const uint64_t k = z.Sample(&rng);
      ASSERT_GE(k, 1u);
      ASSERT_LE(k, c.n);
      if (k <= 10) ++counts[k];
      if (k >= 1000 && k < 1100) ++range_counts[{1000, 1100}];
      if (k >= 5000 && k < 6000) ++range_counts[{5000, 6000}];
      if (k >= 100'000 && k < 200'000) ++range_counts[{100'000, 200'000}];
    }
    const long double norm = ZipfNorm(c.n, c.s);
    // Mass of rank ranges on both sides of the sampler's head table (1024
    // ranks) and deep in the tail, where it falls back to inversion.
    for (const auto& [lo, hi] :
         {std::pair<uint64_t, uint64_t>{1000, 1100}, {5000, 6000}, {100'000, 200'000}}) {
      if (hi > c.n) continue;
      long double mass = 0;
      for (uint64_t k = lo; k < hi; ++k) mass += std::pow(static_cast<long double>(k), -c.s);
      const double p = static_cast<double>(mass / norm);
      const double sigma = std::sqrt(p * (1 - p) / kDraws);
      EXPECT_NEAR(static_cast<double>(range_counts[{lo, hi}]) / kDraws, p, 5 * sigma + 1e-5)
          << "ranks [" << lo << ", " << hi << ")";
    }
    for (int k = 1; k <= 10; ++k) {
      const double p = static_cast<double>(std::pow(static_cast<long double>(k), -c.s) / norm);
      const double sigma = std::sqrt(p * (1 - p) / kDraws);
      EXPECT_NEAR(static_cast<double>(counts[k]) / kDraws, p, 5 * sigma + 1e-5) << "rank " << k;
    }
  }
}

TEST(ZipfSamplerTest, HugeCardinalityStaysInRangeAndReachesTheTail) {
  const uint64_t n = 100'000'000;
  ZipfSampler z(n, 1.1);
  SplitMix64 rng(7);
  uint64_t c1 = 0, c2 = 0, beyond_million = 0;
  for (int i = 0; i < 200000; ++i) {
    const uint64_t k = z.Sample(&rng);
    ASSERT_GE(k, 1u);
    ASSERT_LE(k, n);
    c1 += k == 1;
    c2 += k == 2;
    beyond_million += k > 1'000'000;
  }
  EXPECT_GT(c1, c2);
  // About 10% of the mass lies beyond rank 10^6 for s = 1.1, n = 10^8.
  EXPECT_GT(beyond_million, 10000u);
}

TEST(ZipfSamplerTest, SingleElement) {
  ZipfSampler z(1, 1.1);
  SplitMix64 rng(1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(z.Sample(&rng), 1u);
}

// ---------------------------------------------------------- IdPermutation

TEST(IdPermutationTest, IsABijectionOnTheRange) {
  for (uint64_t n : {1ull, 2ull, 3ull, 7ull, 1000ull, 4096ull, 5001ull}) {
    IdPermutation perm(n, 99);
    std::set<uint64_t> seen;
    for (uint64_t x = 0; x < n; ++x) {
      const uint64_t y = perm(x);
      ASSERT_LT(y, n);
      seen.insert(y);
    }
    EXPECT_EQ(seen.size(), n);
  }
}

TEST(IdPermutationTest, ScattersPopularRanksAtHugeCardinality) {
  const uint64_t n = 100'000'000;
  IdPermutation a(n, 1), b(n, 2);
  std::set<uint64_t> first;
  for (uint64_t x = 0; x < 3; ++x) {
    EXPECT_LT(a(x), n);
    first.insert(a(x));
  }
  EXPECT_EQ(first.size(), 3u);
  EXPECT_FALSE(first.count(0) && first.count(1) && first.count(2));
  EXPECT_NE(a(0), b(0));  // features differ
}

// ---------------------------------------------------------------- options

TEST(SyntheticOptionsTest, RejectsBadValues) {
  auto invalid = [](auto mutate) {
    SyntheticOptions o;
    mutate(o);
    return o.Validate().code() == absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(SyntheticOptions().Validate().ok());
  EXPECT_TRUE(invalid([](SyntheticOptions& o) { o.train_examples = -1; }));
  EXPECT_TRUE(invalid([](SyntheticOptions& o) { o.shards = 0; }));
  EXPECT_TRUE(invalid([](SyntheticOptions& o) { o.shards = 100000; }));
  EXPECT_TRUE(invalid([](SyntheticOptions& o) { o.zipf_exponent = 0; }));
  EXPECT_TRUE(invalid([](SyntheticOptions& o) { o.zipf_exponent = NAN; }));
  EXPECT_TRUE(invalid([](SyntheticOptions& o) { o.interaction_rank = 65; }));
  EXPECT_TRUE(invalid([](SyntheticOptions& o) { o.base_ctr = 1.0; }));
  EXPECT_TRUE(invalid([](SyntheticOptions& o) { o.cardinalities = {10, 20}; }));
  EXPECT_TRUE(invalid([](SyntheticOptions& o) { o.max_cardinality = 0; }));
  EXPECT_TRUE(invalid([](SyntheticOptions& o) { o.threads = 0; }));
}

TEST(SyntheticOptionsTest, DefaultCardinalitiesFollowCriteoUpToTheMax) {
  SyntheticOptions o;
  auto c = o.EffectiveCardinalities();
  ASSERT_EQ(c.size(), 26u);
  EXPECT_EQ(*std::max_element(c.begin(), c.end()), 1'000'000u);
  EXPECT_LE(*std::min_element(c.begin(), c.end()), 10u);
  o.max_cardinality = 100'000'000;
  c = o.EffectiveCardinalities();
  EXPECT_EQ(*std::max_element(c.begin(), c.end()), 100'000'000u);
  o.cardinalities = std::vector<uint64_t>(26, 5);
  EXPECT_EQ(o.EffectiveCardinalities(), o.cardinalities);
}

TEST(ExactAucTest, CountsTiesHalf) {
  const std::vector<double> s = {0.1, 0.4, 0.35, 0.8};
  const std::vector<uint8_t> y = {0, 0, 1, 1};
  EXPECT_DOUBLE_EQ(ExactAuc(s, y), 0.75);
  const std::vector<double> tied = {0.5, 0.5, 0.5, 0.5};
  EXPECT_DOUBLE_EQ(ExactAuc(tied, y), 0.5);
  EXPECT_TRUE(std::isnan(ExactAuc(s, std::vector<uint8_t>{1, 1, 1, 1})));
}

// ------------------------------------------------------- GroundTruthModel

TEST(GroundTruthModelTest, LogitIsTheSumOfItsParts) {
  SyntheticOptions o;
  o.seed = 5;
  auto gen = SyntheticGenerator::Create(o);
  ASSERT_TRUE(gen.ok()) << gen.status();
  const GroundTruthModel& m = (*gen)->model();
  const auto card = (*gen)->cardinalities();
  SyntheticExample ex;
  for (int i = 0; i < 200; ++i) {
    (*gen)->Draw(Split::kTrain, i, &ex);
    ASSERT_EQ(ex.dense.size(), 13u);
    ASSERT_EQ(ex.ids.size(), 26u);
    for (float v : ex.dense) {
      EXPECT_GE(v, 0.0f);
      EXPECT_EQ(v, std::floor(v));
      EXPECT_LT(v, 16777216.0f);
    }
    for (size_t f = 0; f < ex.ids.size(); ++f) EXPECT_LT(ex.ids[f], card[f]);
    double expect = m.bias() + m.DenseTerm(ex.dense);
    std::vector<std::vector<double>> v(26, std::vector<double>(m.rank()));
    for (int f = 0; f < 26; ++f) {
      expect += m.Weight(f, ex.ids[f]);
      m.Factor(f, ex.ids[f], v[f]);
    }
    for (int f = 0; f < 26; ++f) {
      for (int g = f + 1; g < 26; ++g) {
        for (int c = 0; c < m.rank(); ++c) expect += v[f][c] * v[g][c];
      }
    }
    EXPECT_NEAR(m.Logit(ex.dense, ex.ids), expect, 1e-9);
    EXPECT_DOUBLE_EQ(ex.logit, m.Logit(ex.dense, ex.ids));
    EXPECT_NEAR(ex.probability, 1 / (1 + std::exp(-expect)), 1e-12);
    EXPECT_TRUE(ex.label == 0.0f || ex.label == 1.0f);
  }
}

TEST(GroundTruthModelTest, LogitIsFiniteForAnyParsedValues) {
  // A model scoring real files must not trip over values it never writes.
  auto gen = SyntheticGenerator::Create(SyntheticOptions());
  ASSERT_TRUE(gen.ok());
  const std::vector<uint64_t> ids(26, ~uint64_t{0});
  for (float v : {1e30f, -5.0f, 0.5f, 4095.0f, 4096.0f, 3e9f, NAN, INFINITY}) {
    const std::vector<float> dense(13, v);
    EXPECT_TRUE(std::isfinite((*gen)->model().Logit(dense, ids))) << v;
  }
}

TEST(GroundTruthModelTest, SameSeedSameModelAndExamples) {
  SyntheticOptions o;
  o.seed = 77;
  auto a = SyntheticGenerator::Create(o);
  auto b = SyntheticGenerator::Create(o);
  o.seed = 78;
  auto c = SyntheticGenerator::Create(o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ((*a)->model().bias(), (*b)->model().bias());
  SyntheticExample x, y, z;
  (*a)->Draw(Split::kTest, 12345, &x);
  (*b)->Draw(Split::kTest, 12345, &y);
  (*c)->Draw(Split::kTest, 12345, &z);
  EXPECT_EQ(x.ids, y.ids);
  EXPECT_EQ(x.dense, y.dense);
  EXPECT_EQ(x.label, y.label);
  EXPECT_NE(x.ids, z.ids);
  (*a)->Draw(Split::kTrain, 12345, &z);  // splits differ too
  EXPECT_NE(x.ids, z.ids);
}

TEST(GroundTruthModelTest, CalibrationHitsTheRequestedBaseRate) {
  for (double ctr : {0.05, 0.25, 0.5}) {
    SyntheticOptions o;
    o.seed = 3;
    o.base_ctr = ctr;
    auto gen = SyntheticGenerator::Create(o);
    ASSERT_TRUE(gen.ok());
    SyntheticExample ex;
    double sum = 0;
    constexpr int kN = 20000;
    for (int i = 0; i < kN; ++i) {
      (*gen)->Draw(Split::kTrain, i, &ex);
      sum += ex.probability;
    }
    EXPECT_NEAR(sum / kN, ctr, 0.02 * std::max(1.0, ctr / 0.1)) << ctr;
  }
}

TEST(GroundTruthModelTest, DegenerateLayoutsWork) {
  // No categorical, no dense, a single categorical (no pairs), rank 0.
  for (auto [d, f, k] : {std::tuple{0, 3, 4}, std::tuple{4, 0, 4}, std::tuple{2, 1, 4},
                         std::tuple{2, 5, 0}, std::tuple{0, 0, 0}}) {
    SyntheticOptions o;
    o.num_dense = d;
    o.num_categorical = f;
    o.interaction_rank = k;
    auto gen = SyntheticGenerator::Create(o);
    ASSERT_TRUE(gen.ok()) << gen.status();
    SyntheticExample ex;
    (*gen)->Draw(Split::kTrain, 0, &ex);
    EXPECT_EQ(ex.dense.size(), static_cast<size_t>(d));
    EXPECT_EQ(ex.ids.size(), static_cast<size_t>(f));
    EXPECT_TRUE(std::isfinite(ex.probability));
  }
}

// ------------------------------------------------------- GenerateSynthetic

TEST(GenerateSyntheticTest, GroundTruthMatchesAnIndependentRecomputation) {
  brook::testing::TempDir dir;
  SyntheticOptions o = SmallOptions(dir.path());
  o.threads = 2;
  auto result = GenerateSynthetic(o);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->train.files.size(), 3u);
  ASSERT_EQ(result->test.files.size(), 3u);
  EXPECT_EQ(std::filesystem::path(result->train.files[1]).filename(),
            "train-00001-of-00003.tfrecord");
  const nlohmann::json gt = ReadJson(dir.Join("ground_truth.json"));
  EXPECT_EQ(gt["test"]["examples"].get<int64_t>(), 20000);
  EXPECT_EQ(gt["train"]["examples"].get<int64_t>(), 6000);
  EXPECT_EQ(gt["options"]["seed"].get<uint64_t>(), 11u);

  // Re-derive every test probability from the parsed example alone.
  auto gen = SyntheticGenerator::Create(o);
  ASSERT_TRUE(gen.ok());
  const auto test = ReadSplit(result->test.files, 13, 26);
  ASSERT_EQ(test.size(), 20000u);
  std::vector<double> p;
  std::vector<int> y;
  double logloss = 0;
  int64_t positives = 0;
  for (const auto& ex : test) {
    const double prob = (*gen)->model().Probability(ex.dense, ex.ids);
    p.push_back(prob);
    y.push_back(ex.label > 0.5f);
    positives += ex.label > 0.5f;
    logloss -= ex.label > 0.5f ? std::log(prob) : std::log(1 - prob);
  }
  logloss /= static_cast<double>(test.size());
  const double auc = MidRankAuc(p, y);
  EXPECT_NEAR(gt["test"]["bayes_auc"].get<double>(), auc, 1e-9);
  EXPECT_NEAR(gt["test"]["bayes_logloss"].get<double>(), logloss, 1e-9);
  EXPECT_EQ(gt["test"]["positives"].get<int64_t>(), positives);
  EXPECT_NEAR(result->test.bayes_auc, auc, 1e-9);

  // Plausible, CTR-like difficulty.
  EXPECT_GT(auc, 0.65);
  EXPECT_LT(auc, 0.95);
  const double base = gt["test"]["base_rate"].get<double>();
  EXPECT_GT(base, 0.1);
  EXPECT_LT(base, 0.5);

  // Train shards hold contiguous ranges adding up to the total, and the
  // train AUC (from a logit histogram) is close to the exact one.
  const auto train = ReadSplit(result->train.files, 13, 26);
  ASSERT_EQ(train.size(), 6000u);
  std::vector<double> tp;
  std::vector<int> ty;
  for (const auto& ex : train) {
    tp.push_back((*gen)->model().Probability(ex.dense, ex.ids));
    ty.push_back(ex.label > 0.5f);
  }
  EXPECT_NEAR(gt["train"]["bayes_auc"].get<double>(), MidRankAuc(tp, ty), 1e-4);
}

TEST(GenerateSyntheticTest, FeatureSpecParsesAndMatchesTheData) {
  brook::testing::TempDir dir;
  SyntheticOptions o = SmallOptions(dir.path());
  o.train_examples = 10;
  o.test_examples = 10;
  ASSERT_TRUE(GenerateSynthetic(o).ok());
  auto spec = input::FeatureSpec::FromYamlFile(dir.Join("feature_spec.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->label_name, "label");
  EXPECT_EQ(spec->label_type, input::FeatureType::kFloat);
  ASSERT_EQ(spec->features.size(), 39u);
  const auto& i1 = spec->features[spec->IndexOf("I1")];
  EXPECT_EQ(i1.type, input::FeatureType::kFloat);
  EXPECT_EQ(i1.kind, input::FeatureKind::kFixed);
  EXPECT_EQ(i1.length, 1);
  const auto& c26 = spec->features[spec->IndexOf("C26")];
  EXPECT_EQ(c26.type, input::FeatureType::kInt64);
  EXPECT_EQ(c26.kind, input::FeatureKind::kVarLen);
}

std::vector<std::string> ListFiles(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(GenerateSyntheticTest, SameSeedGivesByteIdenticalFilesForAnyThreadCount) {
  brook::testing::TempDir a, b, c;
  SyntheticOptions o = SmallOptions(a.path());
  o.threads = 1;
  ASSERT_TRUE(GenerateSynthetic(o).ok());
  o.output_dir = b.path();
  o.threads = 3;
  ASSERT_TRUE(GenerateSynthetic(o).ok());
  const auto names = ListFiles(a.path());
  ASSERT_EQ(names, ListFiles(b.path()));
  ASSERT_EQ(names.size(), 3u + 3u + 2u);
  for (const auto& n : names) {
    EXPECT_EQ(brook::testing::ReadFileOrDie(a.Join(n)), brook::testing::ReadFileOrDie(b.Join(n)))
        << n;
  }
  o.output_dir = c.path();
  o.seed = 12;
  ASSERT_TRUE(GenerateSynthetic(o).ok());
  for (const auto& n : names) {
    EXPECT_NE(brook::testing::ReadFileOrDie(a.Join(n)), brook::testing::ReadFileOrDie(c.Join(n)))
        << n;
  }
}

TEST(GenerateSyntheticTest, ExampleSequenceDoesNotDependOnShardCount) {
  brook::testing::TempDir a, b;
  SyntheticOptions o = SmallOptions(a.path());
  o.shards = 1;
  o.test_examples = 500;
  auto one = GenerateSynthetic(o);
  ASSERT_TRUE(one.ok());
  o.output_dir = b.path();
  o.shards = 7;
  auto seven = GenerateSynthetic(o);
  ASSERT_TRUE(seven.ok());
  ASSERT_EQ(seven->train.files.size(), 7u);
  for (Split s : {Split::kTrain, Split::kTest}) {
    const auto& fa = s == Split::kTrain ? one->train.files : one->test.files;
    const auto& fb = s == Split::kTrain ? seven->train.files : seven->test.files;
    const auto ea = ReadSplit(fa, 13, 26), eb = ReadSplit(fb, 13, 26);
    ASSERT_EQ(ea.size(), eb.size());
    for (size_t i = 0; i < ea.size(); ++i) ASSERT_EQ(ea[i].bytes, eb[i].bytes) << i;
  }
}

TEST(GenerateSyntheticTest, GzipShardsAreNamedAndReadable) {
  brook::testing::TempDir dir;
  SyntheticOptions o = SmallOptions(dir.path());
  o.train_examples = 300;
  o.test_examples = 200;
  o.shards = 2;
  o.test_shards = 1;
  o.compression = storage::Compression::kGzip;
  auto r = GenerateSynthetic(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->test.files.size(), 1u);
  EXPECT_EQ(std::filesystem::path(r->test.files[0]).filename(), "test-00000-of-00001.tfrecord.gz");
  EXPECT_EQ(ReadSplit(r->train.files, 13, 26).size(), 300u);
  EXPECT_EQ(ReadSplit(r->test.files, 13, 26).size(), 200u);
}

TEST(GenerateSyntheticTest, UnwritableDirectoryIsAnError) {
  SyntheticOptions o;
  o.output_dir = "/proc/brook_cannot_write_here";
  o.train_examples = 1;
  o.test_examples = 1;
  EXPECT_FALSE(GenerateSynthetic(o).ok());
  o.output_dir = "";
  EXPECT_EQ(GenerateSynthetic(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace brook::datatools
