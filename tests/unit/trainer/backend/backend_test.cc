// Every Backend op against a naive reference loop (in double), over random
// shapes that include 1 and odd sizes, forward and backward. One
// value-parameterized suite over backends: the CPU backend with each GEMM
// kernel (baseline, AVX2, AVX-512; skipped where the CPU lacks one), with 1
// thread (no pool) and with 3 threads, and the CUDA backend (Cuda/...),
// which is instantiated in every build and skips, saying why, where its
// plugin or a GPU is missing. Since CPU and CUDA pass the same references
// and tolerances, this is also the op-by-op CPU-vs-CUDA parity test
// (cuda_parity_test.cc compares whole model steps).
#include "trainer/backend/backend.h"

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/backend/backend_loader.h"
#include "trainer/backend/cpu_backend.h"

namespace brook::trainer {
namespace {

using ::testing::HasSubstr;

struct BackendParam {
  std::string name;
  int threads;                 // cpu only
  CpuIsa isa;                  // cpu only
  std::string device = "cpu";  // as CreateBackend takes it
};

// Keeps the test names CTest lists readable and stable (by default gtest
// prints the struct's bytes, pointers included).
void PrintTo(const BackendParam& p, std::ostream* os) { *os << p.name; }

class BackendTest : public ::testing::TestWithParam<BackendParam> {
 protected:
  void SetUp() override {
    if (GetParam().device != "cpu") {
      absl::StatusOr<std::unique_ptr<Backend>> b = CreateBackend(GetParam().device, {});
      if (!b.ok()) GTEST_SKIP() << "SKIPPED: no CUDA backend here: " << b.status();
      backend_ = std::move(b).value();
      return;
    }
    if (!CpuIsaSupported(GetParam().isa)) {
      GTEST_SKIP() << "this CPU cannot run the " << CpuIsaName(GetParam().isa) << " kernels";
    }
    auto b = CreateCpuBackend(CpuBackendOptions{GetParam().threads, GetParam().isa});
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = std::move(b).value();
  }

  std::unique_ptr<Buffer> Floats(const std::vector<float>& v) {
    auto b = backend_->Alloc(DType::kFloat32, v.size());
    EXPECT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(backend_->Upload(v, b->get(), 0).ok());
    return std::move(b).value();
  }
  std::unique_ptr<Buffer> Uints(const std::vector<uint32_t>& v) {
    auto b = backend_->Alloc(DType::kUint32, v.size());
    EXPECT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(backend_->Upload(v, b->get(), 0).ok());
    return std::move(b).value();
  }
  std::vector<float> Get(const Buffer& b) {
    std::vector<float> v(b.size());
    EXPECT_TRUE(backend_->Download(b, 0, absl::MakeSpan(v)).ok());
    return v;
  }
  std::vector<float> Random(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng_);
    return v;
  }
  int64_t Size(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  std::unique_ptr<Backend> backend_;
  std::mt19937 rng_{12345};
};

// |got - want| <= tol * (1 + |want|), element by element.
void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_GE(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
  }
}

// Shapes: always some 1s and odd sizes, then random ones.
std::vector<std::array<int64_t, 3>> Shapes(std::mt19937* rng) {
  std::vector<std::array<int64_t, 3>> s = {{1, 1, 1}, {1, 7, 3},    {5, 1, 9},
                                           {3, 5, 1}, {17, 33, 65}, {64, 31, 129}};
  std::uniform_int_distribution<int64_t> d(1, 70);
  for (int i = 0; i < 6; ++i) s.push_back({d(*rng), d(*rng), d(*rng)});
  return s;
}

TEST_P(BackendTest, GemmMatchesReferenceForAllTransposesAlphaBeta) {
  for (const auto& [m, n, k] : Shapes(&rng_)) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, {0.5f, 1.0f}, {-2.0f, 0.25f}}) {
          const std::vector<float> a = Random(m * k), b = Random(k * n), c = Random(m * n);
          auto ab = Floats(a), bb = Floats(b), cb = Floats(c);
          ASSERT_TRUE(backend_->Gemm(ta, tb, m, n, k, alpha, *ab, *bb, beta, cb.get()).ok());
          std::vector<double> want(m * n);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double s = 0;
              for (int64_t p = 0; p < k; ++p) {
                const double av = ta ? a[p * m + i] : a[i * k + p];
                const double bv = tb ? b[j * k + p] : b[p * n + j];
                s += av * bv;
              }
              want[i * n + j] = alpha * s + beta * c[i * n + j];
            }
          }
          ExpectNear(Get(*cb), want, 1e-5 * std::sqrt(static_cast<double>(k)) + 1e-6,
                     absl::StrCat("gemm ", m, "x", n, "x", k, " ta=", ta, " tb=", tb));
        }
      }
    }
  }
}

TEST_P(BackendTest, GemmWithBetaZeroIgnoresNaNInOutputAndKZeroScales) {
  auto a = Floats(Random(6)), b = Floats(Random(6));
  auto c = Floats(std::vector<float>(4, std::numeric_limits<float>::quiet_NaN()));
  ASSERT_TRUE(backend_->Gemm(false, false, 2, 2, 3, 1.0f, *a, *b, 0.0f, c.get()).ok());
  for (float v : Get(*c)) EXPECT_FALSE(std::isnan(v));
  auto d = Floats({1, 2, 3, 4});
  auto empty = Floats({});
  ASSERT_TRUE(backend_->Gemm(false, false, 2, 2, 0, 1.0f, *empty, *empty, 0.5f, d.get()).ok());
  EXPECT_THAT(Get(*d), ::testing::ElementsAre(0.5f, 1.0f, 1.5f, 2.0f));
}

TEST_P(BackendTest, GemmIsDeterministic) {
  const int64_t m = 300, n = 200, k = 700;
  auto a = Floats(Random(m * k)), b = Floats(Random(k * n));
  auto c1 = Floats(std::vector<float>(m * n)), c2 = Floats(std::vector<float>(m * n));
  // a is m x k; b, read transposed, is n x k.
  ASSERT_TRUE(backend_->Gemm(false, true, m, n, k, 1.0f, *a, *b, 0.0f, c1.get()).ok());
  ASSERT_TRUE(backend_->Gemm(false, true, m, n, k, 1.0f, *a, *b, 0.0f, c2.get()).ok());
  const std::vector<float> x = Get(*c1), y = Get(*c2);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0);
}

TEST_P(BackendTest, GemmRejectsShortBuffersWrongDtypeAndAliasing) {
  auto a = Floats(Random(6)), b = Floats(Random(6)), c = Floats(Random(4));
  auto u = Uints({1, 2, 3, 4, 5, 6});
  absl::Status s = backend_->Gemm(false, false, 2, 2, 4, 1.0f, *a, *b, 0.0f, c.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("a has 6 elements, needs 8"));
  s = backend_->Gemm(false, false, 2, 2, 3, 1.0f, *u, *b, 0.0f, c.get());
  EXPECT_THAT(s.message(), HasSubstr("uint32"));
  s = backend_->Gemm(false, false, 2, 2, 2, 1.0f, *c, *c, 0.0f, c.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  s = backend_->Gemm(false, false, -1, 2, 2, 1.0f, *a, *b, 0.0f, c.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(BackendTest, Copy2DCopiesAndAccumulatesStridedBlocks) {
  for (int iter = 0; iter < 10; ++iter) {
    const int64_t rows = Size(1, 9), cols = Size(1, 7);
    const int64_t ss = cols + Size(0, 3), so = Size(0, 4), ds = cols + Size(0, 5), dof = Size(0, 2);
    const std::vector<float> src = Random(rows * ss + so + cols),
                             dst = Random(rows * ds + dof + cols);
    for (bool acc : {false, true}) {
      auto sb = Floats(src), db = Floats(dst);
      ASSERT_TRUE(backend_->Copy2D(rows, cols, *sb, ss, so, db.get(), ds, dof, acc).ok());
      std::vector<double> want(dst.begin(), dst.end());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const double v = src[r * ss + so + c];
          want[r * ds + dof + c] = acc ? want[r * ds + dof + c] + v : v;
        }
      }
      ExpectNear(Get(*db), want, 1e-6, "copy2d");
    }
  }
  auto s = Floats(Random(10)), d = Floats(Random(10));
  EXPECT_EQ(backend_->Copy2D(2, 5, *s, 5, 1, d.get(), 5, 0, false).code(),
            absl::StatusCode::kInvalidArgument);  // src ends at 11
  EXPECT_EQ(backend_->Copy2D(2, 5, *s, 5, 0, d.get(), 4, 0, false).code(),
            absl::StatusCode::kInvalidArgument);  // dst rows overlap
}

TEST_P(BackendTest, BiasActivationAndItsBackwardMatchReference) {
  for (Activation act :
       {Activation::kNone, Activation::kRelu, Activation::kSigmoid, Activation::kTanh}) {
    for (const auto& [rows, cols, unused] : Shapes(&rng_)) {
      const std::vector<float> x = Random(rows * cols, -3, 3), bias = Random(cols),
                               dy = Random(rows * cols);
      auto xb = Floats(x), bb = Floats(bias), gb = Floats(dy);
      ASSERT_TRUE(backend_->BiasActivation(act, rows, cols, *bb, xb.get()).ok());
      std::vector<double> y(rows * cols), dx(rows * cols);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const double v = static_cast<double>(x[r * cols + c]) + bias[c];
          double out = v, deriv = 1;
          if (act == Activation::kRelu) {
            out = v > 0 ? v : 0;
            deriv = v > 0 ? 1 : 0;
          } else if (act == Activation::kSigmoid) {
            out = 1 / (1 + std::exp(-v));
            deriv = out * (1 - out);
          } else if (act == Activation::kTanh) {
            out = std::tanh(v);
            deriv = 1 - out * out;
          }
          y[r * cols + c] = out;
          dx[r * cols + c] = deriv * dy[r * cols + c];
        }
      }
      ExpectNear(Get(*xb), y, 1e-6, std::string(ActivationName(act)));
      ASSERT_TRUE(backend_->ActivationBackward(act, rows * cols, *xb, gb.get()).ok());
      ExpectNear(Get(*gb), dx, 1e-5, std::string(ActivationName(act)) + " backward");
    }
  }
}

TEST_P(BackendTest, BiasBackwardSumsColumns) {
  for (const auto& [rows, cols, unused] : Shapes(&rng_)) {
    const std::vector<float> dx = Random(rows * cols), init = Random(cols);
    for (bool acc : {false, true}) {
      auto xb = Floats(dx), db = Floats(init);
      ASSERT_TRUE(backend_->BiasBackward(rows, cols, *xb, acc, db.get()).ok());
      std::vector<double> want(cols);
      for (int64_t c = 0; c < cols; ++c) {
        want[c] = acc ? init[c] : 0.0;
        for (int64_t r = 0; r < rows; ++r) want[c] += dx[r * cols + c];
      }
      ExpectNear(Get(*db), want, 1e-5 * rows, "bias backward");
    }
  }
}

TEST_P(BackendTest, DropoutKeepsTheHashedMaskScalesAndItsBackwardMasks) {
  const int64_t n = 20001;
  const float rate = 0.3f;
  const std::vector<float> x = Random(n);
  auto xb = Floats(x), mb = Floats(std::vector<float>(n));
  ASSERT_TRUE(backend_->Dropout(n, rate, 77, xb.get(), mb.get()).ok());
  const std::vector<float> y = Get(*xb), mask = Get(*mb);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = DropoutKeep(77, i, rate);
    kept += keep;
    ASSERT_EQ(mask[i], keep ? 1.0f / (1.0f - rate) : 0.0f) << i;
    ASSERT_FLOAT_EQ(y[i], x[i] * mask[i]) << i;
  }
  // Binomial(20001, 0.7): stddev ~65; 5 sigma.
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.7, 5 * 65.0 / n);
  // Another seed gives another mask.
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += DropoutKeep(77, i, rate) != DropoutKeep(78, i, rate);
  EXPECT_GT(differ, n / 4);
  // Backward: dy *= mask.
  const std::vector<float> dy = Random(n);
  auto gb = Floats(dy);
  ASSERT_TRUE(backend_->Mul(n, *mb, gb.get()).ok());
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = static_cast<double>(dy[i]) * mask[i];
  ExpectNear(Get(*gb), want, 1e-6, "dropout backward");
  EXPECT_EQ(backend_->Dropout(n, 1.0f, 1, xb.get(), mb.get()).code(),
            absl::StatusCode::kInvalidArgument);
}

// A random CSR of `batch` examples over `num_rows` rows; some examples empty.
void RandomCsr(std::mt19937* rng, int64_t batch, int64_t num_rows, std::vector<uint32_t>* offsets,
               std::vector<uint32_t>* indices) {
  offsets->assign(1, 0);
  indices->clear();
  std::uniform_int_distribution<int> count(0, 4);
  std::uniform_int_distribution<uint32_t> row(0, static_cast<uint32_t>(num_rows - 1));
  for (int64_t b = 0; b < batch; ++b) {
    const int c = b == 0 ? 0 : count(*rng);  // example 0 is always empty
    for (int i = 0; i < c; ++i) indices->push_back(row(*rng));
    offsets->push_back(static_cast<uint32_t>(indices->size()));
  }
}

TEST_P(BackendTest, PoolForwardAndBackwardMatchReferenceWithStridesAndEmptyRows) {
  for (Combiner comb : {Combiner::kSum, Combiner::kMean}) {
    for (const auto& [batch, dim, num_rows] : Shapes(&rng_)) {
      std::vector<uint32_t> off, idx;
      RandomCsr(&rng_, batch, num_rows, &off, &idx);
      const int64_t stride = dim + Size(0, 3), offset = Size(0, stride - dim);
      const std::vector<float> table = Random(num_rows * dim);
      const std::vector<float> out0 = Random(batch * stride);
      auto ob = Uints(off), ib = Uints(idx), tb = Floats(table);
      std::vector<double> pooled(batch * dim, 0.0);
      for (int64_t b = 0; b < batch; ++b) {
        const double cnt = off[b + 1] - off[b];
        for (uint32_t i = off[b]; i < off[b + 1]; ++i) {
          for (int64_t d = 0; d < dim; ++d) pooled[b * dim + d] += table[idx[i] * dim + d];
        }
        if (comb == Combiner::kMean && cnt > 0) {
          for (int64_t d = 0; d < dim; ++d) pooled[b * dim + d] /= cnt;
        }
      }
      for (bool acc : {false, true}) {
        auto out = Floats(out0);
        ASSERT_TRUE(backend_
                        ->PoolForward(comb, batch, dim, *ob, *ib, *tb, num_rows, out.get(), stride,
                                      offset, acc)
                        .ok());
        std::vector<double> want(out0.begin(), out0.end());
        for (int64_t b = 0; b < batch; ++b) {
          for (int64_t d = 0; d < dim; ++d) {
            double& w = want[b * stride + offset + d];
            w = (acc ? w : 0.0) + pooled[b * dim + d];
          }
        }
        ExpectNear(Get(*out), want, 1e-5, "pool " + std::string(CombinerName(comb)));
      }
      // Backward: scatter-add into existing gradients (tables are shared).
      const std::vector<float> g = Random(batch * stride), init = Random(num_rows * dim);
      auto gb = Floats(g), dt = Floats(init);
      ASSERT_TRUE(
          backend_
              ->PoolBackward(comb, batch, dim, *ob, *ib, *gb, stride, offset, dt.get(), num_rows)
              .ok());
      std::vector<double> want(init.begin(), init.end());
      for (int64_t b = 0; b < batch; ++b) {
        const double cnt = off[b + 1] - off[b];
        const double w = comb == Combiner::kMean ? 1.0 / std::max(cnt, 1.0) : 1.0;
        for (uint32_t i = off[b]; i < off[b + 1]; ++i) {
          for (int64_t d = 0; d < dim; ++d) {
            want[idx[i] * dim + d] += w * g[b * stride + offset + d];
          }
        }
      }
      ExpectNear(Get(*dt), want, 1e-5, "pool backward " + std::string(CombinerName(comb)));
    }
  }
}

TEST_P(BackendTest, PoolRejectsBadIndexData) {
  auto table = Floats(Random(4 * 2));
  auto out = Floats(std::vector<float>(2 * 2));
  auto idx = Uints({0, 4});  // 4 >= num_rows
  auto off = Uints({0, 1, 2});
  absl::Status s =
      backend_->PoolForward(Combiner::kSum, 2, 2, *off, *idx, *table, 4, out.get(), 2, 0, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("indices[1] = 4"));
  auto bad_off = Uints({0, 2, 1});
  auto idx_ok = Uints({0, 1});
  s = backend_->PoolForward(Combiner::kSum, 2, 2, *bad_off, *idx_ok, *table, 4, out.get(), 2, 0,
                            false);
  EXPECT_THAT(s.message(), HasSubstr("decrease"));
  auto long_off = Uints({0, 1, 3});
  s = backend_->PoolBackward(Combiner::kSum, 2, 2, *long_off, *idx_ok, *out, 2, 0, table.get(), 4);
  EXPECT_THAT(s.message(), HasSubstr("offsets[batch] is 3"));
}

TEST_P(BackendTest, InteractionForwardAndBackwardMatchReference) {
  for (const auto& [batch, f0, dim] : Shapes(&rng_)) {
    const int64_t f = std::min<int64_t>(f0, 9);
    const int64_t pairs = f * (f - 1) / 2;
    const std::vector<float> x = Random(batch * f * dim), g = Random(batch * pairs);
    auto xb = Floats(x), ob = Floats(std::vector<float>(batch * pairs)), gb = Floats(g);
    auto dx = Floats(Random(batch * f * dim));  // overwritten
    ASSERT_TRUE(backend_->InteractionForward(batch, f, dim, *xb, ob.get()).ok());
    ASSERT_TRUE(backend_->InteractionBackward(batch, f, dim, *xb, *gb, dx.get()).ok());
    std::vector<double> out(batch * pairs), grad(batch * f * dim, 0.0);
    for (int64_t b = 0; b < batch; ++b) {
      int64_t p = 0;
      for (int64_t i = 0; i < f; ++i) {
        for (int64_t j = i + 1; j < f; ++j, ++p) {
          double s = 0;
          for (int64_t d = 0; d < dim; ++d) {
            const double xi = x[(b * f + i) * dim + d], xj = x[(b * f + j) * dim + d];
            s += xi * xj;
            grad[(b * f + i) * dim + d] += g[b * pairs + p] * xj;
            grad[(b * f + j) * dim + d] += g[b * pairs + p] * xi;
          }
          out[b * pairs + p] = s;
        }
      }
    }
    ExpectNear(Get(*ob), out, 1e-5 * dim, "interaction");
    ExpectNear(Get(*dx), grad, 1e-5 * f, "interaction backward");
  }
}

TEST_P(BackendTest, FmForwardAndBackwardMatchPairwiseReference) {
  for (const auto& [batch, f0, dim] : Shapes(&rng_)) {
    const int64_t f = std::min<int64_t>(f0, 12);
    const std::vector<float> x = Random(batch * f * dim), g = Random(batch), init = Random(batch);
    auto xb = Floats(x), gb = Floats(g), dx = Floats(Random(batch * f * dim));
    std::vector<double> fm(batch, 0.0), grad(batch * f * dim, 0.0);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < f; ++i) {
        for (int64_t j = i + 1; j < f; ++j) {
          for (int64_t d = 0; d < dim; ++d) {
            const double xi = x[(b * f + i) * dim + d], xj = x[(b * f + j) * dim + d];
            fm[b] += xi * xj;
            grad[(b * f + i) * dim + d] += g[b] * xj;
            grad[(b * f + j) * dim + d] += g[b] * xi;
          }
        }
      }
    }
    for (bool acc : {false, true}) {
      auto ob = Floats(init);
      ASSERT_TRUE(backend_->FmForward(batch, f, dim, *xb, acc, ob.get()).ok());
      std::vector<double> want(batch);
      for (int64_t b = 0; b < batch; ++b) want[b] = (acc ? init[b] : 0.0) + fm[b];
      ExpectNear(Get(*ob), want, 2e-5 * f * dim, "fm");
    }
    ASSERT_TRUE(backend_->FmBackward(batch, f, dim, *xb, *gb, dx.get()).ok());
    ExpectNear(Get(*dx), grad, 1e-5 * f, "fm backward");
  }
}

TEST_P(BackendTest, LossMatchesReferenceAndIsStableForLargeLogits) {
  for (LossKind kind : {LossKind::kLogLoss, LossKind::kMse}) {
    const int64_t n = 37;
    std::vector<float> z = Random(n, -6, 6), y(n);
    z[0] = 90.0f;  // sigmoid(90) == 1 in float: naive log(1 - p) would be -inf
    z[1] = -90.0f;
    for (int64_t i = 0; i < n; ++i) y[i] = kind == LossKind::kLogLoss ? (i % 3 == 0) : z[i] * 0.5f;
    y[0] = 0;
    y[1] = 1;
    auto zb = Floats(z), yb = Floats(y), pb = Floats(std::vector<float>(n)),
         gb = Floats(std::vector<float>(n));
    absl::StatusOr<double> loss = backend_->Loss(kind, n, *zb, *yb, 0.25f, pb.get(), gb.get());
    ASSERT_TRUE(loss.ok()) << loss.status();
    double want = 0;
    std::vector<double> p(n), g(n);
    for (int64_t i = 0; i < n; ++i) {
      if (kind == LossKind::kLogLoss) {
        p[i] = 1 / (1 + std::exp(-static_cast<double>(z[i])));
        want += std::max<double>(z[i], 0) - z[i] * y[i] + std::log1p(std::exp(-std::abs(z[i])));
        g[i] = 0.25 * (p[i] - y[i]);
      } else {
        p[i] = z[i];
        want += (z[i] - y[i]) * (z[i] - y[i]);
        g[i] = 0.25 * 2 * (z[i] - y[i]);
      }
    }
    EXPECT_NEAR(*loss, want, 1e-6 * want);
    EXPECT_GT(*loss, kind == LossKind::kLogLoss ? 180.0 : 0.0);  // the two +-90 logits, finite
    ExpectNear(Get(*pb), p, 1e-6, "predictions");
    ExpectNear(Get(*gb), g, 1e-6, "d_logits");
    // Without d_logits: forward only, same loss.
    absl::StatusOr<double> eval = backend_->Loss(kind, n, *zb, *yb, 0.25f, pb.get(), nullptr);
    ASSERT_TRUE(eval.ok());
    EXPECT_EQ(*eval, *loss);
  }
}

// Past what a single pass of the loss kernel's grid covers (the trainer's
// batches never get there): the grid-stride loop and the partial sums must
// still count every element once. A million logloss terms of known values.
TEST_P(BackendTest, LossOverAMillionElementsCountsEachOnce) {
  const int64_t n = 1'000'003;
  std::vector<float> z(n), y(n);
  double want = 0;
  for (int64_t i = 0; i < n; ++i) {
    z[i] = static_cast<float>(i % 7) - 3.0f;
    y[i] = static_cast<float>(i % 2);
    want += std::max<double>(z[i], 0) - z[i] * y[i] + std::log1p(std::exp(-std::abs(z[i])));
  }
  auto zb = Floats(z), yb = Floats(y), pb = Floats(std::vector<float>(n)),
       gb = Floats(std::vector<float>(n));
  absl::StatusOr<double> loss =
      backend_->Loss(LossKind::kLogLoss, n, *zb, *yb, 1.0f, pb.get(), gb.get());
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, want, 1e-6 * want);
  const std::vector<float> p = Get(*pb);
  EXPECT_NEAR(p[n - 1], 1 / (1 + std::exp(-static_cast<double>(z[n - 1]))), 1e-6);
  EXPECT_NEAR(p[n / 2], 1 / (1 + std::exp(-static_cast<double>(z[n / 2]))), 1e-6);
}

// The GPU reports its memory (from another thread too: a metrics scrape) and
// sees an allocation; the CPU backend reports nothing (process metrics cover it).
TEST_P(BackendTest, DeviceStatsDescribeTheGpuAndNothingForTheCpu) {
  if (GetParam().device == "cpu") {
    EXPECT_FALSE(backend_->device_stats().has_value());
    return;
  }
  std::optional<DeviceStats> before;
  std::thread([&] { before = backend_->device_stats(); }).join();
  ASSERT_TRUE(before.has_value());
  EXPECT_GT(before->memory_total_bytes, 1ull << 30);
  EXPECT_LE(before->memory_used_bytes, before->memory_total_bytes);
  auto big = backend_->Alloc(DType::kFloat32, 64ull << 20);  // 256 MiB
  ASSERT_TRUE(big.ok()) << big.status();
  const std::optional<DeviceStats> after = backend_->device_stats();
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(after->memory_used_bytes, before->memory_used_bytes + (200ull << 20));
  if (after->utilization.has_value()) {
    EXPECT_GE(*after->utilization, 0.0);
    EXPECT_LE(*after->utilization, 1.0);
  } else {
    std::printf("no NVML here: utilization not reported\n");
  }
}

// The GPU idle share of `brook bench trainer`: device time is counted inside
// BeginSpan..EndSpan only, never more than the host waited for it, and not
// for the host's time between spans.
TEST_P(BackendTest, SpansCountTheDeviceTimeOfTheirOpsOnly) {
  const int64_t n = GetParam().device == "cpu" ? 32 : 1024;
  auto a = Floats(Random(n * n)), b = Floats(Random(n * n)), c = Floats(Random(n * n));
  auto busy = [&] {
    const std::optional<DeviceStats> s = backend_->device_stats();
    return s.has_value() ? s->busy_seconds : -1.0;
  };
  auto gemms = [&](int count) {
    for (int i = 0; i < count; ++i) {
      ASSERT_TRUE(backend_->Gemm(false, false, n, n, n, 1.0f, *a, *b, 0.0f, c.get()).ok());
    }
  };
  if (GetParam().device == "cpu") {
    EXPECT_TRUE(backend_->BeginSpan().ok());
    gemms(1);
    EXPECT_TRUE(backend_->EndSpan().ok());
    EXPECT_FALSE(backend_->device_stats().has_value());
    return;
  }
  ASSERT_TRUE(backend_->Synchronize().ok());
  const double b0 = busy();
  ASSERT_GE(b0, 0);
  // Work outside a span is not counted.
  gemms(5);
  ASSERT_TRUE(backend_->Synchronize().ok());
  EXPECT_EQ(busy(), b0);
  // A restarted span counts once, from its second BeginSpan.
  ASSERT_TRUE(backend_->BeginSpan().ok());
  gemms(20);
  ASSERT_TRUE(backend_->Synchronize().ok());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(backend_->BeginSpan().ok());
  gemms(20);  // 20 x 2 GFLOP: milliseconds on any GPU
  ASSERT_TRUE(backend_->EndSpan().ok());
  const double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double b1 = busy();
  EXPECT_GT(b1 - b0, 0);
  EXPECT_LE(b1 - b0, host * 1.01 + 1e-5);
  // The host's sleep between two spans is idle time, not busy time.
  ASSERT_TRUE(backend_->BeginSpan().ok());
  gemms(1);
  ASSERT_TRUE(backend_->EndSpan().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(backend_->BeginSpan().ok());
  gemms(1);
  ASSERT_TRUE(backend_->EndSpan().ok());
  EXPECT_LT(busy() - b1, 0.1);
  EXPECT_EQ(backend_->EndSpan().code(), absl::StatusCode::kFailedPrecondition);
  std::printf("20 gemms %lldx%lldx%lld: %.3f ms device, %.3f ms host\n", static_cast<long long>(n),
              static_cast<long long>(n), static_cast<long long>(n), (b1 - b0) * 1e3, host * 1e3);
}

TEST_P(BackendTest, BufferMemoryOpsCheckBounds) {
  auto b = backend_->Alloc(DType::kFloat32, 5);
  ASSERT_TRUE(b.ok());
  for (float v : Get(**b)) EXPECT_EQ(v, 0.0f);  // zero-filled
  EXPECT_TRUE(backend_->Upload(std::vector<float>{1, 2}, b->get(), 3).ok());
  EXPECT_EQ(backend_->Upload(std::vector<float>{1, 2}, b->get(), 4).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->Upload(std::vector<uint32_t>{1}, b->get(), 0).code(),
            absl::StatusCode::kInvalidArgument);  // dtype
  ASSERT_TRUE(backend_->Fill(7.0f, 2, 1, b->get()).ok());
  EXPECT_THAT(Get(**b), ::testing::ElementsAre(0, 7, 7, 1, 2));
  std::vector<float> two(2);
  ASSERT_TRUE(backend_->Download(**b, 3, absl::MakeSpan(two)).ok());
  EXPECT_THAT(two, ::testing::ElementsAre(1, 2));
  EXPECT_EQ(backend_->Download(**b, 4, absl::MakeSpan(two)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend_->Synchronize().ok());
  EXPECT_EQ(backend_->name(), GetParam().device == "cpu" ? "cpu" : "cuda");
}

TEST_P(BackendTest, BuffersOfAnotherKindOfBackendAreRejected) {
  // CPU buffers are host memory, so any CPU backend may use another's; a
  // device backend must refuse them (it would hand a host pointer to a kernel).
  auto other = CreateCpuBackend(CpuBackendOptions{1}).value();
  auto foreign = other->Alloc(DType::kFloat32, 4).value();
  auto mine = Floats(Random(4));
  const absl::Status s = backend_->Copy2D(1, 4, *foreign, 4, 0, mine.get(), 4, 0, false);
  if (GetParam().device == "cpu") {
    EXPECT_TRUE(s.ok()) << s;
  } else {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("src was not allocated by"));
  }
}

TEST_P(BackendTest, LargeUploadsAndDownloadsRoundTrip) {
  // Larger than a device backend's staging chunk (64 MiB = 16 Mi floats), so
  // chunked transfers are exercised; a few uploads queued back to back.
  const size_t n = (size_t{1} << 24) + 12345;
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1000003) * 0.5f;
  auto b = backend_->Alloc(DType::kFloat32, n + 7);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(backend_->Upload(v, b->get(), 7).ok());
  const std::vector<float> small = {1, 2, 3, 4, 5, 6, 7};
  ASSERT_TRUE(backend_->Upload(small, b->get(), 0).ok());
  std::vector<float> got(n + 7);
  ASSERT_TRUE(backend_->Download(**b, 0, absl::MakeSpan(got)).ok());
  EXPECT_EQ(std::memcmp(got.data(), small.data(), small.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(got.data() + 7, v.data(), n * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Cpu, BackendTest,
                         ::testing::Values(BackendParam{"baseline1", 1, CpuIsa::kBaseline},
                                           BackendParam{"baseline3", 3, CpuIsa::kBaseline},
                                           BackendParam{"avx2_1", 1, CpuIsa::kAvx2},
                                           BackendParam{"avx512_3", 3, CpuIsa::kAvx512},
                                           BackendParam{"auto2", 2, CpuIsa::kAuto}),
                         [](const ::testing::TestParamInfo<BackendParam>& p) {
                           return p.param.name;
                         });

// The CUDA backend (device 0) through the plugin loader, as `brook trainer
// --device cuda` makes it. Skipped where the plugin or a GPU is missing.
INSTANTIATE_TEST_SUITE_P(Cuda, BackendTest,
                         ::testing::Values(BackendParam{"cuda0", 0, CpuIsa::kAuto, "cuda"}),
                         [](const ::testing::TestParamInfo<BackendParam>& p) {
                           return p.param.name;
                         });

TEST(CpuBackendTest, RejectsBadThreadCounts) {
  EXPECT_EQ(CreateCpuBackend(CpuBackendOptions{-1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCpuBackend(CpuBackendOptions{5000}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CreateCpuBackend(CpuBackendOptions{0}).ok());
}

TEST(CpuBackendTest, IsaSelection) {
  EXPECT_TRUE(CpuIsaSupported(CpuIsa::kBaseline));
  const CpuIsa best = BestCpuIsa();
  EXPECT_NE(best, CpuIsa::kAuto);
  EXPECT_TRUE(CpuIsaSupported(best));
  RecordProperty("best_isa", std::string(CpuIsaName(best)));
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    absl::StatusOr<std::unique_ptr<Backend>> b = CreateCpuBackend({1, isa});
    EXPECT_EQ(b.ok(), CpuIsaSupported(isa));
    if (!b.ok()) {
      EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
    }
  }
}

// The kernels differ only in rounding: the same product from each ISA
// agrees to float accuracy, and a GEMM split over threads equals the
// single-threaded one to the same accuracy.
TEST(CpuBackendTest, KernelsAndThreadSplitsAgree) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  const int64_t m = 257, n = 129, k = 300;
  std::vector<float> a(m * k), b(k * n);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  std::vector<std::vector<float>> results;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!CpuIsaSupported(isa)) continue;
    for (int threads : {1, 4}) {
      auto be = CreateCpuBackend({threads, isa}).value();
      auto ab = be->Alloc(DType::kFloat32, a.size()).value();
      auto bb = be->Alloc(DType::kFloat32, b.size()).value();
      auto cb = be->Alloc(DType::kFloat32, m * n).value();
      ASSERT_TRUE(be->Upload(a, ab.get(), 0).ok());
      ASSERT_TRUE(be->Upload(b, bb.get(), 0).ok());
      ASSERT_TRUE(be->Gemm(false, false, m, n, k, 1.0f, *ab, *bb, 0.0f, cb.get()).ok());
      std::vector<float> c(m * n);
      ASSERT_TRUE(be->Download(*cb, 0, absl::MakeSpan(c)).ok());
      results.push_back(std::move(c));
    }
  }
  ASSERT_GE(results.size(), 2u);
  for (size_t r = 1; r < results.size(); ++r) {
    for (size_t i = 0; i < results[0].size(); ++i) {
      ASSERT_NEAR(results[r][i], results[0][i], 1e-4) << r << " " << i;
    }
  }
}

}  // namespace
}  // namespace brook::trainer
