// The CPU Backend: always built, the reference every other backend is tested
// against, and what CI trains with.
//
// GEMMs are Eigen matrix products, split by rows of C across a thread pool
// the backend owns, with the SIMD kernel (baseline, AVX2, AVX-512) chosen at
// run time from the CPU's feature bits (trainer/backend/internal/gemm_kernel.h).
// The embedding, interaction and elementwise ops are plain loops split by
// example over the same pool. Results are deterministic for a given
// num_threads and ISA (every output element is summed by one thread in a
// fixed order; the row split depends only on the shape and num_threads).
//
// Thread safety: as every Backend, requires external synchronization.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "trainer/backend/backend.h"

namespace brook::trainer {

// SIMD kernels of the GEMMs.
enum class CpuIsa { kAuto, kBaseline, kAvx2, kAvx512 };

struct CpuBackendOptions {
  // Threads for GEMMs and the parallel loops, the calling thread included.
  // 0 = UsableCpus() (the cores allowed, within a cgroup CPU limit); 1 =
  // everything on the calling thread (no pool). A trainer also runs input
  // and PS-client threads, so it may want fewer than all cores.
  int num_threads = 0;
  // kAuto: the widest this CPU and build support. Tests force the others.
  CpuIsa isa = CpuIsa::kAuto;
};

// InvalidArgument for num_threads < 0 or > 1024; FailedPrecondition for an
// isa this CPU (or build) lacks.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const CpuBackendOptions& options);

// Whether `isa` can run here (kAuto and kBaseline always can), and which one
// kAuto picks.
bool CpuIsaSupported(CpuIsa isa);
CpuIsa BestCpuIsa();
std::string_view CpuIsaName(CpuIsa isa);  // "auto" | "baseline" | "avx2" | "avx512"

}  // namespace brook::trainer
