// The general GEMM of the CPU backend through Eigen, for what the register
// kernels do not cover (alpha other than 1, beta other than 0 or 1, small
// A^T B^T). Compiled once, for the build's baseline instruction set: Eigen's
// templates must not be instantiated in the per-instruction-set kernel
// builds, where two copies of one symbol would differ in their code.
#pragma once

#include <cstdint>

namespace lockstep::nn::cpu {

// Rows [r0, r1) x columns [c0, c1) of C(m, n) = alpha op(A) op(B) + beta C;
// A is (m, k), or (k, m) when ta; B is (k, n), or (n, k) when tb; all
// row-major. beta = 0 overwrites C (which may hold NaN).
void eigen_gemm_block(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float* a, const float* b, float beta, float* c, int64_t r0, int64_t r1,
                      int64_t c0, int64_t c1);

// C(m, n) = beta * C (beta = 0 overwrites).
void eigen_scale_matrix(int64_t m, int64_t n, float beta, float* c);

}  // namespace lockstep::nn::cpu
