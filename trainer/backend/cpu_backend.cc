// Why Eigen and not OpenBLAS for the GEMMs:
//  - The thread pool belongs to the backend object (CpuBackendOptions::
//    num_threads, joined in the destructor). OpenBLAS's thread count is
//    process-global (openblas_set_num_threads) and its pthread build keeps
//    spinning workers that compete with the trainer's input-pipeline and
//    PS-client threads -- painful on the 2-core machines this runs on.
//  - Kernel choice by CPUID feature bits. Debian's OpenBLAS picks its kernel
//    from a table of CPU models: on this project's VMs (model name "Intel
//    Xeon Processor", AVX-512 capable) it falls back to "Prescott" (SSE3)
//    unless OPENBLAS_CORETYPE is set, and runs a 4096x429x400 SGEMM at ~17
//    GFLOP/s. Eigen compiled per ISA (internal/gemm_kernel.h) runs it at ~45
//    (AVX2) and ~75 (AVX-512) GFLOP/s on one core, close to OpenBLAS forced
//    to SkylakeX (~85).
//  - Header-only: no run-time library, no dependence on which libblas.so.3
//    Debian's alternatives system selects.
//  - The same pool runs our own loops (pooling, interactions), so one knob
//    sizes all CPU compute, and the split is ours, hence deterministic.
#include "trainer/backend/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/usable_cpus.h"
#include "trainer/backend/internal/gemm_kernel.h"
#include "trainer/backend/internal/op_checks.h"
#include "unsupported/Eigen/CXX11/ThreadPool"

namespace brook::trainer {
namespace {

class CpuBuffer final : public Buffer {
 public:
  CpuBuffer(DType dtype, size_t n) : Buffer(dtype, n) {
    if (dtype == DType::kFloat32) {
      floats_.assign(n, 0.0f);
    } else {
      uints_.assign(n, 0u);
    }
  }
  float* floats() { return floats_.data(); }
  uint32_t* uints() { return uints_.data(); }

 private:
  std::vector<float> floats_;
  std::vector<uint32_t> uints_;
};

using internal::Extent;
using internal::SatAdd;
using internal::SatMul;

constexpr internal::ArgChecks kChecks("cpu", "a CPU backend");

absl::Status Bad(absl::string_view op, absl::string_view what) { return kChecks.Bad(op, what); }

absl::Status CheckSizes(absl::string_view op, std::initializer_list<int64_t> sizes) {
  return kChecks.Sizes(op, sizes);
}

absl::Status Check(absl::string_view op, absl::string_view arg, const Buffer* b, DType dtype,
                   uint64_t need) {
  return kChecks.Buf(op, arg, b, dtype, need, dynamic_cast<const CpuBuffer*>(b) != nullptr);
}

absl::Status Distinct(absl::string_view op, const Buffer* out,
                      std::initializer_list<const Buffer*> inputs) {
  return kChecks.Distinct(op, out, inputs);
}

float* F(const Buffer& b) {
  return const_cast<CpuBuffer&>(static_cast<const CpuBuffer&>(b)).floats();
}
const uint32_t* U(const Buffer& b) {
  return const_cast<CpuBuffer&>(static_cast<const CpuBuffer&>(b)).uints();
}

float Sigmoid(float z) {
  if (z >= 0) return 1.0f / (1.0f + std::exp(-z));
  const float e = std::exp(z);
  return e / (1.0f + e);
}

float Activate(Activation act, float v) {
  switch (act) {
    case Activation::kNone:
      return v;
    case Activation::kRelu:
      return v > 0 ? v : 0.0f;
    case Activation::kSigmoid:
      return Sigmoid(v);
    case Activation::kTanh:
      return std::tanh(v);
  }
  return v;
}

float ActivationGrad(Activation act, float y) {
  switch (act) {
    case Activation::kNone:
      return 1.0f;
    case Activation::kRelu:
      return y > 0 ? 1.0f : 0.0f;
    case Activation::kSigmoid:
      return y * (1.0f - y);
    case Activation::kTanh:
      return 1.0f - y * y;
  }
  return 1.0f;
}

// Checks a CSR against its buffers and the table (the CPU backend does not
// trust index data: a bad index would read or write out of bounds).
absl::Status CheckCsr(absl::string_view op, int64_t batch, const Buffer& offsets,
                      const Buffer& indices, int64_t num_rows) {
  RETURN_IF_ERROR(Check(op, "offsets", &offsets, DType::kUint32, SatAdd(batch, 1)));
  RETURN_IF_ERROR(Check(op, "indices", &indices, DType::kUint32, 0));
  return kChecks.Csr(op, batch, U(offsets), U(indices), indices.size(), num_rows);
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(int num_threads, internal::GemmFn gemm) : threads_(num_threads), gemm_(gemm) {
    // The calling thread runs one share of every parallel op itself.
    if (num_threads > 1) pool_ = std::make_unique<Eigen::ThreadPool>(num_threads - 1);
  }

  std::string_view name() const override { return "cpu"; }

  absl::StatusOr<std::unique_ptr<Buffer>> Alloc(DType dtype, size_t n) override {
    try {
      return std::unique_ptr<Buffer>(new CpuBuffer(dtype, n));
    } catch (const std::bad_alloc&) {
    } catch (const std::length_error&) {
    }
    return absl::ResourceExhaustedError(absl::StrCat("cpu backend Alloc: cannot allocate ", n,
                                                     " elements of ", internal::DTypeName(dtype)));
  }

  absl::Status Upload(absl::Span<const float> src, Buffer* dst, size_t offset) override {
    RETURN_IF_ERROR(Check("Upload", "dst", dst, DType::kFloat32, SatAdd(offset, src.size())));
    if (!src.empty()) std::memcpy(F(*dst) + offset, src.data(), src.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status Upload(absl::Span<const uint32_t> src, Buffer* dst, size_t offset) override {
    RETURN_IF_ERROR(Check("Upload", "dst", dst, DType::kUint32, SatAdd(offset, src.size())));
    if (!src.empty()) {
      std::memcpy(const_cast<uint32_t*>(U(*dst)) + offset, src.data(),
                  src.size() * sizeof(uint32_t));
    }
    return absl::OkStatus();
  }

  absl::Status Download(const Buffer& src, size_t offset, absl::Span<float> dst) override {
    RETURN_IF_ERROR(Check("Download", "src", &src, DType::kFloat32, SatAdd(offset, dst.size())));
    if (!dst.empty()) std::memcpy(dst.data(), F(src) + offset, dst.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status Fill(float value, size_t n, size_t offset, Buffer* x) override {
    RETURN_IF_ERROR(Check("Fill", "x", x, DType::kFloat32, SatAdd(offset, n)));
    std::fill_n(F(*x) + offset, n, value);
    return absl::OkStatus();
  }

  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const Buffer& a, const Buffer& b, float beta, Buffer* c) override {
    RETURN_IF_ERROR(CheckSizes("Gemm", {m, n, k}));
    RETURN_IF_ERROR(Check("Gemm", "a", &a, DType::kFloat32, SatMul(m, k)));
    RETURN_IF_ERROR(Check("Gemm", "b", &b, DType::kFloat32, SatMul(k, n)));
    RETURN_IF_ERROR(Check("Gemm", "c", c, DType::kFloat32, SatMul(m, n)));
    RETURN_IF_ERROR(Distinct("Gemm", c, {&a, &b}));
    if (m == 0 || n == 0) return absl::OkStatus();
    float* cp = F(*c);
    if (k == 0) {
      for (int64_t i = 0; i < m * n; ++i) cp[i] = beta == 0.0f ? 0.0f : beta * cp[i];
      return absl::OkStatus();
    }
    // Split C by rows; each share is one single-threaded kernel call on the
    // matching rows of op(A) (columns of A when it is transposed).
    const float* ap = F(a);
    const float* bp = F(b);
    ParallelFor(m, 2.0 * n * k, [&](int64_t begin, int64_t end) {
      internal::GemmArgs g;
      g.trans_a = trans_a;
      g.trans_b = trans_b;
      g.m = end - begin;
      g.n = n;
      g.k = k;
      g.alpha = alpha;
      g.a = trans_a ? ap + begin : ap + begin * k;
      g.lda = trans_a ? m : k;
      g.b = bp;
      g.ldb = trans_b ? k : n;
      g.beta = beta;
      g.c = cp + begin * n;
      g.ldc = n;
      gemm_(g);
    });
    return absl::OkStatus();
  }

  absl::Status Copy2D(int64_t rows, int64_t cols, const Buffer& src, int64_t src_stride,
                      int64_t src_offset, Buffer* dst, int64_t dst_stride, int64_t dst_offset,
                      bool accumulate) override {
    RETURN_IF_ERROR(
        CheckSizes("Copy2D", {rows, cols, src_stride, src_offset, dst_stride, dst_offset}));
    RETURN_IF_ERROR(
        Check("Copy2D", "src", &src, DType::kFloat32, Extent(rows, cols, src_stride, src_offset)));
    RETURN_IF_ERROR(
        Check("Copy2D", "dst", dst, DType::kFloat32, Extent(rows, cols, dst_stride, dst_offset)));
    RETURN_IF_ERROR(Distinct("Copy2D", dst, {&src}));
    if (rows > 1 && dst_stride < cols) return Bad("Copy2D", "dst rows overlap (dst_stride < cols)");
    const float* s = F(src);
    float* d = F(*dst);
    for (int64_t r = 0; r < rows; ++r) {
      const float* sr = s + r * src_stride + src_offset;
      float* dr = d + r * dst_stride + dst_offset;
      if (accumulate) {
        for (int64_t c = 0; c < cols; ++c) dr[c] += sr[c];
      } else {
        std::memcpy(dr, sr, cols * sizeof(float));
      }
    }
    return absl::OkStatus();
  }

  absl::Status BiasActivation(Activation act, int64_t rows, int64_t cols, const Buffer& bias,
                              Buffer* x) override {
    RETURN_IF_ERROR(CheckSizes("BiasActivation", {rows, cols}));
    RETURN_IF_ERROR(Check("BiasActivation", "bias", &bias, DType::kFloat32, cols));
    RETURN_IF_ERROR(Check("BiasActivation", "x", x, DType::kFloat32, SatMul(rows, cols)));
    RETURN_IF_ERROR(Distinct("BiasActivation", x, {&bias}));
    const float* bp = F(bias);
    float* xp = F(*x);
    ParallelFor(rows, 4.0 * cols, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        float* row = xp + r * cols;
        for (int64_t c = 0; c < cols; ++c) row[c] = Activate(act, row[c] + bp[c]);
      }
    });
    return absl::OkStatus();
  }

  absl::Status ActivationBackward(Activation act, int64_t n, const Buffer& y, Buffer* dy) override {
    RETURN_IF_ERROR(CheckSizes("ActivationBackward", {n}));
    RETURN_IF_ERROR(Check("ActivationBackward", "y", &y, DType::kFloat32, n));
    RETURN_IF_ERROR(Check("ActivationBackward", "dy", dy, DType::kFloat32, n));
    RETURN_IF_ERROR(Distinct("ActivationBackward", dy, {&y}));
    const float* yp = F(y);
    float* dp = F(*dy);
    for (int64_t i = 0; i < n; ++i) dp[i] *= ActivationGrad(act, yp[i]);
    return absl::OkStatus();
  }

  absl::Status BiasBackward(int64_t rows, int64_t cols, const Buffer& dx, bool accumulate,
                            Buffer* dbias) override {
    RETURN_IF_ERROR(CheckSizes("BiasBackward", {rows, cols}));
    RETURN_IF_ERROR(Check("BiasBackward", "dx", &dx, DType::kFloat32, SatMul(rows, cols)));
    RETURN_IF_ERROR(Check("BiasBackward", "dbias", dbias, DType::kFloat32, cols));
    RETURN_IF_ERROR(Distinct("BiasBackward", dbias, {&dx}));
    const float* xp = F(dx);
    float* bp = F(*dbias);
    if (!accumulate) std::fill_n(bp, cols, 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) bp[c] += xp[r * cols + c];
    }
    return absl::OkStatus();
  }

  absl::Status Dropout(int64_t n, float rate, uint64_t seed, Buffer* x, Buffer* mask) override {
    RETURN_IF_ERROR(CheckSizes("Dropout", {n}));
    if (!(rate >= 0.0f && rate < 1.0f)) {
      return Bad("Dropout", absl::StrCat("rate must be in [0, 1), got ", rate));
    }
    RETURN_IF_ERROR(Check("Dropout", "x", x, DType::kFloat32, n));
    RETURN_IF_ERROR(Check("Dropout", "mask", mask, DType::kFloat32, n));
    RETURN_IF_ERROR(Distinct("Dropout", mask, {x}));
    const float scale = 1.0f / (1.0f - rate);
    float* xp = F(*x);
    float* mp = F(*mask);
    for (int64_t i = 0; i < n; ++i) {
      mp[i] = DropoutKeep(seed, static_cast<uint64_t>(i), rate) ? scale : 0.0f;
      xp[i] *= mp[i];
    }
    return absl::OkStatus();
  }

  absl::Status Mul(int64_t n, const Buffer& x, Buffer* y) override {
    RETURN_IF_ERROR(CheckSizes("Mul", {n}));
    RETURN_IF_ERROR(Check("Mul", "x", &x, DType::kFloat32, n));
    RETURN_IF_ERROR(Check("Mul", "y", y, DType::kFloat32, n));
    RETURN_IF_ERROR(Distinct("Mul", y, {&x}));
    const float* xp = F(x);
    float* yp = F(*y);
    for (int64_t i = 0; i < n; ++i) yp[i] *= xp[i];
    return absl::OkStatus();
  }

  absl::Status PoolForward(Combiner combiner, int64_t batch, int64_t dim, const Buffer& offsets,
                           const Buffer& indices, const Buffer& table, int64_t num_rows,
                           Buffer* out, int64_t out_stride, int64_t out_offset,
                           bool accumulate) override {
    RETURN_IF_ERROR(CheckSizes("PoolForward", {batch, dim, num_rows, out_stride, out_offset}));
    RETURN_IF_ERROR(CheckCsr("PoolForward", batch, offsets, indices, num_rows));
    RETURN_IF_ERROR(Check("PoolForward", "table", &table, DType::kFloat32, SatMul(num_rows, dim)));
    RETURN_IF_ERROR(Check("PoolForward", "out", out, DType::kFloat32,
                          Extent(batch, dim, out_stride, out_offset)));
    RETURN_IF_ERROR(Distinct("PoolForward", out, {&table}));
    if (batch > 1 && out_stride < dim) return Bad("PoolForward", "out_stride < dim");
    const uint32_t* off = U(offsets);
    const uint32_t* idx = U(indices);
    const float* t = F(table);
    float* o = F(*out);
    const double avg_ids = batch > 0 ? static_cast<double>(off[batch]) / batch : 0.0;
    ParallelFor(batch, (avg_ids + 1) * dim, [&](int64_t begin, int64_t end) {
      std::vector<float> acc(dim);
      for (int64_t b = begin; b < end; ++b) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (uint32_t i = off[b]; i < off[b + 1]; ++i) {
          const float* row = t + static_cast<int64_t>(idx[i]) * dim;
          for (int64_t d = 0; d < dim; ++d) acc[d] += row[d];
        }
        const uint32_t count = off[b + 1] - off[b];
        const float w = (combiner == Combiner::kMean && count > 0) ? 1.0f / count : 1.0f;
        float* dst = o + b * out_stride + out_offset;
        for (int64_t d = 0; d < dim; ++d) dst[d] = (accumulate ? dst[d] : 0.0f) + w * acc[d];
      }
    });
    return absl::OkStatus();
  }

  absl::Status PoolBackward(Combiner combiner, int64_t batch, int64_t dim, const Buffer& offsets,
                            const Buffer& indices, const Buffer& d_out, int64_t out_stride,
                            int64_t out_offset, Buffer* d_table, int64_t num_rows) override {
    RETURN_IF_ERROR(CheckSizes("PoolBackward", {batch, dim, num_rows, out_stride, out_offset}));
    RETURN_IF_ERROR(CheckCsr("PoolBackward", batch, offsets, indices, num_rows));
    RETURN_IF_ERROR(Check("PoolBackward", "d_out", &d_out, DType::kFloat32,
                          Extent(batch, dim, out_stride, out_offset)));
    RETURN_IF_ERROR(
        Check("PoolBackward", "d_table", d_table, DType::kFloat32, SatMul(num_rows, dim)));
    RETURN_IF_ERROR(Distinct("PoolBackward", d_table, {&d_out}));
    const uint32_t* off = U(offsets);
    const uint32_t* idx = U(indices);
    const float* g = F(d_out);
    float* dt = F(*d_table);
    // Sequential: rows repeat across examples, and a scatter-add split by
    // example would race. It is O(ids x dim), small next to the GEMMs.
    for (int64_t b = 0; b < batch; ++b) {
      const uint32_t count = off[b + 1] - off[b];
      if (count == 0) continue;
      const float w = combiner == Combiner::kMean ? 1.0f / count : 1.0f;
      const float* gb = g + b * out_stride + out_offset;
      for (uint32_t i = off[b]; i < off[b + 1]; ++i) {
        float* row = dt + static_cast<int64_t>(idx[i]) * dim;
        for (int64_t d = 0; d < dim; ++d) row[d] += w * gb[d];
      }
    }
    return absl::OkStatus();
  }

  absl::Status InteractionForward(int64_t batch, int64_t f, int64_t dim, const Buffer& x,
                                  Buffer* out) override {
    RETURN_IF_ERROR(CheckSizes("InteractionForward", {batch, f, dim}));
    const int64_t pairs = f * (f - 1) / 2;
    RETURN_IF_ERROR(
        Check("InteractionForward", "x", &x, DType::kFloat32, SatMul(SatMul(batch, f), dim)));
    RETURN_IF_ERROR(Check("InteractionForward", "out", out, DType::kFloat32, SatMul(batch, pairs)));
    RETURN_IF_ERROR(Distinct("InteractionForward", out, {&x}));
    const float* xp = F(x);
    float* op = F(*out);
    ParallelFor(batch, 2.0 * pairs * dim, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const float* xb = xp + b * f * dim;
        float* ob = op + b * pairs;
        int64_t p = 0;
        for (int64_t i = 0; i < f; ++i) {
          for (int64_t j = i + 1; j < f; ++j) {
            float s = 0.0f;
            for (int64_t d = 0; d < dim; ++d) s += xb[i * dim + d] * xb[j * dim + d];
            ob[p++] = s;
          }
        }
      }
    });
    return absl::OkStatus();
  }

  absl::Status InteractionBackward(int64_t batch, int64_t f, int64_t dim, const Buffer& x,
                                   const Buffer& d_out, Buffer* dx) override {
    RETURN_IF_ERROR(CheckSizes("InteractionBackward", {batch, f, dim}));
    const int64_t pairs = f * (f - 1) / 2;
    const uint64_t n = SatMul(SatMul(batch, f), dim);
    RETURN_IF_ERROR(Check("InteractionBackward", "x", &x, DType::kFloat32, n));
    RETURN_IF_ERROR(
        Check("InteractionBackward", "d_out", &d_out, DType::kFloat32, SatMul(batch, pairs)));
    RETURN_IF_ERROR(Check("InteractionBackward", "dx", dx, DType::kFloat32, n));
    RETURN_IF_ERROR(Distinct("InteractionBackward", dx, {&x, &d_out}));
    const float* xp = F(x);
    const float* gp = F(d_out);
    float* dp = F(*dx);
    ParallelFor(batch, 4.0 * pairs * dim, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const float* xb = xp + b * f * dim;
        const float* gb = gp + b * pairs;
        float* db = dp + b * f * dim;
        std::fill_n(db, f * dim, 0.0f);
        int64_t p = 0;
        for (int64_t i = 0; i < f; ++i) {
          for (int64_t j = i + 1; j < f; ++j) {
            const float g = gb[p++];
            for (int64_t d = 0; d < dim; ++d) {
              db[i * dim + d] += g * xb[j * dim + d];
              db[j * dim + d] += g * xb[i * dim + d];
            }
          }
        }
      }
    });
    return absl::OkStatus();
  }

  absl::Status FmForward(int64_t batch, int64_t f, int64_t dim, const Buffer& x, bool accumulate,
                         Buffer* out) override {
    RETURN_IF_ERROR(CheckSizes("FmForward", {batch, f, dim}));
    RETURN_IF_ERROR(Check("FmForward", "x", &x, DType::kFloat32, SatMul(SatMul(batch, f), dim)));
    RETURN_IF_ERROR(Check("FmForward", "out", out, DType::kFloat32, batch));
    RETURN_IF_ERROR(Distinct("FmForward", out, {&x}));
    const float* xp = F(x);
    float* op = F(*out);
    ParallelFor(batch, 3.0 * f * dim, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const float* xb = xp + b * f * dim;
        float total = 0.0f;
        for (int64_t d = 0; d < dim; ++d) {
          float s = 0.0f, sq = 0.0f;
          for (int64_t i = 0; i < f; ++i) {
            const float v = xb[i * dim + d];
            s += v;
            sq += v * v;
          }
          total += s * s - sq;
        }
        op[b] = (accumulate ? op[b] : 0.0f) + 0.5f * total;
      }
    });
    return absl::OkStatus();
  }

  absl::Status FmBackward(int64_t batch, int64_t f, int64_t dim, const Buffer& x,
                          const Buffer& d_out, Buffer* dx) override {
    RETURN_IF_ERROR(CheckSizes("FmBackward", {batch, f, dim}));
    const uint64_t n = SatMul(SatMul(batch, f), dim);
    RETURN_IF_ERROR(Check("FmBackward", "x", &x, DType::kFloat32, n));
    RETURN_IF_ERROR(Check("FmBackward", "d_out", &d_out, DType::kFloat32, batch));
    RETURN_IF_ERROR(Check("FmBackward", "dx", dx, DType::kFloat32, n));
    RETURN_IF_ERROR(Distinct("FmBackward", dx, {&x, &d_out}));
    const float* xp = F(x);
    const float* gp = F(d_out);
    float* dp = F(*dx);
    ParallelFor(batch, 3.0 * f * dim, [&](int64_t begin, int64_t end) {
      std::vector<float> sum(dim);
      for (int64_t b = begin; b < end; ++b) {
        const float* xb = xp + b * f * dim;
        float* db = dp + b * f * dim;
        std::fill(sum.begin(), sum.end(), 0.0f);
        for (int64_t i = 0; i < f; ++i) {
          for (int64_t d = 0; d < dim; ++d) sum[d] += xb[i * dim + d];
        }
        for (int64_t i = 0; i < f; ++i) {
          for (int64_t d = 0; d < dim; ++d) db[i * dim + d] = gp[b] * (sum[d] - xb[i * dim + d]);
        }
      }
    });
    return absl::OkStatus();
  }

  absl::StatusOr<double> Loss(LossKind kind, int64_t n, const Buffer& logits, const Buffer& labels,
                              float grad_scale, Buffer* predictions, Buffer* d_logits) override {
    RETURN_IF_ERROR(CheckSizes("Loss", {n}));
    RETURN_IF_ERROR(Check("Loss", "logits", &logits, DType::kFloat32, n));
    RETURN_IF_ERROR(Check("Loss", "labels", &labels, DType::kFloat32, n));
    RETURN_IF_ERROR(Check("Loss", "predictions", predictions, DType::kFloat32, n));
    RETURN_IF_ERROR(Distinct("Loss", predictions, {&logits, &labels}));
    if (d_logits != nullptr) {
      RETURN_IF_ERROR(Check("Loss", "d_logits", d_logits, DType::kFloat32, n));
      RETURN_IF_ERROR(Distinct("Loss", d_logits, {&logits, &labels, predictions}));
    }
    const float* z = F(logits);
    const float* y = F(labels);
    float* p = F(*predictions);
    float* g = d_logits != nullptr ? F(*d_logits) : nullptr;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      if (kind == LossKind::kLogLoss) {
        p[i] = Sigmoid(z[i]);
        // -y log(p) - (1-y) log(1-p) = max(z, 0) - z y + log(1 + exp(-|z|)).
        const double zd = z[i];
        sum += std::max(zd, 0.0) - zd * y[i] + std::log1p(std::exp(-std::abs(zd)));
        if (g) g[i] = grad_scale * (p[i] - y[i]);
      } else {
        p[i] = z[i];
        const double e = static_cast<double>(z[i]) - y[i];
        sum += e * e;
        if (g) g[i] = grad_scale * 2.0f * (z[i] - y[i]);
      }
    }
    return sum;
  }

 private:
  // Runs fn(begin, end) over [0, n): splits it into at most threads_ equal
  // shares of at least kMinCyclesPerShare estimated work (`cycles_per_item`
  // each), runs share 0 on the calling thread and the rest on the pool, and
  // waits. The split depends only on n, the cost and threads_, never on
  // timing, which keeps results deterministic.
  void ParallelFor(int64_t n, double cycles_per_item,
                   const std::function<void(int64_t, int64_t)>& fn) {
    constexpr double kMinCyclesPerShare = 50000;  // ~20 us: below it, waking a thread costs more
    if (n <= 0) return;
    int64_t shares = 1;
    if (pool_) {
      const double total = static_cast<double>(n) * cycles_per_item;
      shares = std::min<int64_t>({threads_, n, static_cast<int64_t>(total / kMinCyclesPerShare)});
      shares = std::max<int64_t>(shares, 1);
    }
    if (shares == 1) {
      fn(0, n);
      return;
    }
    auto bound = [&](int64_t s) { return n * s / shares; };
    Eigen::Barrier done(static_cast<unsigned>(shares - 1));
    for (int64_t s = 1; s < shares; ++s) {
      pool_->Schedule([&, s] {
        fn(bound(s), bound(s + 1));
        done.Notify();
      });
    }
    fn(0, bound(1));
    done.Wait();
  }

  // Constant after construction.
  const int64_t threads_;
  const internal::GemmFn gemm_;
  std::unique_ptr<Eigen::ThreadPool> pool_;  // threads_ - 1 workers; null when 1
};

}  // namespace

bool CpuIsaSupported(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAuto:
    case CpuIsa::kBaseline:
      return true;
    case CpuIsa::kAvx2:
#if defined(__x86_64__) || defined(__i386__)
      // libgcc's checks include the OS enabling the AVX register state (XCR0).
      __builtin_cpu_init();
      return internal::GemmAvx2() != nullptr && __builtin_cpu_supports("avx2") &&
             __builtin_cpu_supports("fma");
#else
      return false;
#endif
    case CpuIsa::kAvx512:
#if defined(__x86_64__) || defined(__i386__)
      __builtin_cpu_init();
      return internal::GemmAvx512() != nullptr && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
#else
      return false;
#endif
  }
  return false;
}

CpuIsa BestCpuIsa() {
  if (CpuIsaSupported(CpuIsa::kAvx512)) return CpuIsa::kAvx512;
  if (CpuIsaSupported(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kBaseline;
}

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAuto:
      return "auto";
    case CpuIsa::kBaseline:
      return "baseline";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const CpuBackendOptions& options) {
  if (options.num_threads < 0 || options.num_threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu backend: num_threads must be in [0, 1024], got ", options.num_threads));
  }
  if (!CpuIsaSupported(options.isa)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cpu backend: this CPU or build cannot run the ",
                     std::string(CpuIsaName(options.isa)), " kernels"));
  }
  const CpuIsa isa = options.isa == CpuIsa::kAuto ? BestCpuIsa() : options.isa;
  internal::GemmFn gemm = &internal::GemmBaseline;
  if (isa == CpuIsa::kAvx2) gemm = internal::GemmAvx2();
  if (isa == CpuIsa::kAvx512) gemm = internal::GemmAvx512();
  int threads = options.num_threads;
  if (threads == 0) threads = UsableCpus();
  return std::unique_ptr<Backend>(new CpuBackend(threads, gemm));
}

}  // namespace brook::trainer
