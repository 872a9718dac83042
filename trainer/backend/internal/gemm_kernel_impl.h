// The body of every gemm_kernel_*.cc. The includer defines
// BROOK_EIGEN_NAMESPACE (a distinct name per ISA, see gemm_kernel.h) and
// BROOK_GEMM_NAME before including this file, last, exactly once per
// translation unit: from here on the token Eigen names the renamed namespace
// (macros inside Eigen's headers that spell Eigen:: then stay consistent).
#pragma once

#ifndef BROOK_EIGEN_NAMESPACE
#error "define BROOK_EIGEN_NAMESPACE before including gemm_kernel_impl.h"
#endif

// Eigen's own threading stays off: the backend splits work across its pool.
#define EIGEN_DONT_PARALLELIZE
#define Eigen BROOK_EIGEN_NAMESPACE
#include <Eigen/Core>

#include "trainer/backend/internal/gemm_kernel.h"

namespace brook::trainer::internal {
namespace {

namespace E = ::Eigen;  // i.e. ::BROOK_EIGEN_NAMESPACE
using RowMatrix = E::Matrix<float, E::Dynamic, E::Dynamic, E::RowMajor>;
using ConstMap = E::Map<const RowMatrix, E::Unaligned, E::OuterStride<>>;
using MutableMap = E::Map<RowMatrix, E::Unaligned, E::OuterStride<>>;

}  // namespace

void BROOK_GEMM_NAME(const GemmArgs& g) {
  MutableMap c(g.c, g.m, g.n, E::OuterStride<>(g.ldc));
  if (g.beta == 0.0f) {
    c.setZero();
  } else if (g.beta != 1.0f) {
    c *= g.beta;
  }
  const ConstMap a(g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, E::OuterStride<>(g.lda));
  const ConstMap b(g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, E::OuterStride<>(g.ldb));
  if (!g.trans_a && !g.trans_b) {
    c.noalias() += g.alpha * a * b;
  } else if (g.trans_a && !g.trans_b) {
    c.noalias() += g.alpha * a.transpose() * b;
  } else if (!g.trans_a && g.trans_b) {
    c.noalias() += g.alpha * a * b.transpose();
  } else {
    c.noalias() += g.alpha * a.transpose() * b.transpose();
  }
}

}  // namespace brook::trainer::internal
