// CreateBackend's device names and the CUDA plugin's loading and failure
// modes. Runs everywhere: without a GPU (or without the plugin) "cuda" must
// give a clear error, never a crash.
#include "trainer/backend/backend_loader.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace brook::trainer {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

TEST(BackendLoaderTest, CpuGivesTheCpuBackend) {
  absl::StatusOr<std::unique_ptr<Backend>> b = CreateBackend("cpu", CpuBackendOptions{1});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->name(), "cpu");
  // The CPU options reach the CPU backend.
  EXPECT_EQ(CreateBackend("cpu", CpuBackendOptions{-1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BackendLoaderTest, UnknownDeviceIsInvalidArgumentNamingIt) {
  for (const char* device : {"tpu", "", "CPU", "gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x",
                             "cuda:+1", "cuda: 1", "cuda:12345", "cuda0"}) {
    absl::StatusOr<std::unique_ptr<Backend>> b = CreateBackend(device, {});
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << device;
    EXPECT_THAT(b.status().message(), HasSubstr(absl::StrCat("\"", device, "\""))) << device;
  }
}

// ParseDevice checks a name without opening anything (--check-config, the
// bench's device list) and gives one spelling per device.
TEST(DeviceNameTest, ParsesEachSpellingToOneCanonicalName) {
  for (const auto& [given, canonical] :
       std::vector<std::pair<std::string, std::string>>{{"cpu", "cpu"},
                                                        {"cuda", "cuda:0"},
                                                        {"cuda:0", "cuda:0"},
                                                        {"cuda:00", "cuda:0"},
                                                        {"cuda:7", "cuda:7"},
                                                        {"cuda:0012", "cuda:12"}}) {
    const CudaGemmMath math = given == "cpu" ? CudaGemmMath::kFloat32 : CudaGemmMath::kTf32;
    absl::StatusOr<DeviceName> d = ParseDevice(given, math);
    ASSERT_TRUE(d.ok()) << given << ": " << d.status();
    EXPECT_EQ(d->Canonical(), canonical) << given;
  }
  EXPECT_EQ(ParseDevice("cpu", CudaGemmMath::kBf16).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A long name is echoed in part.
  const std::string pasted(5000, 'x');
  absl::StatusOr<DeviceName> d = ParseDevice(pasted);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(d.status().message().size(), 200u);
  EXPECT_THAT(d.status().message(), HasSubstr("5000 bytes"));
}

// brook trainer --gemm-math: fp32, tf32, bf16; the fast modes are the
// GPU's tensor cores, so the CPU refuses them rather than ignore them.
TEST(BackendLoaderTest, GemmMathIsParsedAndRefusedOnTheCpu) {
  EXPECT_EQ(ParseGemmMath("fp32").value(), CudaGemmMath::kFloat32);
  EXPECT_EQ(ParseGemmMath("tf32").value(), CudaGemmMath::kTf32);
  EXPECT_EQ(ParseGemmMath("bf16").value(), CudaGemmMath::kBf16);
  for (const char* bad : {"", "FP32", "fp16", "tf32 "}) {
    EXPECT_EQ(ParseGemmMath(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(CreateBackend("cpu", {}, CudaGemmMath::kFloat32).ok());
  absl::StatusOr<std::unique_ptr<Backend>> tf32_on_cpu =
      CreateBackend("cpu", {}, CudaGemmMath::kTf32);
  EXPECT_EQ(tf32_on_cpu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tf32_on_cpu.status().message(), HasSubstr("cpu"));
}

TEST(BackendLoaderTest, CudaGivesABackendOrAClearError) {
  for (const char* device : {"cuda", "cuda:0"}) {
    absl::StatusOr<std::unique_ptr<Backend>> b = CreateBackend(device, {});
    if (b.ok()) {
      EXPECT_EQ((*b)->name(), "cuda");
      continue;
    }
    // No plugin in this build, or no usable GPU on this machine.
    EXPECT_NE(b.status().code(), absl::StatusCode::kInternal) << b.status();
    EXPECT_THAT(b.status().message(), AnyOf(HasSubstr("plugin"), HasSubstr("device")));
    RecordProperty("cuda_error", std::string(b.status().message()));
  }
  // A device this machine lacks is an error either way.
  EXPECT_FALSE(CreateBackend("cuda:999", {}).ok());
}

TEST(BackendLoaderTest, PluginPathFromTheEnvironmentIsTheOnlyOneTried) {
  {
    testing::ScopedEnv env("BROOK_CUDA_PLUGIN", "/nonexistent/libbrook_backend_cuda.so");
    const absl::Status s = CreateBackend("cuda", {}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr("dlopen /nonexistent/libbrook_backend_cuda.so"));
  }
  // A file that is not a shared object.
  const std::string path = absl::StrCat(::testing::TempDir(), "/not_a_plugin.so");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("not an ELF file\n", f);
  std::fclose(f);
  {
    testing::ScopedEnv env("BROOK_CUDA_PLUGIN", path);
    const absl::Status s = CreateBackend("cuda:0", {}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("dlopen ", path)));
  }
  std::remove(path.c_str());
}

// Needs the plugin (not a GPU): the ABI check comes before any CUDA call.
TEST(BackendLoaderTest, PluginRefusesAnotherAbiVersionAndReportsIt) {
  absl::StatusOr<CudaPluginFactory> create = internal::LoadCudaPlugin();
  if (!create.ok()) GTEST_SKIP() << "SKIPPED: no CUDA plugin in this build: " << create.status();
  const CudaBackendOptions options;
  int code = 0;
  char error[256] = "";
  EXPECT_EQ((*create)(kCudaPluginAbiVersion + 1, &options, &code, error, sizeof(error)), nullptr);
  EXPECT_EQ(code, static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(error, HasSubstr("ABI version"));
  // The message is truncated to the buffer, NUL included.
  char small[8];
  std::memset(small, 'x', sizeof(small));
  EXPECT_EQ((*create)(kCudaPluginAbiVersion + 1, &options, &code, small, sizeof(small)), nullptr);
  EXPECT_EQ(std::strlen(small), sizeof(small) - 1);
  code = 0;
  EXPECT_EQ((*create)(kCudaPluginAbiVersion, nullptr, &code, error, sizeof(error)), nullptr);
  EXPECT_EQ(code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  // With the right version: a backend, or (no GPU) a clear error.
  code = 0;
  Backend* backend = (*create)(kCudaPluginAbiVersion, &options, &code, error, sizeof(error));
  if (backend != nullptr) {
    EXPECT_EQ(backend->name(), "cuda");
    delete backend;
  } else {
    EXPECT_THAT(error, HasSubstr("device"));
    RecordProperty("cuda_error", error);
  }
}

}  // namespace
}  // namespace brook::trainer
