// Eigen's GEMM for the general cases of CPU gemm (see dense_eigen.h).
#include "nn/cpu/dense_eigen.h"

#include "nn/cpu/eigen.h"

namespace lockstep::nn::cpu {
namespace {

template <typename Lhs, typename Rhs>
void product_into(const Lhs& lhs, const Rhs& rhs, float alpha, float beta, MatrixView c) {
  if (beta == 0.0f) {
    c.noalias() = alpha * lhs * rhs;  // overwrite: C may hold garbage (or NaN)
  } else {
    if (beta != 1.0f) c *= beta;
    c.noalias() += alpha * lhs * rhs;
  }
}

}  // namespace

void eigen_gemm_block(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float* a, const float* b, float beta, float* c, int64_t r0, int64_t r1,
                      int64_t c0, int64_t c1) {
  const int64_t rows = r1 - r0, cols = c1 - c0;
  MatrixView cv(c + r0 * n + c0, rows, cols, OuterStride(n));
  // op(A) rows [r0, r1): A is (m, k), or (k, m) when transposed.
  const ConstMatrixView av = ta ? ConstMatrixView(a + r0, k, rows, OuterStride(m))
                                : ConstMatrixView(a + r0 * k, rows, k, OuterStride(k));
  // op(B) columns [c0, c1): B is (k, n), or (n, k) when transposed.
  const ConstMatrixView bv = tb ? ConstMatrixView(b + c0 * k, cols, k, OuterStride(k))
                                : ConstMatrixView(b + c0, k, cols, OuterStride(n));
  if (!ta && !tb) product_into(av, bv, alpha, beta, cv);
  if (ta && !tb) product_into(av.transpose(), bv, alpha, beta, cv);
  if (!ta && tb) product_into(av, bv.transpose(), alpha, beta, cv);
  if (ta && tb) product_into(av.transpose(), bv.transpose(), alpha, beta, cv);
}

void eigen_scale_matrix(int64_t m, int64_t n, float beta, float* c) {
  MatrixView cv(c, m, n, OuterStride(n));
  if (beta == 0.0f)
    cv.setZero();
  else
    cv *= beta;
}

}  // namespace lockstep::nn::cpu
