// The CUDA kernels of the CUDA backend behind plain C++ launch functions, so
// that only cuda_kernels.cu goes through nvcc and the backend itself
// (cuda_backend.cc: checks, memory, cuBLAS, errors) is ordinary C++ built
// with the project's warnings.
//
// Each function enqueues its kernel(s) on `stream` and returns
// cudaGetLastError() (launch errors; faults surface at the next wait). None
// checks its arguments: the backend has (op_checks.h). Pointers are device
// pointers already advanced by any element offset; sizes are element counts
// as in backend.h. Nothing is launched for an empty range. Results are
// deterministic for a given shape except PoolBackward, whose scatter-add
// uses float atomics.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "trainer/backend/op_types.h"

namespace brook::trainer::cuda {

// Blocks of the loss reduction's first pass: LaunchLoss needs a device
// scratch of kLossPartials doubles.
inline constexpr int kLossPartials = 1024;

// Whether this plugin carries code the current device can run
// (cudaErrorNoKernelImageForDevice otherwise).
cudaError_t CheckKernelImage();

// x[i] = value.
cudaError_t LaunchFill(cudaStream_t stream, int64_t n, float value, float* x);
// x[i] = beta == 0 ? 0 : beta * x[i] (a GEMM with k == 0).
cudaError_t LaunchScale(cudaStream_t stream, int64_t n, float beta, float* x);
cudaError_t LaunchCopy2D(cudaStream_t stream, int64_t rows, int64_t cols, const float* src,
                         int64_t src_stride, float* dst, int64_t dst_stride, bool accumulate);
cudaError_t LaunchBiasActivation(cudaStream_t stream, Activation act, int64_t rows, int64_t cols,
                                 const float* bias, float* x);
cudaError_t LaunchActivationBackward(cudaStream_t stream, Activation act, int64_t n, const float* y,
                                     float* dy);
cudaError_t LaunchBiasBackward(cudaStream_t stream, int64_t rows, int64_t cols, const float* dx,
                               bool accumulate, float* dbias);
// scale = 1 / (1 - rate), computed by the caller as the CPU backend does.
cudaError_t LaunchDropout(cudaStream_t stream, int64_t n, float rate, float scale, uint64_t seed,
                          float* x, float* mask);
cudaError_t LaunchMul(cudaStream_t stream, int64_t n, const float* x, float* y);
cudaError_t LaunchPoolForward(cudaStream_t stream, Combiner combiner, int64_t batch, int64_t dim,
                              const uint32_t* offsets, const uint32_t* indices, const float* table,
                              float* out, int64_t out_stride, bool accumulate);
cudaError_t LaunchPoolBackward(cudaStream_t stream, Combiner combiner, int64_t batch, int64_t dim,
                               const uint32_t* offsets, const uint32_t* indices, const float* d_out,
                               int64_t out_stride, float* d_table);
cudaError_t LaunchInteractionForward(cudaStream_t stream, int64_t batch, int64_t f, int64_t dim,
                                     const float* x, float* out);
cudaError_t LaunchInteractionBackward(cudaStream_t stream, int64_t batch, int64_t f, int64_t dim,
                                      const float* x, const float* d_out, float* dx);
cudaError_t LaunchFmForward(cudaStream_t stream, int64_t batch, int64_t f, int64_t dim,
                            const float* x, bool accumulate, float* out);
cudaError_t LaunchFmBackward(cudaStream_t stream, int64_t batch, int64_t f, int64_t dim,
                             const float* x, const float* d_out, float* dx);
// Writes predictions (and d_logits unless null) and *loss_sum = the sum of
// the per-example losses in double, reduced in a fixed order (two passes
// through `partials`, kLossPartials doubles), so it is the same every run.
cudaError_t LaunchLoss(cudaStream_t stream, LossKind kind, int64_t n, const float* logits,
                       const float* labels, float grad_scale, float* predictions, float* d_logits,
                       double* partials, double* loss_sum);

}  // namespace brook::trainer::cuda
