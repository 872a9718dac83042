// Kernels of the CUDA backend (see cuda_kernels.h). Plain one-thread-per-
// output kernels with grid-stride loops and 64-bit indexing: the models'
// shapes (batch ~4k, widths ~10-1000) are small enough that the GEMMs, not
// these, dominate a step, so they are written to be obviously right and
// deterministic (every output summed by one thread in a fixed order), not
// tuned. The reductions follow the CPU backend's summation order where that
// is cheap (pooling, interactions, FM), so the two backends differ only by
// FMA contraction and libm rounding.
//
// This file sees only cuda_runtime.h and op_types.h: DropoutKeep is the same
// constexpr function the CPU backend calls (nvcc runs it on the device with
// --expt-relaxed-constexpr), so dropout masks agree bit for bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "trainer/backend/cuda/cuda_kernels.h"

namespace brook::trainer::cuda {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops cover the rest; 2^20 blocks saturate any current GPU.
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

int Blocks(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

__device__ int64_t ThreadIndex() { return int64_t{blockIdx.x} * blockDim.x + threadIdx.x; }
__device__ int64_t GridSize() { return int64_t{gridDim.x} * blockDim.x; }

// The CPU backend's formulas (cpu_backend.cc), in float.
__device__ float Sigmoid(float z) {
  if (z >= 0) return 1.0f / (1.0f + expf(-z));
  const float e = expf(z);
  return e / (1.0f + e);
}

__device__ float Activate(Activation act, float v) {
  switch (act) {
    case Activation::kNone:
      return v;
    case Activation::kRelu:
      return v > 0 ? v : 0.0f;
    case Activation::kSigmoid:
      return Sigmoid(v);
    case Activation::kTanh:
      return tanhf(v);
  }
  return v;
}

__device__ float ActivationGrad(Activation act, float y) {
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

__global__ void FillKernel(int64_t n, float value, float* x) {
  for (int64_t i = ThreadIndex(); i < n; i += GridSize()) x[i] = value;
}

__global__ void ScaleKernel(int64_t n, float beta, float* x) {
  for (int64_t i = ThreadIndex(); i < n; i += GridSize()) x[i] = beta == 0.0f ? 0.0f : beta * x[i];
}

__global__ void Copy2DKernel(int64_t rows, int64_t cols, const float* src, int64_t src_stride,
                             float* dst, int64_t dst_stride, bool accumulate) {
  const int64_t n = rows * cols;
  for (int64_t i = ThreadIndex(); i < n; i += GridSize()) {
    const int64_t r = i / cols, c = i - r * cols;
    const float v = src[r * src_stride + c];
    float* d = dst + r * dst_stride + c;
    *d = accumulate ? *d + v : v;
  }
}

__global__ void BiasActivationKernel(Activation act, int64_t rows, int64_t cols, const float* bias,
                                     float* x) {
  const int64_t n = rows * cols;
  for (int64_t i = ThreadIndex(); i < n; i += GridSize()) {
    x[i] = Activate(act, x[i] + bias[i % cols]);
  }
}

__global__ void ActivationBackwardKernel(Activation act, int64_t n, const float* y, float* dy) {
  for (int64_t i = ThreadIndex(); i < n; i += GridSize()) dy[i] *= ActivationGrad(act, y[i]);
}

// A block owns kBiasCols columns; its kBiasRows thread rows each sum every
// kBiasRows-th row of dx, then one thread adds the kBiasRows partial sums in
// order: coalesced reads and a fixed summation order, no atomics.
constexpr int kBiasCols = 32;
constexpr int kBiasRows = 8;

__global__ void BiasBackwardKernel(int64_t rows, int64_t cols, const float* dx, bool accumulate,
                                   float* dbias) {
  __shared__ float part[kBiasRows][kBiasCols + 1];
  for (int64_t first = int64_t{blockIdx.x} * kBiasCols; first < cols;
       first += int64_t{gridDim.x} * kBiasCols) {
    const int64_t c = first + threadIdx.x;
    float s = 0.0f;
    if (c < cols) {
      for (int64_t r = threadIdx.y; r < rows; r += kBiasRows) s += dx[r * cols + c];
    }
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
      float t = 0.0f;
      for (int j = 0; j < kBiasRows; ++j) t += part[j][threadIdx.x];
      dbias[c] = accumulate ? dbias[c] + t : t;
    }
    __syncthreads();  // part is rewritten by the next column block
  }
}

__global__ void DropoutKernel(int64_t n, float rate, float scale, uint64_t seed, float* x,
                              float* mask) {
  for (int64_t i = ThreadIndex(); i < n; i += GridSize()) {
    const float m = DropoutKeep(seed, static_cast<uint64_t>(i), rate) ? scale : 0.0f;
    mask[i] = m;
    x[i] *= m;
  }
}

__global__ void MulKernel(int64_t n, const float* x, float* y) {
  for (int64_t i = ThreadIndex(); i < n; i += GridSize()) y[i] *= x[i];
}

// One thread per (example, coordinate): sums the example's rows in CSR order.
__global__ void PoolForwardKernel(bool mean, int64_t batch, int64_t dim, const uint32_t* offsets,
                                  const uint32_t* indices, const float* table, float* out,
                                  int64_t out_stride, bool accumulate) {
  const int64_t n = batch * dim;
  for (int64_t i = ThreadIndex(); i < n; i += GridSize()) {
    const int64_t b = i / dim, d = i - b * dim;
    const uint32_t begin = offsets[b], end = offsets[b + 1];
    float acc = 0.0f;
    for (uint32_t k = begin; k < end; ++k) acc += table[int64_t{indices[k]} * dim + d];
    const uint32_t count = end - begin;
    const float w = (mean && count > 0) ? 1.0f / count : 1.0f;
    float* o = out + b * out_stride + d;
    *o = (accumulate ? *o : 0.0f) + w * acc;
  }
}

// The adjoint: ids repeat across (and within) examples, so the scatter into
// d_table uses atomicAdd; the order of the adds, hence the rounding, varies.
__global__ void PoolBackwardKernel(bool mean, int64_t batch, int64_t dim, const uint32_t* offsets,
                                   const uint32_t* indices, const float* d_out, int64_t out_stride,
                                   float* d_table) {
  const int64_t n = batch * dim;
  for (int64_t i = ThreadIndex(); i < n; i += GridSize()) {
    const int64_t b = i / dim, d = i - b * dim;
    const uint32_t begin = offsets[b], end = offsets[b + 1];
    if (begin == end) continue;
    const float w = mean ? 1.0f / (end - begin) : 1.0f;
    const float g = w * d_out[b * out_stride + d];
    for (uint32_t k = begin; k < end; ++k) atomicAdd(&d_table[int64_t{indices[k]} * dim + d], g);
  }
}

// Index of the pair (i, j), i < j, in the order (0,1), (0,2), ..., (1,2), ...
__device__ int64_t PairIndex(int64_t f, int64_t i, int64_t j) {
  return i * f - i * (i + 1) / 2 + (j - i - 1);
}

__global__ void InteractionForwardKernel(int64_t batch, int64_t f, int64_t dim, const float* x,
                                         float* out) {
  const int64_t pairs = f * (f - 1) / 2;
  const int64_t n = batch * pairs;
  for (int64_t t = ThreadIndex(); t < n; t += GridSize()) {
    const int64_t b = t / pairs;
    int64_t i = 0, rest = t - b * pairs;
    while (rest >= f - 1 - i) {
      rest -= f - 1 - i;
      ++i;
    }
    const int64_t j = i + 1 + rest;
    const float* xi = x + (b * f + i) * dim;
    const float* xj = x + (b * f + j) * dim;
    float s = 0.0f;
    for (int64_t d = 0; d < dim; ++d) s += xi[d] * xj[d];
    out[t] = s;
  }
}

// dx[b,i,d] = sum over j != i of d_out[b, pair(i, j)] * x[b,j,d], summed in
// increasing j: the order in which the CPU backend accumulates it.
__global__ void InteractionBackwardKernel(int64_t batch, int64_t f, int64_t dim, const float* x,
                                          const float* d_out, float* dx) {
  const int64_t pairs = f * (f - 1) / 2;
  const int64_t n = batch * f * dim;
  for (int64_t t = ThreadIndex(); t < n; t += GridSize()) {
    const int64_t b = t / (f * dim);
    const int64_t rest = t - b * f * dim;
    const int64_t i = rest / dim, d = rest - i * dim;
    const float* xb = x + b * f * dim;
    const float* gb = d_out + b * pairs;
    float s = 0.0f;
    for (int64_t j = 0; j < f; ++j) {
      if (j == i) continue;
      s += gb[j < i ? PairIndex(f, j, i) : PairIndex(f, i, j)] * xb[j * dim + d];
    }
    dx[t] = s;
  }
}

__global__ void FmForwardKernel(int64_t batch, int64_t f, int64_t dim, const float* x,
                                bool accumulate, float* out) {
  for (int64_t b = ThreadIndex(); b < batch; b += GridSize()) {
    const float* xb = x + b * f * dim;
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
    out[b] = (accumulate ? out[b] : 0.0f) + 0.5f * total;
  }
}

__global__ void FmBackwardKernel(int64_t batch, int64_t f, int64_t dim, const float* x,
                                 const float* d_out, float* dx) {
  const int64_t n = batch * dim;
  for (int64_t t = ThreadIndex(); t < n; t += GridSize()) {
    const int64_t b = t / dim, d = t - b * dim;
    const float* xb = x + b * f * dim + d;
    float* db = dx + b * f * dim + d;
    float s = 0.0f;
    for (int64_t i = 0; i < f; ++i) s += xb[i * dim];
    for (int64_t i = 0; i < f; ++i) db[i * dim] = d_out[b] * (s - xb[i * dim]);
  }
}

constexpr int kLossThreads = 256;

// First pass: per-example outputs, and per block the sum of its threads'
// losses (each thread sums its grid-stride elements in order, then a fixed
// shared-memory tree). The grid depends only on n, so the sum is the same
// every run.
__global__ void LossKernel(bool logloss, int64_t n, const float* z, const float* y,
                           float grad_scale, float* p, float* g, double* partials) {
  __shared__ double sums[kLossThreads];
  double sum = 0.0;
  for (int64_t i = ThreadIndex(); i < n; i += GridSize()) {
    if (logloss) {
      const float pi = Sigmoid(z[i]);
      p[i] = pi;
      // -y log(p) - (1-y) log(1-p) = max(z, 0) - z y + log(1 + exp(-|z|)).
      const double zd = z[i];
      sum += fmax(zd, 0.0) - zd * y[i] + log1p(exp(-fabs(zd)));
      if (g != nullptr) g[i] = grad_scale * (pi - y[i]);
    } else {
      p[i] = z[i];
      const double e = static_cast<double>(z[i]) - y[i];
      sum += e * e;
      if (g != nullptr) g[i] = grad_scale * 2.0f * (z[i] - y[i]);
    }
  }
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int s = kLossThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) sums[threadIdx.x] += sums[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

// Second pass: one block of kLossPartials threads adds the partial sums.
__global__ void SumPartialsKernel(int count, const double* partials, double* out) {
  __shared__ double sums[kLossPartials];
  sums[threadIdx.x] = static_cast<int>(threadIdx.x) < count ? partials[threadIdx.x] : 0.0;
  __syncthreads();
  for (int s = kLossPartials / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) sums[threadIdx.x] += sums[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = sums[0];
}

}  // namespace

cudaError_t CheckKernelImage() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, FillKernel);
}

cudaError_t LaunchFill(cudaStream_t stream, int64_t n, float value, float* x) {
  if (n > 0) FillKernel<<<Blocks(n), kThreads, 0, stream>>>(n, value, x);
  return cudaGetLastError();
}

cudaError_t LaunchScale(cudaStream_t stream, int64_t n, float beta, float* x) {
  if (n > 0) ScaleKernel<<<Blocks(n), kThreads, 0, stream>>>(n, beta, x);
  return cudaGetLastError();
}

cudaError_t LaunchCopy2D(cudaStream_t stream, int64_t rows, int64_t cols, const float* src,
                         int64_t src_stride, float* dst, int64_t dst_stride, bool accumulate) {
  const int64_t n = rows * cols;
  if (n > 0) {
    Copy2DKernel<<<Blocks(n), kThreads, 0, stream>>>(rows, cols, src, src_stride, dst, dst_stride,
                                                     accumulate);
  }
  return cudaGetLastError();
}

cudaError_t LaunchBiasActivation(cudaStream_t stream, Activation act, int64_t rows, int64_t cols,
                                 const float* bias, float* x) {
  const int64_t n = rows * cols;
  if (n > 0) BiasActivationKernel<<<Blocks(n), kThreads, 0, stream>>>(act, rows, cols, bias, x);
  return cudaGetLastError();
}

cudaError_t LaunchActivationBackward(cudaStream_t stream, Activation act, int64_t n, const float* y,
                                     float* dy) {
  if (n > 0) ActivationBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(act, n, y, dy);
  return cudaGetLastError();
}

cudaError_t LaunchBiasBackward(cudaStream_t stream, int64_t rows, int64_t cols, const float* dx,
                               bool accumulate, float* dbias) {
  if (cols > 0) {
    const int blocks =
        static_cast<int>(std::min<int64_t>((cols + kBiasCols - 1) / kBiasCols, kMaxBlocks));
    BiasBackwardKernel<<<blocks, dim3(kBiasCols, kBiasRows), 0, stream>>>(rows, cols, dx,
                                                                          accumulate, dbias);
  }
  return cudaGetLastError();
}

cudaError_t LaunchDropout(cudaStream_t stream, int64_t n, float rate, float scale, uint64_t seed,
                          float* x, float* mask) {
  if (n > 0) DropoutKernel<<<Blocks(n), kThreads, 0, stream>>>(n, rate, scale, seed, x, mask);
  return cudaGetLastError();
}

cudaError_t LaunchMul(cudaStream_t stream, int64_t n, const float* x, float* y) {
  if (n > 0) MulKernel<<<Blocks(n), kThreads, 0, stream>>>(n, x, y);
  return cudaGetLastError();
}

cudaError_t LaunchPoolForward(cudaStream_t stream, Combiner combiner, int64_t batch, int64_t dim,
                              const uint32_t* offsets, const uint32_t* indices, const float* table,
                              float* out, int64_t out_stride, bool accumulate) {
  const int64_t n = batch * dim;
  if (n > 0) {
    PoolForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(combiner == Combiner::kMean, batch, dim,
                                                          offsets, indices, table, out, out_stride,
                                                          accumulate);
  }
  return cudaGetLastError();
}

cudaError_t LaunchPoolBackward(cudaStream_t stream, Combiner combiner, int64_t batch, int64_t dim,
                               const uint32_t* offsets, const uint32_t* indices, const float* d_out,
                               int64_t out_stride, float* d_table) {
  const int64_t n = batch * dim;
  if (n > 0) {
    PoolBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(
        combiner == Combiner::kMean, batch, dim, offsets, indices, d_out, out_stride, d_table);
  }
  return cudaGetLastError();
}

cudaError_t LaunchInteractionForward(cudaStream_t stream, int64_t batch, int64_t f, int64_t dim,
                                     const float* x, float* out) {
  const int64_t n = batch * (f * (f - 1) / 2);
  if (n > 0) InteractionForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(batch, f, dim, x, out);
  return cudaGetLastError();
}

cudaError_t LaunchInteractionBackward(cudaStream_t stream, int64_t batch, int64_t f, int64_t dim,
                                      const float* x, const float* d_out, float* dx) {
  const int64_t n = batch * f * dim;
  if (n > 0) {
    InteractionBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(batch, f, dim, x, d_out, dx);
  }
  return cudaGetLastError();
}

cudaError_t LaunchFmForward(cudaStream_t stream, int64_t batch, int64_t f, int64_t dim,
                            const float* x, bool accumulate, float* out) {
  if (batch > 0) {
    FmForwardKernel<<<Blocks(batch), kThreads, 0, stream>>>(batch, f, dim, x, accumulate, out);
  }
  return cudaGetLastError();
}

cudaError_t LaunchFmBackward(cudaStream_t stream, int64_t batch, int64_t f, int64_t dim,
                             const float* x, const float* d_out, float* dx) {
  const int64_t n = batch * dim;
  if (n > 0 && f > 0) {
    FmBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(batch, f, dim, x, d_out, dx);
  }
  return cudaGetLastError();
}

cudaError_t LaunchLoss(cudaStream_t stream, LossKind kind, int64_t n, const float* logits,
                       const float* labels, float grad_scale, float* predictions, float* d_logits,
                       double* partials, double* loss_sum) {
  const int blocks =
      static_cast<int>(std::min<int64_t>((n + kLossThreads - 1) / kLossThreads, kLossPartials));
  if (blocks > 0) {
    LossKernel<<<blocks, kLossThreads, 0, stream>>>(kind == LossKind::kLogLoss, n, logits, labels,
                                                    grad_scale, predictions, d_logits, partials);
  }
  SumPartialsKernel<<<1, kLossPartials, 0, stream>>>(blocks, partials, loss_sum);
  return cudaGetLastError();
}

}  // namespace brook::trainer::cuda
