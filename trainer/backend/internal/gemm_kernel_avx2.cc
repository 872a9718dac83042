// The AVX2 + FMA kernel. CMake compiles this file with -mavx2 -mfma on x86-64
// only; elsewhere it compiles to "not available".
#include "trainer/backend/internal/gemm_kernel.h"

#if defined(__AVX2__) && defined(__FMA__)
#define BROOK_EIGEN_NAMESPACE EigenBrookAvx2
#define BROOK_GEMM_NAME GemmAvx2Kernel
namespace brook::trainer::internal {
void GemmAvx2Kernel(const GemmArgs& args);
GemmFn GemmAvx2() { return &GemmAvx2Kernel; }
}  // namespace brook::trainer::internal
#include "trainer/backend/internal/gemm_kernel_impl.h"
#else
namespace brook::trainer::internal {
GemmFn GemmAvx2() { return nullptr; }
}  // namespace brook::trainer::internal
#endif
