// The CUDA Backend (backend.h), built into libbrook_backend_cuda.so and
// created through the one exported factory of cuda_plugin.h.
//
// Design:
//  - One non-blocking CUDA stream per backend; every op is enqueued on it in
//    issue order, so ops never wait for each other on the host. Download,
//    Loss and Synchronize wait for the stream.
//  - GEMMs are cuBLAS on that stream. cuBLAS is column-major; a row-major
//    C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, so the call
//    swaps the operands (and m with n) instead of transposing anything.
//  - Uploads are copied into a pinned staging buffer and queued with
//    cudaMemcpyAsync, so the host returns at once and the copy overlaps the
//    compute queued before it. The staging buffer is reused from its start
//    after every wait and grows (up to kMaxStagingBytes) until a whole
//    step's uploads fit between two waits.
//  - Index buffers (uint32) keep a host copy of their contents. Every write
//    to one is an Upload, so the copy is exact, and the pooling ops check CSR
//    contents on the host exactly as the CPU backend does: a bad index
//    returns InvalidArgument instead of faulting the device.
//  - Every CUDA or cuBLAS error becomes a Status naming the op, the call and
//    the error: "cuda backend <op>: <call>: <error name>: <error string>".
//    Device faults are asynchronous and surface at the next wait.
//
// Thread safety: as every Backend, requires external synchronization. Each
// op makes the backend's device current on the calling thread, so the
// backend may be driven from a thread other than the one that created it.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "trainer/backend/backend.h"
#include "trainer/backend/cuda/cuda_kernels.h"
#include "trainer/backend/cuda/cuda_plugin.h"
#include "trainer/backend/internal/op_checks.h"

#ifndef BROOK_CUDA_ARCHITECTURES
#define BROOK_CUDA_ARCHITECTURES "unknown"
#endif

namespace brook::trainer {
namespace {

// GPU utilization from NVML, opened with dlopen: libnvidia-ml.so.1 comes with
// the driver, not the toolkit, so the plugin must load without it (then only
// the memory figures are reported). The device is found by PCI bus id, which
// holds whatever CUDA_VISIBLE_DEVICES renumbered.
class Nvml {
 public:
  static const Nvml& Get() {
    static const Nvml* const nvml = new Nvml();  // never closed: a scrape may race exit
    return *nvml;
  }

  std::optional<double> Utilization(int cuda_device) const {
    if (!ok_) return std::nullopt;
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), cuda_device) != cudaSuccess) {
      (void)cudaGetLastError();
      return std::nullopt;
    }
    void* device = nullptr;
    if (handle_by_bus_(bus, &device) != 0) return std::nullopt;
    struct {
      unsigned int gpu;     // percent of the sample period a kernel ran
      unsigned int memory;  // percent of it device memory was read or written
    } rates = {};
    if (utilization_(device, &rates) != 0) return std::nullopt;
    return rates.gpu / 100.0;
  }

 private:
  using InitFn = int (*)();
  using HandleByBusFn = int (*)(const char*, void**);
  using UtilizationFn = int (*)(void*, void*);

  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
    handle_by_bus_ =
        reinterpret_cast<HandleByBusFn>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    utilization_ = reinterpret_cast<UtilizationFn>(dlsym(lib, "nvmlDeviceGetUtilizationRates"));
    ok_ = init != nullptr && handle_by_bus_ != nullptr && utilization_ != nullptr && init() == 0;
  }

  HandleByBusFn handle_by_bus_ = nullptr;
  UtilizationFn utilization_ = nullptr;
  bool ok_ = false;
};

using internal::Extent;
using internal::SatAdd;
using internal::SatMul;

constexpr internal::ArgChecks kChecks("cuda", "this CUDA backend");

// Pinned staging: the first growth allocates at least kMinStagingBytes;
// larger transfers go through in chunks of kMaxStagingBytes.
constexpr size_t kMinStagingBytes = size_t{1} << 20;
constexpr size_t kMaxStagingBytes = size_t{64} << 20;

absl::StatusCode CodeOf(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorInvalidDevice:
      return absl::StatusCode::kInvalidArgument;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoKernelImageForDevice:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

// OK for cudaSuccess; otherwise the error as a Status. Clears the runtime's
// last-error slot, so that a failed call (an out-of-memory cudaMalloc, say)
// is not reported again by the next kernel launch's cudaGetLastError.
absl::Status Cuda(absl::string_view op, absl::string_view call, cudaError_t e) {
  if (e == cudaSuccess) return absl::OkStatus();
  (void)cudaGetLastError();
  return absl::Status(CodeOf(e), absl::StrCat("cuda backend ", op, ": ", call, ": ",
                                              cudaGetErrorName(e), ": ", cudaGetErrorString(e)));
}

absl::Status Cublas(absl::string_view op, absl::string_view call, cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const absl::StatusCode code = s == CUBLAS_STATUS_ALLOC_FAILED
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat("cuda backend ", op, ": ", call, ": ",
                                         cublasGetStatusName(s), ": ", cublasGetStatusString(s)));
}

class CudaBackend;

// Device memory of one CudaBackend. Frees it on the backend's device.
class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(const CudaBackend* owner, int device, DType dtype, size_t n, void* data,
             std::vector<uint32_t> mirror)
      : Buffer(dtype, n), owner_(owner), device_(device), data_(data), mirror_(std::move(mirror)) {}

  ~CudaBuffer() override {
    if (data_ == nullptr) return;
    // cudaFree waits for the ops queued on the buffer. It cannot report an
    // error from a destructor; a failure here means the context is already
    // broken, which the next op reports.
    int current = -1;
    const bool switched = cudaGetDevice(&current) == cudaSuccess && current != device_ &&
                          cudaSetDevice(device_) == cudaSuccess;
    (void)cudaFree(data_);
    if (switched) (void)cudaSetDevice(current);
    (void)cudaGetLastError();
  }

  const CudaBackend* owner() const { return owner_; }
  float* floats() const { return static_cast<float*>(data_); }
  uint32_t* uints() const { return static_cast<uint32_t*>(data_); }
  // kUint32 only: the host copy of the contents (size() elements).
  std::vector<uint32_t>& mirror() { return mirror_; }
  const std::vector<uint32_t>& mirror() const { return mirror_; }

 private:
  const CudaBackend* const owner_;
  const int device_;
  void* const data_;  // null when size() == 0
  std::vector<uint32_t> mirror_;
};

const CudaBuffer& Cb(const Buffer& b) { return static_cast<const CudaBuffer&>(b); }
float* F(const Buffer& b) { return Cb(b).floats(); }
const uint32_t* U(const Buffer& b) { return Cb(b).uints(); }

// Host memory the device can DMA from and to (cudaMallocHost).
struct Pinned {
  char* data = nullptr;
  size_t capacity = 0;  // bytes
  size_t used = 0;      // bytes holding uploads not yet known to be copied
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options)
      : device_(options.device), gemm_math_(options.gemm_math) {}

  ~CudaBackend() override {
    if (cudaSetDevice(device_) != cudaSuccess) return;
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    if (span_begin_ != nullptr) (void)cudaEventDestroy(span_begin_);
    if (span_end_ != nullptr) (void)cudaEventDestroy(span_end_);
    if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
    if (partials_ != nullptr) (void)cudaFree(partials_);
    if (upload_.data != nullptr) (void)cudaFreeHost(upload_.data);
    if (download_.data != nullptr) (void)cudaFreeHost(download_.data);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
  }

  // Everything that can fail at creation. REQUIRES: device_ exists.
  absl::Status Init() {
    constexpr absl::string_view kOp = "create";
    RETURN_IF_ERROR(Cuda(kOp, "cudaSetDevice", cudaSetDevice(device_)));
    cudaDeviceProp prop;
    RETURN_IF_ERROR(Cuda(kOp, "cudaGetDeviceProperties", cudaGetDeviceProperties(&prop, device_)));
    if (cudaError_t e = cuda::CheckKernelImage(); e != cudaSuccess) {
      (void)cudaGetLastError();
      return absl::FailedPreconditionError(
          absl::StrCat("cuda backend: the plugin has no code for cuda:", device_, " (", prop.name,
                       ", sm_", prop.major, prop.minor, "; ", cudaGetErrorName(e),
                       "): it was built for CMAKE_CUDA_ARCHITECTURES=", BROOK_CUDA_ARCHITECTURES,
                       "; rebuild with -DCMAKE_CUDA_ARCHITECTURES=", prop.major, prop.minor));
    }
    RETURN_IF_ERROR(Cuda(kOp, "cudaStreamCreateWithFlags",
                         cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));
    RETURN_IF_ERROR(Cublas(kOp, "cublasCreate", cublasCreate(&cublas_)));
    RETURN_IF_ERROR(Cublas(kOp, "cublasSetStream", cublasSetStream(cublas_, stream_)));
    RETURN_IF_ERROR(Cuda(kOp, "cudaEventCreate", cudaEventCreate(&span_begin_)));
    RETURN_IF_ERROR(Cuda(kOp, "cudaEventCreate", cudaEventCreate(&span_end_)));
    // kLossPartials first-pass sums, then the total.
    void* partials = nullptr;
    RETURN_IF_ERROR(
        Cuda(kOp, "cudaMalloc", cudaMalloc(&partials, (cuda::kLossPartials + 1) * sizeof(double))));
    partials_ = static_cast<double*>(partials);
    return absl::OkStatus();
  }

  std::string_view name() const override { return "cuda"; }

  // Called from a metrics scrape's thread: it selects the device first.
  std::optional<DeviceStats> device_stats() const override {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(device_) != cudaSuccess ||
        cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return std::nullopt;
    }
    DeviceStats s;
    s.memory_total_bytes = total_bytes;
    s.memory_used_bytes = total_bytes - free_bytes;
    s.utilization = Nvml::Get().Utilization(device_);
    s.busy_seconds = static_cast<double>(busy_ns_.load(std::memory_order_relaxed)) * 1e-9;
    return s;
  }

  // ---- Device time.

  absl::Status BeginSpan() override {
    RETURN_IF_ERROR(Use("BeginSpan"));
    RETURN_IF_ERROR(Cuda("BeginSpan", "cudaEventRecord", cudaEventRecord(span_begin_, stream_)));
    span_open_ = true;
    return absl::OkStatus();
  }

  absl::Status EndSpan() override {
    constexpr absl::string_view kOp = "EndSpan";
    if (!span_open_)
      return absl::FailedPreconditionError("cuda backend: EndSpan without BeginSpan");
    span_open_ = false;
    RETURN_IF_ERROR(Use(kOp));
    RETURN_IF_ERROR(Cuda(kOp, "cudaEventRecord", cudaEventRecord(span_end_, stream_)));
    RETURN_IF_ERROR(Cuda(kOp, "cudaEventSynchronize", cudaEventSynchronize(span_end_)));
    float ms = 0;
    RETURN_IF_ERROR(
        Cuda(kOp, "cudaEventElapsedTime", cudaEventElapsedTime(&ms, span_begin_, span_end_)));
    busy_ns_.fetch_add(static_cast<int64_t>(static_cast<double>(ms) * 1e6),
                       std::memory_order_relaxed);
    return absl::OkStatus();
  }

  // ---- Memory.

  absl::StatusOr<std::unique_ptr<Buffer>> Alloc(DType dtype, size_t n) override {
    RETURN_IF_ERROR(Use("Alloc"));
    auto exhausted = [&](absl::string_view why) {
      return absl::ResourceExhaustedError(absl::StrCat("cuda backend Alloc: cannot allocate ", n,
                                                       " elements of ", internal::DTypeName(dtype),
                                                       " on cuda:", device_, ": ", why));
    };
    if (n > SIZE_MAX / sizeof(float)) return exhausted("size overflows");
    std::vector<uint32_t> mirror;
    if (dtype == DType::kUint32) {
      try {
        mirror.assign(n, 0u);
      } catch (const std::exception&) {
        return exhausted("no host memory for the index copy");
      }
    }
    void* data = nullptr;
    const size_t bytes = n * sizeof(float);
    if (bytes > 0) {
      const cudaError_t e = cudaMalloc(&data, bytes);
      if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return exhausted(cudaGetErrorString(e));
      }
      RETURN_IF_ERROR(Cuda("Alloc", "cudaMalloc", e));
      // Zero-filled in stream order: every later op on the stream sees zeros.
      if (absl::Status s =
              Cuda("Alloc", "cudaMemsetAsync", cudaMemsetAsync(data, 0, bytes, stream_));
          !s.ok()) {
        (void)cudaFree(data);
        return s;
      }
    }
    auto* buffer = new (std::nothrow) CudaBuffer(this, device_, dtype, n, data, std::move(mirror));
    if (buffer == nullptr) {
      (void)cudaFree(data);
      return exhausted("no host memory for the handle");
    }
    return std::unique_ptr<Buffer>(buffer);
  }

  absl::Status Upload(absl::Span<const float> src, Buffer* dst, size_t offset) override {
    RETURN_IF_ERROR(Check("Upload", "dst", dst, DType::kFloat32, SatAdd(offset, src.size())));
    RETURN_IF_ERROR(Use("Upload"));
    return CopyIn("Upload", src.data(), src.size() * sizeof(float), F(*dst) + offset);
  }

  absl::Status Upload(absl::Span<const uint32_t> src, Buffer* dst, size_t offset) override {
    RETURN_IF_ERROR(Check("Upload", "dst", dst, DType::kUint32, SatAdd(offset, src.size())));
    RETURN_IF_ERROR(Use("Upload"));
    RETURN_IF_ERROR(CopyIn("Upload", src.data(), src.size() * sizeof(uint32_t),
                           static_cast<CudaBuffer*>(dst)->uints() + offset));
    std::copy(src.begin(), src.end(), static_cast<CudaBuffer*>(dst)->mirror().begin() + offset);
    return absl::OkStatus();
  }

  absl::Status Download(const Buffer& src, size_t offset, absl::Span<float> dst) override {
    RETURN_IF_ERROR(Check("Download", "src", &src, DType::kFloat32, SatAdd(offset, dst.size())));
    RETURN_IF_ERROR(Use("Download"));
    return CopyOut("Download", F(src) + offset, dst.size() * sizeof(float), dst.data());
  }

  absl::Status Fill(float value, size_t n, size_t offset, Buffer* x) override {
    RETURN_IF_ERROR(Check("Fill", "x", x, DType::kFloat32, SatAdd(offset, n)));
    RETURN_IF_ERROR(Use("Fill"));
    return Launched("Fill",
                    cuda::LaunchFill(stream_, static_cast<int64_t>(n), value, F(*x) + offset));
  }

  absl::Status Synchronize() override {
    RETURN_IF_ERROR(Use("Synchronize"));
    return Wait("Synchronize");
  }

  // ---- Dense math.

  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const Buffer& a, const Buffer& b, float beta, Buffer* c) override {
    RETURN_IF_ERROR(kChecks.Sizes("Gemm", {m, n, k}));
    RETURN_IF_ERROR(Check("Gemm", "a", &a, DType::kFloat32, SatMul(m, k)));
    RETURN_IF_ERROR(Check("Gemm", "b", &b, DType::kFloat32, SatMul(k, n)));
    RETURN_IF_ERROR(Check("Gemm", "c", c, DType::kFloat32, SatMul(m, n)));
    RETURN_IF_ERROR(kChecks.Distinct("Gemm", c, {&a, &b}));
    if (m == 0 || n == 0) return absl::OkStatus();
    RETURN_IF_ERROR(Use("Gemm"));
    if (k == 0) return Launched("Gemm", cuda::LaunchScale(stream_, m * n, beta, F(*c)));
    // Column-major view (see the file comment): C^T (n x m) = op(B)^T op(A)^T.
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int64_t lda = trans_a ? m : k;
    const int64_t ldb = trans_b ? k : n;
    if (gemm_math_ == CudaGemmMath::kFloat32) {
      return Cublas("Gemm", "cublasSgemm",
                    cublasSgemm_64(cublas_, op_b, op_a, n, m, k, &alpha, F(b), ldb, F(a), lda,
                                   &beta, F(*c), n));
    }
    const cublasComputeType_t compute = gemm_math_ == CudaGemmMath::kTf32
                                            ? CUBLAS_COMPUTE_32F_FAST_TF32
                                            : CUBLAS_COMPUTE_32F_FAST_16BF;
    return Cublas("Gemm", "cublasGemmEx",
                  cublasGemmEx_64(cublas_, op_b, op_a, n, m, k, &alpha, F(b), CUDA_R_32F, ldb, F(a),
                                  CUDA_R_32F, lda, &beta, F(*c), CUDA_R_32F, n, compute,
                                  CUBLAS_GEMM_DEFAULT));
  }

  absl::Status Copy2D(int64_t rows, int64_t cols, const Buffer& src, int64_t src_stride,
                      int64_t src_offset, Buffer* dst, int64_t dst_stride, int64_t dst_offset,
                      bool accumulate) override {
    RETURN_IF_ERROR(
        kChecks.Sizes("Copy2D", {rows, cols, src_stride, src_offset, dst_stride, dst_offset}));
    RETURN_IF_ERROR(
        Check("Copy2D", "src", &src, DType::kFloat32, Extent(rows, cols, src_stride, src_offset)));
    RETURN_IF_ERROR(
        Check("Copy2D", "dst", dst, DType::kFloat32, Extent(rows, cols, dst_stride, dst_offset)));
    RETURN_IF_ERROR(kChecks.Distinct("Copy2D", dst, {&src}));
    if (rows > 1 && dst_stride < cols) {
      return kChecks.Bad("Copy2D", "dst rows overlap (dst_stride < cols)");
    }
    RETURN_IF_ERROR(Use("Copy2D"));
    return Launched("Copy2D",
                    cuda::LaunchCopy2D(stream_, rows, cols, F(src) + src_offset, src_stride,
                                       F(*dst) + dst_offset, dst_stride, accumulate));
  }

  absl::Status BiasActivation(Activation act, int64_t rows, int64_t cols, const Buffer& bias,
                              Buffer* x) override {
    RETURN_IF_ERROR(kChecks.Sizes("BiasActivation", {rows, cols}));
    RETURN_IF_ERROR(Check("BiasActivation", "bias", &bias, DType::kFloat32, cols));
    RETURN_IF_ERROR(Check("BiasActivation", "x", x, DType::kFloat32, SatMul(rows, cols)));
    RETURN_IF_ERROR(kChecks.Distinct("BiasActivation", x, {&bias}));
    RETURN_IF_ERROR(Use("BiasActivation"));
    return Launched("BiasActivation",
                    cuda::LaunchBiasActivation(stream_, act, rows, cols, F(bias), F(*x)));
  }

  absl::Status ActivationBackward(Activation act, int64_t n, const Buffer& y, Buffer* dy) override {
    RETURN_IF_ERROR(kChecks.Sizes("ActivationBackward", {n}));
    RETURN_IF_ERROR(Check("ActivationBackward", "y", &y, DType::kFloat32, n));
    RETURN_IF_ERROR(Check("ActivationBackward", "dy", dy, DType::kFloat32, n));
    RETURN_IF_ERROR(kChecks.Distinct("ActivationBackward", dy, {&y}));
    RETURN_IF_ERROR(Use("ActivationBackward"));
    return Launched("ActivationBackward",
                    cuda::LaunchActivationBackward(stream_, act, n, F(y), F(*dy)));
  }

  absl::Status BiasBackward(int64_t rows, int64_t cols, const Buffer& dx, bool accumulate,
                            Buffer* dbias) override {
    RETURN_IF_ERROR(kChecks.Sizes("BiasBackward", {rows, cols}));
    RETURN_IF_ERROR(Check("BiasBackward", "dx", &dx, DType::kFloat32, SatMul(rows, cols)));
    RETURN_IF_ERROR(Check("BiasBackward", "dbias", dbias, DType::kFloat32, cols));
    RETURN_IF_ERROR(kChecks.Distinct("BiasBackward", dbias, {&dx}));
    RETURN_IF_ERROR(Use("BiasBackward"));
    return Launched("BiasBackward",
                    cuda::LaunchBiasBackward(stream_, rows, cols, F(dx), accumulate, F(*dbias)));
  }

  absl::Status Dropout(int64_t n, float rate, uint64_t seed, Buffer* x, Buffer* mask) override {
    RETURN_IF_ERROR(kChecks.Sizes("Dropout", {n}));
    if (!(rate >= 0.0f && rate < 1.0f)) {
      return kChecks.Bad("Dropout", absl::StrCat("rate must be in [0, 1), got ", rate));
    }
    RETURN_IF_ERROR(Check("Dropout", "x", x, DType::kFloat32, n));
    RETURN_IF_ERROR(Check("Dropout", "mask", mask, DType::kFloat32, n));
    RETURN_IF_ERROR(kChecks.Distinct("Dropout", mask, {x}));
    RETURN_IF_ERROR(Use("Dropout"));
    // The scale is rounded on the host, as the CPU backend rounds it.
    const float scale = 1.0f / (1.0f - rate);
    return Launched("Dropout", cuda::LaunchDropout(stream_, n, rate, scale, seed, F(*x), F(*mask)));
  }

  absl::Status Mul(int64_t n, const Buffer& x, Buffer* y) override {
    RETURN_IF_ERROR(kChecks.Sizes("Mul", {n}));
    RETURN_IF_ERROR(Check("Mul", "x", &x, DType::kFloat32, n));
    RETURN_IF_ERROR(Check("Mul", "y", y, DType::kFloat32, n));
    RETURN_IF_ERROR(kChecks.Distinct("Mul", y, {&x}));
    RETURN_IF_ERROR(Use("Mul"));
    return Launched("Mul", cuda::LaunchMul(stream_, n, F(x), F(*y)));
  }

  // ---- Embeddings.

  absl::Status PoolForward(Combiner combiner, int64_t batch, int64_t dim, const Buffer& offsets,
                           const Buffer& indices, const Buffer& table, int64_t num_rows,
                           Buffer* out, int64_t out_stride, int64_t out_offset,
                           bool accumulate) override {
    constexpr absl::string_view kOp = "PoolForward";
    RETURN_IF_ERROR(kChecks.Sizes(kOp, {batch, dim, num_rows, out_stride, out_offset}));
    RETURN_IF_ERROR(CheckCsr(kOp, batch, offsets, indices, num_rows));
    RETURN_IF_ERROR(Check(kOp, "table", &table, DType::kFloat32, SatMul(num_rows, dim)));
    RETURN_IF_ERROR(
        Check(kOp, "out", out, DType::kFloat32, Extent(batch, dim, out_stride, out_offset)));
    RETURN_IF_ERROR(kChecks.Distinct(kOp, out, {&table}));
    if (batch > 1 && out_stride < dim) return kChecks.Bad(kOp, "out_stride < dim");
    RETURN_IF_ERROR(Use(kOp));
    return Launched(
        kOp, cuda::LaunchPoolForward(stream_, combiner, batch, dim, U(offsets), U(indices),
                                     F(table), F(*out) + out_offset, out_stride, accumulate));
  }

  absl::Status PoolBackward(Combiner combiner, int64_t batch, int64_t dim, const Buffer& offsets,
                            const Buffer& indices, const Buffer& d_out, int64_t out_stride,
                            int64_t out_offset, Buffer* d_table, int64_t num_rows) override {
    constexpr absl::string_view kOp = "PoolBackward";
    RETURN_IF_ERROR(kChecks.Sizes(kOp, {batch, dim, num_rows, out_stride, out_offset}));
    RETURN_IF_ERROR(CheckCsr(kOp, batch, offsets, indices, num_rows));
    RETURN_IF_ERROR(
        Check(kOp, "d_out", &d_out, DType::kFloat32, Extent(batch, dim, out_stride, out_offset)));
    RETURN_IF_ERROR(Check(kOp, "d_table", d_table, DType::kFloat32, SatMul(num_rows, dim)));
    RETURN_IF_ERROR(kChecks.Distinct(kOp, d_table, {&d_out}));
    RETURN_IF_ERROR(Use(kOp));
    return Launched(kOp,
                    cuda::LaunchPoolBackward(stream_, combiner, batch, dim, U(offsets), U(indices),
                                             F(d_out) + out_offset, out_stride, F(*d_table)));
  }

  // ---- Feature interactions.

  absl::Status InteractionForward(int64_t batch, int64_t f, int64_t dim, const Buffer& x,
                                  Buffer* out) override {
    constexpr absl::string_view kOp = "InteractionForward";
    RETURN_IF_ERROR(kChecks.Sizes(kOp, {batch, f, dim}));
    const int64_t pairs = f * (f - 1) / 2;
    RETURN_IF_ERROR(Check(kOp, "x", &x, DType::kFloat32, SatMul(SatMul(batch, f), dim)));
    RETURN_IF_ERROR(Check(kOp, "out", out, DType::kFloat32, SatMul(batch, pairs)));
    RETURN_IF_ERROR(kChecks.Distinct(kOp, out, {&x}));
    RETURN_IF_ERROR(Use(kOp));
    return Launched(kOp, cuda::LaunchInteractionForward(stream_, batch, f, dim, F(x), F(*out)));
  }

  absl::Status InteractionBackward(int64_t batch, int64_t f, int64_t dim, const Buffer& x,
                                   const Buffer& d_out, Buffer* dx) override {
    constexpr absl::string_view kOp = "InteractionBackward";
    RETURN_IF_ERROR(kChecks.Sizes(kOp, {batch, f, dim}));
    const int64_t pairs = f * (f - 1) / 2;
    const uint64_t n = SatMul(SatMul(batch, f), dim);
    RETURN_IF_ERROR(Check(kOp, "x", &x, DType::kFloat32, n));
    RETURN_IF_ERROR(Check(kOp, "d_out", &d_out, DType::kFloat32, SatMul(batch, pairs)));
    RETURN_IF_ERROR(Check(kOp, "dx", dx, DType::kFloat32, n));
    RETURN_IF_ERROR(kChecks.Distinct(kOp, dx, {&x, &d_out}));
    RETURN_IF_ERROR(Use(kOp));
    return Launched(
        kOp, cuda::LaunchInteractionBackward(stream_, batch, f, dim, F(x), F(d_out), F(*dx)));
  }

  absl::Status FmForward(int64_t batch, int64_t f, int64_t dim, const Buffer& x, bool accumulate,
                         Buffer* out) override {
    constexpr absl::string_view kOp = "FmForward";
    RETURN_IF_ERROR(kChecks.Sizes(kOp, {batch, f, dim}));
    RETURN_IF_ERROR(Check(kOp, "x", &x, DType::kFloat32, SatMul(SatMul(batch, f), dim)));
    RETURN_IF_ERROR(Check(kOp, "out", out, DType::kFloat32, batch));
    RETURN_IF_ERROR(kChecks.Distinct(kOp, out, {&x}));
    RETURN_IF_ERROR(Use(kOp));
    return Launched(kOp, cuda::LaunchFmForward(stream_, batch, f, dim, F(x), accumulate, F(*out)));
  }

  absl::Status FmBackward(int64_t batch, int64_t f, int64_t dim, const Buffer& x,
                          const Buffer& d_out, Buffer* dx) override {
    constexpr absl::string_view kOp = "FmBackward";
    RETURN_IF_ERROR(kChecks.Sizes(kOp, {batch, f, dim}));
    const uint64_t n = SatMul(SatMul(batch, f), dim);
    RETURN_IF_ERROR(Check(kOp, "x", &x, DType::kFloat32, n));
    RETURN_IF_ERROR(Check(kOp, "d_out", &d_out, DType::kFloat32, batch));
    RETURN_IF_ERROR(Check(kOp, "dx", dx, DType::kFloat32, n));
    RETURN_IF_ERROR(kChecks.Distinct(kOp, dx, {&x, &d_out}));
    RETURN_IF_ERROR(Use(kOp));
    return Launched(kOp, cuda::LaunchFmBackward(stream_, batch, f, dim, F(x), F(d_out), F(*dx)));
  }

  // ---- Loss.

  absl::StatusOr<double> Loss(LossKind kind, int64_t n, const Buffer& logits, const Buffer& labels,
                              float grad_scale, Buffer* predictions, Buffer* d_logits) override {
    constexpr absl::string_view kOp = "Loss";
    RETURN_IF_ERROR(kChecks.Sizes(kOp, {n}));
    RETURN_IF_ERROR(Check(kOp, "logits", &logits, DType::kFloat32, n));
    RETURN_IF_ERROR(Check(kOp, "labels", &labels, DType::kFloat32, n));
    RETURN_IF_ERROR(Check(kOp, "predictions", predictions, DType::kFloat32, n));
    RETURN_IF_ERROR(kChecks.Distinct(kOp, predictions, {&logits, &labels}));
    if (d_logits != nullptr) {
      RETURN_IF_ERROR(Check(kOp, "d_logits", d_logits, DType::kFloat32, n));
      RETURN_IF_ERROR(kChecks.Distinct(kOp, d_logits, {&logits, &labels, predictions}));
    }
    RETURN_IF_ERROR(Use(kOp));
    double* total = partials_ + cuda::kLossPartials;
    RETURN_IF_ERROR(Launched(
        kOp, cuda::LaunchLoss(stream_, kind, n, F(logits), F(labels), grad_scale, F(*predictions),
                              d_logits != nullptr ? F(*d_logits) : nullptr, partials_, total)));
    double sum = 0.0;
    RETURN_IF_ERROR(CopyOut(kOp, total, sizeof(double), &sum));
    return sum;
  }

 private:
  bool Owns(const Buffer* b) const {
    const auto* cb = dynamic_cast<const CudaBuffer*>(b);
    return cb != nullptr && cb->owner() == this;
  }

  absl::Status Check(absl::string_view op, absl::string_view arg, const Buffer* b, DType dtype,
                     uint64_t need) const {
    return kChecks.Buf(op, arg, b, dtype, need, Owns(b));
  }

  // The CPU backend's CSR check, on the host copies of the index buffers.
  absl::Status CheckCsr(absl::string_view op, int64_t batch, const Buffer& offsets,
                        const Buffer& indices, int64_t num_rows) const {
    RETURN_IF_ERROR(Check(op, "offsets", &offsets, DType::kUint32, SatAdd(batch, 1)));
    RETURN_IF_ERROR(Check(op, "indices", &indices, DType::kUint32, 0));
    return kChecks.Csr(op, batch, Cb(offsets).mirror().data(), Cb(indices).mirror().data(),
                       indices.size(), num_rows);
  }

  // Makes this backend's device current on the calling thread.
  absl::Status Use(absl::string_view op) {
    return Cuda(op, "cudaSetDevice", cudaSetDevice(device_));
  }

  absl::Status Launched(absl::string_view op, cudaError_t e) {
    return Cuda(op, "kernel launch", e);
  }

  // Waits for every queued op; the upload staging buffer is then free.
  absl::Status Wait(absl::string_view op) {
    RETURN_IF_ERROR(Cuda(op, "cudaStreamSynchronize", cudaStreamSynchronize(stream_)));
    upload_.used = 0;
    return absl::OkStatus();
  }

  // Replaces p's memory by at least `bytes` (no copy may be reading it).
  absl::Status Grow(absl::string_view op, Pinned* p, size_t bytes) {
    if (p->data != nullptr) RETURN_IF_ERROR(Cuda(op, "cudaFreeHost", cudaFreeHost(p->data)));
    p->data = nullptr;
    p->capacity = 0;
    p->used = 0;
    void* data = nullptr;
    RETURN_IF_ERROR(Cuda(op, "cudaMallocHost", cudaMallocHost(&data, bytes)));
    p->data = static_cast<char*>(data);
    p->capacity = bytes;
    return absl::OkStatus();
  }

  // Queues a host-to-device copy of `bytes` from `src` (which the caller may
  // reuse on return) through the pinned staging buffer.
  absl::Status CopyIn(absl::string_view op, const void* src, size_t bytes, void* dst) {
    const char* from = static_cast<const char*>(src);
    char* to = static_cast<char*>(dst);
    while (bytes > 0) {
      const size_t chunk = std::min(bytes, kMaxStagingBytes);
      if (upload_.used + chunk > upload_.capacity) {
        // Full: wait until the queued copies have read it, then start over,
        // first growing it so that next time this many uploads fit.
        const size_t want =
            std::min(kMaxStagingBytes,
                     std::max({upload_.used + chunk, 2 * upload_.capacity, kMinStagingBytes}));
        RETURN_IF_ERROR(Wait(op));
        if (upload_.capacity < want) RETURN_IF_ERROR(Grow(op, &upload_, want));
      }
      char* staged = upload_.data + upload_.used;
      std::memcpy(staged, from, chunk);
      RETURN_IF_ERROR(Cuda(op, "cudaMemcpyAsync",
                           cudaMemcpyAsync(to, staged, chunk, cudaMemcpyHostToDevice, stream_)));
      upload_.used += chunk;
      from += chunk;
      to += chunk;
      bytes -= chunk;
    }
    return absl::OkStatus();
  }

  // Copies `bytes` from the device to `dst` after every queued op. Waits.
  absl::Status CopyOut(absl::string_view op, const void* src, size_t bytes, void* dst) {
    const char* from = static_cast<const char*>(src);
    char* to = static_cast<char*>(dst);
    if (bytes == 0) return Wait(op);
    while (bytes > 0) {
      const size_t chunk = std::min(bytes, kMaxStagingBytes);
      if (download_.capacity < chunk) {
        // No copy is in flight into download_: every CopyOut waits.
        RETURN_IF_ERROR(Grow(op, &download_,
                             std::min(kMaxStagingBytes, std::max({chunk, 2 * download_.capacity,
                                                                  kMinStagingBytes}))));
      }
      RETURN_IF_ERROR(
          Cuda(op, "cudaMemcpyAsync",
               cudaMemcpyAsync(download_.data, from, chunk, cudaMemcpyDeviceToHost, stream_)));
      RETURN_IF_ERROR(Wait(op));
      std::memcpy(to, download_.data, chunk);
      from += chunk;
      to += chunk;
      bytes -= chunk;
    }
    return absl::OkStatus();
  }

  // Constant after construction (and Init).
  const int device_;
  const CudaGemmMath gemm_math_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  double* partials_ = nullptr;  // device: the loss reduction's scratch and result
  cudaEvent_t span_begin_ = nullptr, span_end_ = nullptr;

  bool span_open_ = false;           // the ops' thread only
  std::atomic<int64_t> busy_ns_{0};  // read by device_stats() on any thread

  // Staging, reused across ops.
  Pinned upload_;
  Pinned download_;
};

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options) {
  if (options.device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda backend: device ordinal ", options.device, " is negative"));
  }
  if (options.gemm_math != CudaGemmMath::kFloat32 && options.gemm_math != CudaGemmMath::kTf32 &&
      options.gemm_math != CudaGemmMath::kBf16) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda backend: unknown gemm_math ", static_cast<int>(options.gemm_math)));
  }
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda backend: no CUDA-capable device: cudaGetDeviceCount: ", cudaGetErrorName(e), ": ",
        cudaGetErrorString(e)));
  }
  if (count == 0) {
    return absl::FailedPreconditionError(
        "cuda backend: no CUDA-capable device: cudaGetDeviceCount found none");
  }
  if (options.device >= count) {
    return absl::InvalidArgumentError(absl::StrCat("cuda backend: no device cuda:", options.device,
                                                   " (this machine has ", count, ")"));
  }
  auto backend = std::make_unique<CudaBackend>(options);
  RETURN_IF_ERROR(backend->Init());
  return std::unique_ptr<Backend>(std::move(backend));
}

void SetError(const absl::Status& status, int* status_code, char* error, size_t error_size) {
  if (status_code != nullptr) *status_code = static_cast<int>(status.code());
  if (error != nullptr && error_size > 0) {
    const size_t n = std::min(status.message().size(), error_size - 1);
    std::memcpy(error, status.message().data(), n);
    error[n] = '\0';
  }
}

// The body of the exported factory, inside the namespace.
Backend* CreateForLoader(uint32_t abi_version, const CudaBackendOptions* options, int* status_code,
                         char* error, size_t error_size) {
  if (abi_version != kCudaPluginAbiVersion) {
    SetError(absl::FailedPreconditionError(absl::StrCat(
                 "CUDA backend plugin ABI version is ", kCudaPluginAbiVersion, ", the loader's is ",
                 abi_version, ": rebuild the plugin and the binary from the same tree")),
             status_code, error, error_size);
    return nullptr;
  }
  if (options == nullptr) {
    SetError(absl::InvalidArgumentError("CUDA backend plugin: options is null"), status_code, error,
             error_size);
    return nullptr;
  }
  try {
    absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(*options);
    if (!backend.ok()) {
      SetError(backend.status(), status_code, error, error_size);
      return nullptr;
    }
    return backend->release();
  } catch (const std::exception& e) {  // no exception may cross the C boundary
    SetError(absl::InternalError(absl::StrCat("cuda backend: ", e.what())), status_code, error,
             error_size);
    return nullptr;
  }
}

}  // namespace
}  // namespace brook::trainer

// The plugin's one export (cuda_plugin.h: CudaPluginFactory). Its name must
// be kCudaPluginFactorySymbol.
extern "C" __attribute__((visibility("default"))) brook::trainer::Backend* BrookCreateCudaBackend(
    uint32_t abi_version, const brook::trainer::CudaBackendOptions* options, int* status_code,
    char* error, size_t error_size) {
  return brook::trainer::CreateForLoader(abi_version, options, status_code, error, error_size);
}

static_assert(std::is_same_v<decltype(&BrookCreateCudaBackend), brook::trainer::CudaPluginFactory>,
              "BrookCreateCudaBackend must match cuda_plugin.h");
