// Single-threaded SGEMM kernels of the CPU backend, one per instruction set.
//
// Eigen picks its SIMD code at compile time, so gemm_kernel_avx2.cc and
// gemm_kernel_avx512.cc compile the same Eigen product with -mavx2 -mfma /
// -mavx512{f,vl,bw,dq}, and cpu_backend.cc calls the widest one the CPU has
// (detected from CPUID feature bits, not from a CPU model table). Each file
// renames Eigen's namespace (gemm_kernel_impl.h) so that the linker cannot
// merge, say, AVX-512 copies of Eigen's inline templates into the baseline
// kernel: that would execute AVX-512 instructions on any CPU.
#pragma once

#include <cstdint>

namespace brook::trainer::internal {

// C = alpha * op(A) op(B) + beta * C on row-major blocks with leading
// dimensions (elements between rows): op(A) is m x k (A stored k x m when
// trans_a), op(B) is k x n (B stored n x k when trans_b), C is m x n.
// beta == 0 ignores C's old contents. REQUIRES: m, n, k > 0, no overlap of C
// with A or B.
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float beta = 0.0f;
  float* c = nullptr;
  int64_t ldc = 0;
};

using GemmFn = void (*)(const GemmArgs&);

// Baseline x86-64 (SSE2) or the target's default ISA; always compiled.
void GemmBaseline(const GemmArgs& args);
// nullptr when the build did not compile that variant (non-x86 targets).
GemmFn GemmAvx2();
GemmFn GemmAvx512();

}  // namespace brook::trainer::internal
