// The AVX-512 (F, VL, BW, DQ) kernel. CMake compiles this file with those
// -m flags on x86-64 only; elsewhere it compiles to "not available".
#include "trainer/backend/internal/gemm_kernel.h"

#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512BW__) && \
    defined(__AVX512DQ__) && defined(__FMA__)
#define BROOK_EIGEN_NAMESPACE EigenBrookAvx512
#define BROOK_GEMM_NAME GemmAvx512Kernel
namespace brook::trainer::internal {
void GemmAvx512Kernel(const GemmArgs& args);
GemmFn GemmAvx512() { return &GemmAvx512Kernel; }
}  // namespace brook::trainer::internal
#include "trainer/backend/internal/gemm_kernel_impl.h"
#else
namespace brook::trainer::internal {
GemmFn GemmAvx512() { return nullptr; }
}  // namespace brook::trainer::internal
#endif
