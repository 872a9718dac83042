#include "trainer/backend/backend_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

#ifndef BROOK_CUDA_PLUGIN_BUILT
#define BROOK_CUDA_PLUGIN_BUILT 0
#endif

namespace brook::trainer {
namespace {

// Whether this build made the plugin (trainer/CMakeLists.txt).
constexpr bool kPluginBuilt = BROOK_CUDA_PLUGIN_BUILT;

absl::StatusOr<CudaPluginFactory> FactoryOf(void* handle, absl::string_view where) {
  (void)dlerror();
  void* symbol = dlsym(handle, kCudaPluginFactorySymbol);
  if (symbol == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(where, " has no ", kCudaPluginFactorySymbol,
                                                      ": ", why != nullptr ? why : "null symbol"));
  }
  return reinterpret_cast<CudaPluginFactory>(symbol);
}

// RTLD_LOCAL: cuBLAS and the CUDA runtime stay out of the global symbol
// namespace. Never dlclose()d (see the header).
absl::StatusOr<CudaPluginFactory> Open(const std::string& path, absl::string_view origin) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("dlopen ", path, origin, ": ", why != nullptr ? why : "unknown error"));
  }
  return FactoryOf(handle, path);
}

// Where a build tree or an install keeps the plugin, relative to the binary.
std::vector<std::string> PluginPathsNearExecutable() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const std::filesystem::path dir = exe.parent_path();
  return {(dir / ".." / "lib" / kCudaPluginFile).lexically_normal().string(),
          (dir / "lib" / kCudaPluginFile).string(), (dir / kCudaPluginFile).string()};
}

}  // namespace

namespace internal {

absl::StatusOr<CudaPluginFactory> LoadCudaPlugin() {
  if (const char* env = std::getenv("BROOK_CUDA_PLUGIN"); env != nullptr && *env != '\0') {
    return Open(env, " ($BROOK_CUDA_PLUGIN)");
  }
  if (!kPluginBuilt) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA backend plugin not built (BROOK_HAVE_CUDA was OFF: no nvcc, BROOK_CUDA=OFF or a "
        "sanitizer build); set BROOK_CUDA_PLUGIN to a ",
        kCudaPluginFile, " built from the same tree"));
  }
  std::vector<std::string> tried;
  for (const std::string& path : PluginPathsNearExecutable()) {
    // A plugin that exists but fails to load is an error to report, not a
    // reason to look further.
    if (access(path.c_str(), F_OK) == 0) return Open(path, "");
    tried.push_back(path);
  }
  void* handle = dlopen(kCudaPluginFile, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA backend plugin ", kCudaPluginFile, " not found in ", absl::StrJoin(tried, ", "),
        " nor by the dynamic loader (dlopen ", kCudaPluginFile, ": ",
        why != nullptr ? why : "unknown error", "); set BROOK_CUDA_PLUGIN to its path"));
  }
  return FactoryOf(handle, kCudaPluginFile);
}

}  // namespace internal

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options) {
  ASSIGN_OR_RETURN(CudaPluginFactory create, internal::LoadCudaPlugin());
  int code = static_cast<int>(absl::StatusCode::kInternal);
  char error[1024] = "";
  Backend* backend = create(kCudaPluginAbiVersion, &options, &code, error, sizeof(error));
  if (backend == nullptr) {
    if (code <= 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
      code = static_cast<int>(absl::StatusCode::kInternal);
    }
    return absl::Status(static_cast<absl::StatusCode>(code),
                        error[0] != '\0' ? error : "CUDA backend plugin failed without a message");
  }
  return std::unique_ptr<Backend>(backend);
}

absl::StatusOr<CudaGemmMath> ParseGemmMath(std::string_view name) {
  if (name == "fp32") return CudaGemmMath::kFloat32;
  if (name == "tf32") return CudaGemmMath::kTf32;
  if (name == "bf16") return CudaGemmMath::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("GEMM math \"", std::string(name), "\": want fp32, tf32 or bf16"));
}

std::string DeviceName::Canonical() const {
  return cuda ? absl::StrCat("cuda:", ordinal) : std::string("cpu");
}

absl::StatusOr<DeviceName> ParseDevice(std::string_view device_name, CudaGemmMath gemm_math) {
  // Our abseil's string_view is its own type, not std::string_view.
  const absl::string_view device(device_name.data(), device_name.size());
  DeviceName d;
  if (device == "cpu") {
    if (gemm_math != CudaGemmMath::kFloat32) {
      return absl::InvalidArgumentError(
          "tf32 and bf16 GEMM math are CUDA's (tensor cores): the cpu device computes in fp32");
    }
    return d;
  }
  d.cuda = true;
  if (device == "cuda") return d;
  if (absl::StartsWith(device, "cuda:")) {
    const absl::string_view ordinal = device.substr(5);
    if (!ordinal.empty() && ordinal.size() <= 4 &&
        std::all_of(ordinal.begin(), ordinal.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        absl::SimpleAtoi(ordinal, &d.ordinal)) {
      return d;
    }
  }
  constexpr size_t kEcho = 64;  // a name is short; a pasted file is not worth echoing
  const std::string shown = device.size() <= kEcho ? std::string(device)
                                                   : absl::StrCat(device.substr(0, kEcho), "...(",
                                                                  device.size(), " bytes)");
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device \"", shown, "\": want cpu, cuda or cuda:N"));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(std::string_view device_name,
                                                       const CpuBackendOptions& cpu,
                                                       CudaGemmMath gemm_math) {
  ASSIGN_OR_RETURN(const DeviceName device, ParseDevice(device_name, gemm_math));
  if (!device.cuda) return CreateCpuBackend(cpu);
  CudaBackendOptions cuda;
  cuda.gemm_math = gemm_math;
  cuda.device = device.ordinal;
  return CreateCudaBackend(cuda);
}

}  // namespace brook::trainer
