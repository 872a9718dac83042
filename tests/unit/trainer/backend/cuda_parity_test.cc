// CPU vs CUDA on whole model steps: the same spec, batch, pulled rows and
// dense parameters through Model::Step on both backends, for DeepFM and DLRM
// with dropout, comparing the loss, the predictions and every gradient (dense
// variables and embedding rows). backend_test.cc checks each op; this checks
// that they compose the same way, including the dropout masks, which must be
// bit-identical (op_types.h DropoutKeep) for the gradients to agree at all.
// Also the optional fast GEMM modes (TF32, BF16) against a float64 product.
// Skipped, saying why, without the plugin or a GPU.
//
// Tolerance: |cpu - cuda| <= 1e-4 * max(|cpu|, |cuda|) + 1e-5. The backends
// run the same float32 formulas but sum in different orders (cuBLAS blocking
// and FMA vs Eigen's kernels, atomicAdd in the embedding scatter) and their
// expf/tanhf differ by an ulp or two. Each op then differs by a few 1e-7
// relative; through a dozen layers and batch reductions of 64 examples that
// stays near 1e-6, well inside 1e-4. The absolute term covers entries that
// cancel to almost nothing (gradients of rarely used rows). A wrong mask, by
// contrast, changes the gradients by their own size: the CPU-only tests at
// the end show that this comparison flags a different mask and accepts the
// CPU backend's own reorderings (another GEMM kernel and thread split).
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/trainer/model/model_test_util.h"
#include "trainer/backend/backend_loader.h"
#include "trainer/backend/cpu_backend.h"
#include "trainer/model/model.h"
#include "trainer/model/model_batch.h"

namespace brook::trainer {
namespace {

constexpr double kRel = 1e-4;
constexpr double kAbs = 1e-5;

// Every kind of input (a table shared by two inputs, mean and sum combiners,
// bytes ids, fixed int64 ids, transformed dense inputs), as in model_test.cc.
constexpr char kInputs[] = R"(
sparse:
  - {feature: C1, table: ids}
  - {feature: C2, table: ids, combiner: mean}
  - {feature: country}
  - {feature: slots}
dense:
  - {feature: I1, transform: log1p}
  - {feature: I2, transform: standardize, mean: 0.5, stddev: 2.0}
  - {feature: age}
  - {feature: I3, transform: bucketize, boundaries: [-1, 0, 1.5]}
)";

// Smooth activations: relu's kink would let a 1e-7 difference in a
// pre-activation near 0 switch a gradient path on one backend only.
constexpr char kDeepFm[] =
    "model: {type: deepfm, embedding_dim: 8, hidden: [32, 16], activation: sigmoid, "
    "dropout: 0.3, seed: 5}";
constexpr char kDlrm[] =
    "model: {type: dlrm, embedding_dim: 8, bottom: [16], top: [32, 16], activation: tanh, "
    "dropout: 0.3, seed: 6}";

// A batch with its pulled rows and dense parameters, backend-independent.
struct StepInputs {
  input::FeatureSpec features;
  ModelSpec spec;
  ModelBatch batch;
  std::vector<std::vector<float>> rows, params;
};

StepInputs MakeInputs(const std::string& model_yaml, uint32_t seed, size_t examples = 64) {
  StepInputs in;
  in.features = testing::Features();
  in.spec = testing::Spec(model_yaml + kInputs, in.features);
  // Ids from a range of 20: keys repeat within and across examples, so the
  // embedding scatter-add sums several contributions per row.
  const input::ColumnarBatch cb = testing::RandomBatch(in.features, examples, seed, true, 20);
  absl::Status s = BuildModelBatch(in.spec, in.features, cb, &in.batch);
  EXPECT_TRUE(s.ok()) << s;
  in.batch.step = 17;
  std::mt19937 rng(seed * 7 + 1);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (const TableKeys& t : in.batch.tables) {
    in.rows.emplace_back(t.unique_keys.size() * t.dim);
    for (float& v : in.rows.back()) v = u(rng);
  }
  CpuBackendOptions one_thread{1};
  auto cpu = CreateCpuBackend(one_thread).value();
  auto model = Model::Create(in.spec, cpu.get()).value();
  for (const DenseVariableSpec& v : model->dense_variables()) {
    in.params.emplace_back(v.num_floats());
    for (float& x : in.params.back()) x = u(rng);
  }
  return in;
}

StepResult RunStep(Backend* backend, const StepInputs& in, bool train) {
  StepResult r;
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(in.spec, backend);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return r;
  const std::vector<absl::Span<const float>> rows(in.rows.begin(), in.rows.end());
  const std::vector<absl::Span<const float>> params(in.params.begin(), in.params.end());
  const absl::Status s = (*model)->Step(in.batch, rows, params, train, &r);
  EXPECT_TRUE(s.ok()) << backend->name() << ": " << s;
  return r;
}

// |a - b| as a fraction of what the tolerance allows: Close iff <= 1.
double Ratio(double a, double b) {
  return std::abs(a - b) / (kRel * std::max(std::abs(a), std::abs(b)) + kAbs);
}
bool Close(double a, double b) { return Ratio(a, b) <= 1; }

// Every entry of `b` that is not Close to `a`, described. *worst (if not
// null) gets the largest Ratio, a measure of the margin.
std::vector<std::string> Differences(const StepInputs& in, const StepResult& a, const StepResult& b,
                                     double* worst = nullptr) {
  std::vector<std::string> out;
  double largest = Ratio(a.loss_sum, b.loss_sum);
  auto compare = [&](const std::vector<float>& x, const std::vector<float>& y,
                     const std::string& what) {
    if (x.size() != y.size()) {
      out.push_back(absl::StrCat(what, ": ", x.size(), " vs ", y.size(), " entries"));
      return;
    }
    for (size_t i = 0; i < x.size(); ++i) {
      largest = std::max(largest, Ratio(x[i], y[i]));
      if (!Close(x[i], y[i])) out.push_back(absl::StrCat(what, "[", i, "]: ", x[i], " vs ", y[i]));
    }
  };
  if (!Close(a.loss_sum, b.loss_sum)) {
    out.push_back(absl::StrCat("loss_sum: ", a.loss_sum, " vs ", b.loss_sum));
  }
  compare(a.predictions, b.predictions, "predictions");
  if (a.table_grads.size() != b.table_grads.size() ||
      a.dense_grads.size() != b.dense_grads.size()) {
    out.push_back("different numbers of gradients");
    return out;
  }
  for (size_t t = 0; t < a.table_grads.size(); ++t) {
    compare(a.table_grads[t], b.table_grads[t], absl::StrCat("table ", in.batch.tables[t].table));
  }
  for (size_t v = 0; v < a.dense_grads.size(); ++v) {
    compare(a.dense_grads[v], b.dense_grads[v], absl::StrCat("dense variable ", v));
  }
  if (worst != nullptr) *worst = largest;
  return out;
}

void ExpectSame(const StepInputs& in, const StepResult& cpu, const StepResult& cuda) {
  double worst = 0;
  const std::vector<std::string> diffs = Differences(in, cpu, cuda, &worst);
  ::testing::Test::RecordProperty("worst_fraction_of_tolerance", absl::StrCat(worst));
  EXPECT_TRUE(diffs.empty()) << diffs.size()
                             << " entries differ (cpu vs cuda), first: " << diffs.front();
}

class CudaParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Backend>> cuda = CreateBackend("cuda", {});
    if (!cuda.ok()) GTEST_SKIP() << "SKIPPED: no CUDA backend here: " << cuda.status();
    cuda_ = std::move(cuda).value();
    cpu_ = CreateCpuBackend(CpuBackendOptions{1}).value();
  }

  void ExpectStepsMatch(const std::string& model_yaml, uint32_t seed) {
    const StepInputs in = MakeInputs(model_yaml, seed);
    for (bool train : {true, false}) {
      SCOPED_TRACE(train ? "train (dropout on)" : "eval");
      const StepResult cpu = RunStep(cpu_.get(), in, train);
      const StepResult cuda = RunStep(cuda_.get(), in, train);
      ASSERT_EQ(cpu.predictions.size(), in.batch.labels.size());
      ExpectSame(in, cpu, cuda);
    }
  }

  std::unique_ptr<Backend> cpu_, cuda_;
};

TEST_F(CudaParityTest, DeepFmStepWithDropoutMatchesCpu) { ExpectStepsMatch(kDeepFm, 21); }

TEST_F(CudaParityTest, DlrmStepWithDropoutMatchesCpu) { ExpectStepsMatch(kDlrm, 22); }

TEST_F(CudaParityTest, MseLossStepMatchesCpu) {
  ExpectStepsMatch(
      "model: {type: wide_deep, embedding_dim: 4, hidden: [16], activation: tanh, "
      "dropout: 0.5, loss: mse, seed: 7}",
      23);
}

// The optional fast GEMM modes (CudaBackendOptions::gemm_math) round the
// inputs to 10 (TF32) or 7 (BF16) mantissa bits: a 256-term dot product of
// numbers in [-1, 1] then errs by about sqrt(256) * 0.25 * 2^-10 = 4e-3
// (TF32) or 3e-2 (BF16) at one sigma; the upper bounds are 10 and 6 sigma.
// The worst of 3072 entries is ~3.5 sigma: the lower bounds (a quarter of
// that) prove the mode took effect (cuBLAS may fall back to float32, whose
// worst error here is ~1e-5), and fp32 must stay below TF32's.
TEST(CudaGemmMathTest, Tf32AndBf16StayNearTheFloat64Product) {
  const int64_t m = 64, n = 48, k = 256;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(m * k), b(k * n);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  struct Mode {
    CudaGemmMath math;
    double low, high;  // the worst error must fall between
    const char* name;
  };
  for (const Mode& mode : {Mode{CudaGemmMath::kFloat32, 0, 1e-3, "fp32_max_error"},
                           Mode{CudaGemmMath::kTf32, 3e-3, 0.05, "tf32_max_error"},
                           Mode{CudaGemmMath::kBf16, 2.5e-2, 0.2, "bf16_max_error"}}) {
    const CudaGemmMath math = mode.math;
    CudaBackendOptions options;
    options.gemm_math = math;
    absl::StatusOr<std::unique_ptr<Backend>> be = CreateCudaBackend(options);
    if (!be.ok()) GTEST_SKIP() << "SKIPPED: no CUDA backend here: " << be.status();
    auto ab = (*be)->Alloc(DType::kFloat32, a.size()).value();
    auto bb = (*be)->Alloc(DType::kFloat32, b.size()).value();
    auto cb = (*be)->Alloc(DType::kFloat32, m * n).value();
    ASSERT_TRUE((*be)->Upload(a, ab.get(), 0).ok());
    ASSERT_TRUE((*be)->Upload(b, bb.get(), 0).ok());
    ASSERT_TRUE((*be)->Gemm(false, false, m, n, k, 1.0f, *ab, *bb, 0.0f, cb.get()).ok());
    std::vector<float> c(m * n);
    ASSERT_TRUE((*be)->Download(*cb, 0, absl::MakeSpan(c)).ok());
    double worst = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t p = 0; p < k; ++p) want += static_cast<double>(a[i * k + p]) * b[p * n + j];
        worst = std::max(worst, std::abs(c[i * n + j] - want));
      }
    }
    EXPECT_LT(worst, mode.high) << mode.name;
    EXPECT_GT(worst, mode.low) << mode.name << ": the mode did not take effect";
    RecordProperty(mode.name, absl::StrCat(worst));
  }
}

// Element indices past 2^28 (byte offsets past 2^30, float counts past
// int32's reach times 8): the kernels' int64 grid-stride loops and the
// transfers' offsets, on 1 GiB buffers the trainer never allocates. GPU only
// (a CPU run would take 2 GiB of a CI machine for what its loops already
// cover); a few chosen elements are checked, not the whole.
TEST(CudaLargeTest, Copy2DAndTransfersPast2To28Elements) {
  absl::StatusOr<std::unique_ptr<Backend>> be = CreateCudaBackend({});
  if (!be.ok()) GTEST_SKIP() << "SKIPPED: no CUDA backend here: " << be.status();
  const int64_t rows = int64_t{1} << 15, cols = (int64_t{1} << 13) + 3;  // 2^28 + 98304
  const size_t n = static_cast<size_t>(rows * cols);
  auto src = (*be)->Alloc(DType::kFloat32, n);
  auto dst = (*be)->Alloc(DType::kFloat32, n);
  ASSERT_TRUE(src.ok() && dst.ok()) << src.status() << " " << dst.status();
  ASSERT_TRUE((*be)->Fill(1.5f, n, 0, src->get()).ok());
  ASSERT_TRUE((*be)->Fill(0.0f, n, 0, dst->get()).ok());
  // A marker past 2^28, uploaded at its offset.
  const size_t far = n - 5;
  const std::vector<float> marker = {7.0f, 8.0f};
  ASSERT_TRUE((*be)->Upload(marker, src->get(), far).ok());
  ASSERT_TRUE((*be)->Copy2D(rows, cols, **src, cols, 0, dst->get(), cols, 0, false).ok());
  ASSERT_TRUE((*be)->Copy2D(rows, cols, **src, cols, 0, dst->get(), cols, 0, true).ok());
  std::vector<float> got(4);
  for (size_t at : {size_t{0}, (size_t{1} << 28) - 2, size_t{1} << 28, far - 1}) {
    ASSERT_TRUE((*be)->Download(**dst, at, absl::MakeSpan(got)).ok()) << at;
    for (size_t i = 0; i < got.size(); ++i) {
      const size_t e = at + i;
      const float want = e == far ? 14.0f : e == far + 1 ? 16.0f : 3.0f;  // copied, then added
      EXPECT_EQ(got[i], want) << "element " << e;
    }
  }
}

// ---- The tolerance has power and no false alarms (CPU only; runs everywhere).

TEST(CudaParityToleranceTest, FlagsADifferentDropoutMask) {
  for (const char* yaml : {kDeepFm, kDlrm}) {
    StepInputs in = MakeInputs(yaml, 31);
    auto cpu = CreateCpuBackend(CpuBackendOptions{1}).value();
    const StepResult a = RunStep(cpu.get(), in, true);
    in.batch.step += 1;  // another step: another mask, same everything else
    const StepResult b = RunStep(cpu.get(), in, true);
    EXPECT_GT(Differences(in, a, b).size(), 10u) << yaml;
  }
}

TEST(CudaParityToleranceTest, AcceptsTheCpuBackendsOwnReorderings) {
  for (const auto& [name, yaml] : {std::pair{"deepfm", kDeepFm}, std::pair{"dlrm", kDlrm}}) {
    const StepInputs in = MakeInputs(yaml, 32);
    auto baseline = CreateCpuBackend(CpuBackendOptions{1, CpuIsa::kBaseline}).value();
    auto best = CreateCpuBackend(CpuBackendOptions{3, CpuIsa::kAuto}).value();
    double worst = 0;
    const std::vector<std::string> diffs =
        Differences(in, RunStep(baseline.get(), in, true), RunStep(best.get(), in, true), &worst);
    RecordProperty(absl::StrCat("worst_fraction_of_tolerance_", name), absl::StrCat(worst));
    EXPECT_TRUE(diffs.empty()) << name << ": " << diffs.size()
                               << " differ, first: " << diffs.front();
  }
}

}  // namespace
}  // namespace brook::trainer
