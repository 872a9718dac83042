// trainer::Backend: the ops one model step needs -- GEMM, bias + activation,
// embedding pooling, DLRM interactions, the FM term, losses, dropout -- on
// buffers the backend owns. The CPU backend (cpu_backend.h) is always built;
// a CUDA backend (cuBLAS GEMMs + kernels) is a plugin loaded at run time that
// implements the same interface, which is why no CUDA type appears here.
//
// Conventions for every op:
//  - Matrices are row-major. Sizes, strides and offsets count elements.
//  - Each op checks that everything it reads or writes lies inside its
//    buffers and that the dtypes fit; otherwise it returns InvalidArgument
//    and writes nothing. Index contents (CSR offsets, row indices) are
//    checked by the CPU backend; a device backend may trust them, so callers
//    validate index data on the host (BuildModelBatch's output is valid).
//  - Ops may run asynchronously in issue order (one CUDA stream). Download,
//    Loss and Synchronize wait for all earlier ops.
//  - An output buffer must not overlap an input of the same op unless the
//    comment says "in place".
//
// Thread safety: a Backend requires external synchronization (one thread
// issues ops; the backend may use its own threads inside an op). Buffers
// must not outlive the Backend that allocated them.
//
// Example (forward of one dense layer, y = relu(x W + b)):
//   ASSIGN_OR_RETURN(auto y, backend->Alloc(DType::kFloat32, batch * out));
//   RETURN_IF_ERROR(backend->Gemm(false, false, batch, out, in, 1.0f, *x, *w, 0.0f, y.get()));
//   RETURN_IF_ERROR(backend->BiasActivation(Activation::kRelu, batch, out, *b, y.get()));
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trainer/backend/op_types.h"

namespace brook::trainer {

// Memory owned by a Backend (device memory for CUDA): `size()` elements of
// `dtype()`. Opaque: only the Backend that allocated it reads or writes its
// contents. Destroying the handle frees the memory.
class Buffer {
 public:
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  DType dtype() const { return dtype_; }
  size_t size() const { return size_; }

 protected:
  Buffer(DType dtype, size_t size) : dtype_(dtype), size_(size) {}

 private:
  const DType dtype_;
  const size_t size_;
};

// What a device backend reports about its device (trainer metrics).
struct DeviceStats {
  uint64_t memory_used_bytes = 0;  // the whole device's, every process
  uint64_t memory_total_bytes = 0;
  // Share of the last sample period a kernel ran, 0..1 (NVML); nullopt when
  // NVML (it comes with the driver, not the toolkit) is not there.
  std::optional<double> utilization;
  // Device time inside the timed spans (BeginSpan..EndSpan) finished so far,
  // by the device's own clock (CUDA events). A benchmark's GPU idle share is
  // 1 - its growth / wall time. Gaps inside a span (the host still issuing
  // ops) count as busy, so that share is a lower bound.
  double busy_seconds = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu", "cuda".
  virtual std::string_view name() const = 0;

  // The device's memory and utilization; nullopt for the CPU backend (the
  // process metrics cover it). Any thread, concurrently with the ops.
  virtual std::optional<DeviceStats> device_stats() const { return std::nullopt; }

  // ---- Memory.

  // A zero-filled buffer of n elements (n may be 0). ResourceExhausted when
  // the device is out of memory.
  virtual absl::StatusOr<std::unique_ptr<Buffer>> Alloc(DType dtype, size_t n) = 0;
  // Copies src into dst[offset, offset + src.size()).
  virtual absl::Status Upload(absl::Span<const float> src, Buffer* dst, size_t offset) = 0;
  virtual absl::Status Upload(absl::Span<const uint32_t> src, Buffer* dst, size_t offset) = 0;
  // Copies src[offset, offset + dst.size()) to the host. Waits.
  virtual absl::Status Download(const Buffer& src, size_t offset, absl::Span<float> dst) = 0;
  // Sets x[offset, offset + n) to value (float buffers).
  virtual absl::Status Fill(float value, size_t n, size_t offset, Buffer* x) = 0;
  // Waits for all issued ops.
  virtual absl::Status Synchronize() = 0;

  // ---- Device time (DeviceStats::busy_seconds).

  // Mark the first and last op of a span of work (a model step). EndSpan
  // waits for the span's ops and adds the device time between the two marks.
  // A BeginSpan while a span is open restarts it (a step that failed midway
  // is not counted). No-ops on the CPU backend.
  virtual absl::Status BeginSpan() { return absl::OkStatus(); }
  virtual absl::Status EndSpan() { return absl::OkStatus(); }

  // ---- Dense math.

  // C = alpha * op(A) op(B) + beta * C, all contiguous: op(A) is m x k (A is
  // stored k x m when trans_a), op(B) is k x n (stored n x k when trans_b),
  // C is m x n. With beta == 0 C's old contents are ignored (even NaN).
  // k == 0 gives C = beta * C.
  virtual absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                            float alpha, const Buffer& a, const Buffer& b, float beta,
                            Buffer* c) = 0;

  // For r < rows, c < cols:
  //   dst[r * dst_stride + dst_offset + c] (+)= src[r * src_stride + src_offset + c]
  // (+= when accumulate). Concatenates and splits feature blocks.
  virtual absl::Status Copy2D(int64_t rows, int64_t cols, const Buffer& src, int64_t src_stride,
                              int64_t src_offset, Buffer* dst, int64_t dst_stride,
                              int64_t dst_offset, bool accumulate) = 0;

  // In place: x (rows x cols) = act(x + bias), bias (cols) broadcast over rows.
  virtual absl::Status BiasActivation(Activation act, int64_t rows, int64_t cols,
                                      const Buffer& bias, Buffer* x) = 0;
  // In place: dy[i] *= act'(.) for i < n, from the forward *output* y:
  // relu: y > 0; sigmoid: y (1 - y); tanh: 1 - y^2; none: 1.
  virtual absl::Status ActivationBackward(Activation act, int64_t n, const Buffer& y,
                                          Buffer* dy) = 0;
  // dbias[c] (+)= sum over r of dx[r * cols + c].
  virtual absl::Status BiasBackward(int64_t rows, int64_t cols, const Buffer& dx, bool accumulate,
                                    Buffer* dbias) = 0;

  // Inverted dropout, in place on x[0, n): element i is kept iff
  // DropoutKeep(seed, i, rate) (op_types.h, the same on every backend);
  // mask[i] = kept ? 1 / (1 - rate) : 0 and x[i] *= mask[i]. REQUIRES:
  // 0 <= rate < 1.
  virtual absl::Status Dropout(int64_t n, float rate, uint64_t seed, Buffer* x, Buffer* mask) = 0;
  // In place: y[i] *= x[i] for i < n (dropout backward: dy *= mask).
  virtual absl::Status Mul(int64_t n, const Buffer& x, Buffer* y) = 0;

  // ---- Embeddings.
  //
  // A CSR (uint32 `offsets` of batch + 1 entries, offsets[0] == 0,
  // non-decreasing; uint32 `indices` of offsets[batch] entries, each
  // < num_rows) lists for example b the rows indices[offsets[b] ..
  // offsets[b + 1]) of `table` (num_rows x dim).

  // out[b * out_stride + out_offset + d] (+)= sum (kSum) or mean (kMean) of
  // table[indices[i] * dim + d] over example b's i. An example without ids
  // pools to 0. Writing with a stride places the result inside a wider
  // matrix (the concatenated input of an MLP).
  virtual absl::Status PoolForward(Combiner combiner, int64_t batch, int64_t dim,
                                   const Buffer& offsets, const Buffer& indices,
                                   const Buffer& table, int64_t num_rows, Buffer* out,
                                   int64_t out_stride, int64_t out_offset, bool accumulate) = 0;
  // The adjoint: d_table[indices[i] * dim + d] += w_b * d_out[b * out_stride
  // + out_offset + d], w_b = 1 (kSum) or 1 / count_b (kMean). Always
  // accumulates: several inputs may share a table, and an id repeated in a
  // batch sums its gradients.
  virtual absl::Status PoolBackward(Combiner combiner, int64_t batch, int64_t dim,
                                    const Buffer& offsets, const Buffer& indices,
                                    const Buffer& d_out, int64_t out_stride, int64_t out_offset,
                                    Buffer* d_table, int64_t num_rows) = 0;

  // ---- Feature interactions over x = batch x f x dim (f vectors per example).

  // DLRM: out (batch x f(f-1)/2) holds <x[b,i,:], x[b,j,:]> for i < j, in the
  // order (0,1), (0,2), ..., (0,f-1), (1,2), ...
  virtual absl::Status InteractionForward(int64_t batch, int64_t f, int64_t dim, const Buffer& x,
                                          Buffer* out) = 0;
  // dx (batch x f x dim) = the gradient through InteractionForward of d_out.
  // Overwrites dx.
  virtual absl::Status InteractionBackward(int64_t batch, int64_t f, int64_t dim, const Buffer& x,
                                           const Buffer& d_out, Buffer* dx) = 0;
  // FM second-order term (Rendle 2010):
  //   out[b] (+)= 0.5 * sum_d ((sum_i x[b,i,d])^2 - sum_i x[b,i,d]^2)
  // which equals sum over i < j of <x[b,i,:], x[b,j,:]>.
  virtual absl::Status FmForward(int64_t batch, int64_t f, int64_t dim, const Buffer& x,
                                 bool accumulate, Buffer* out) = 0;
  // dx[b,i,d] = d_out[b] * (sum_j x[b,j,d] - x[b,i,d]). Overwrites dx.
  virtual absl::Status FmBackward(int64_t batch, int64_t f, int64_t dim, const Buffer& x,
                                  const Buffer& d_out, Buffer* dx) = 0;

  // ---- Loss.

  // For i < n: predictions[i] = sigmoid(logits[i]) (kLogLoss) or logits[i]
  // (kMse); loss_i = -y log p - (1 - y) log(1 - p), computed stably from the
  // logit, or (p - y)^2. When d_logits is not null, d_logits[i] = grad_scale
  // * d loss_i / d logits[i] ((p - y) or 2 (p - y)). Returns the sum of
  // loss_i in double. Waits.
  virtual absl::StatusOr<double> Loss(LossKind kind, int64_t n, const Buffer& logits,
                                      const Buffer& labels, float grad_scale, Buffer* predictions,
                                      Buffer* d_logits) = 0;

 protected:
  Backend() = default;
};

}  // namespace brook::trainer
