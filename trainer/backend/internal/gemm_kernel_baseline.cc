// The kernel for the build's default instruction set; always available.
#define BROOK_EIGEN_NAMESPACE EigenBrookBaseline
#define BROOK_GEMM_NAME GemmBaseline
#include "trainer/backend/internal/gemm_kernel_impl.h"
