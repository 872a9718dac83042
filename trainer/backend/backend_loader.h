// Makes a Backend from a device name: the CPU backend directly, the CUDA
// backend by dlopen()ing its plugin (libbrook_backend_cuda.so), so that the
// binaries never link CUDA or cuBLAS and run unchanged where neither exists.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
//                    CreateBackend(flags.device, CpuBackendOptions{}));
//
// Where the plugin is looked for, in order:
//   1. $BROOK_CUDA_PLUGIN, when set (only there);
//   2. <dir of the running executable>/../lib, then <dir>/lib, then <dir>
//      (the build tree puts the plugin in <build>/lib, next to chief/ and
//      tests/);
//   3. the dynamic loader's own path (LD_LIBRARY_PATH, rpath, ld.so.cache).
// The plugin stays loaded for the life of the process (it is never
// dlclose()d), so backends and their buffers may live as long as they like.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "trainer/backend/backend.h"
#include "trainer/backend/cpu_backend.h"
#include "trainer/backend/cuda/cuda_plugin.h"

namespace brook::trainer {

// A device name as `--device` takes it, checked: "cpu", "cuda" (device 0)
// or "cuda:N". Opens nothing (brook trainer --check-config).
struct DeviceName {
  bool cuda = false;
  int32_t ordinal = 0;  // cuda only
  // "cpu" or "cuda:N": one spelling per device ("cuda" and "cuda:00" are
  // "cuda:0").
  std::string Canonical() const;
};
// InvalidArgument naming the device (its first 64 bytes) for any other
// spelling, and for a gemm_math other than float32 on the CPU.
absl::StatusOr<DeviceName> ParseDevice(std::string_view device,
                                       CudaGemmMath gemm_math = CudaGemmMath::kFloat32);

// ParseDevice, then the backend. For CUDA see CreateCudaBackend.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    std::string_view device, const CpuBackendOptions& cpu,
    CudaGemmMath gemm_math = CudaGemmMath::kFloat32);

// "fp32", "tf32" or "bf16" (brook trainer --gemm-math); InvalidArgument
// naming the others.
absl::StatusOr<CudaGemmMath> ParseGemmMath(std::string_view name);

// Loads the plugin and creates a CUDA backend. FailedPrecondition when the
// plugin was not built ("CUDA backend plugin not built"), cannot be found or
// loaded ("dlopen <path>: <why>"), is from another build (ABI version), or
// when there is no usable device ("no CUDA-capable device: <cuda error>");
// InvalidArgument for a device ordinal the machine lacks.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options);

namespace internal {
// The plugin's factory, loaded as CreateCudaBackend loads it (tests call it
// with a wrong ABI version). Same errors as above, short of creating.
absl::StatusOr<CudaPluginFactory> LoadCudaPlugin();
}  // namespace internal

}  // namespace brook::trainer
