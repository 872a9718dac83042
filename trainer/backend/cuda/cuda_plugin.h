// The contract between the CUDA backend plugin (libbrook_backend_cuda.so,
// built from this folder only when nvcc is found) and its loader
// (trainer/backend/backend_loader.cc, always built). No CUDA type appears
// here: the loader links no CUDA library, and cuBLAS must stay out of the
// main binary (NOTES.md: linked in, it breaks prometheus-cpp's exposer).
//
// The plugin exports exactly one symbol, kCudaPluginFactorySymbol, of type
// CudaPluginFactory. C++ types (Backend, CudaBackendOptions) cross the
// boundary because plugin and binary are built from the same tree with the
// same compiler and abseil; kCudaPluginAbiVersion catches a stale plugin
// from another tree or an older build.
#pragma once

#include <cstddef>
#include <cstdint>

#include "trainer/backend/backend.h"

namespace brook::trainer {

// The arithmetic of the CUDA backend's GEMMs. Inputs, outputs and the weights
// on the PS stay float32 in every mode (float32 master weights); the faster
// modes let cuBLAS round the GEMM *inputs* on tensor cores and accumulate in
// float32, trading about 3 (TF32) or 2 (BF16) significant digits per product
// for throughput.
enum class CudaGemmMath : int32_t {
  kFloat32 = 0,  // cublasSgemm: IEEE float32, what the parity tests check
  kTf32 = 1,     // CUBLAS_COMPUTE_32F_FAST_TF32 (10-bit mantissa inputs)
  kBf16 = 2,     // CUBLAS_COMPUTE_32F_FAST_16BF (7-bit mantissa inputs)
};

struct CudaBackendOptions {
  // CUDA device ordinal, as in cudaSetDevice.
  int32_t device = 0;
  CudaGemmMath gemm_math = CudaGemmMath::kFloat32;
};

// Bump whenever backend.h, op_types.h, CudaBackendOptions or the factory's
// signature change: the loader refuses a plugin with another version.
inline constexpr uint32_t kCudaPluginAbiVersion = 3;

inline constexpr char kCudaPluginFile[] = "libbrook_backend_cuda.so";
inline constexpr char kCudaPluginFactorySymbol[] = "BrookCreateCudaBackend";

// Creates a CUDA backend; the caller owns (and deletes) the result. On
// failure returns null, sets *status_code to an absl::StatusCode and writes a
// NUL-terminated message of at most error_size bytes into `error`. The first
// parameter and the last three are frozen across ABI versions, so that a
// version mismatch can always be reported: with abi_version !=
// kCudaPluginAbiVersion the plugin touches nothing but those three and
// returns FailedPrecondition. Never throws.
using CudaPluginFactory = Backend* (*)(uint32_t abi_version, const CudaBackendOptions* options,
                                       int* status_code, char* error, size_t error_size);

}  // namespace brook::trainer
