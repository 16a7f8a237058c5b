// Register-blocked, single-threaded GEMM kernels, first written for the
// shapes of convolutions (a small weight matrix against a wide matrix of
// image columns), also used for the dense layers. They read their operands
// in place, without packing (Eigen's packing costs more than the product at
// small sizes, and is repeated by every thread that splits a product);
// gemm_nn blocks large products by rows and inner dimension to stay in
// cache. Callers parallelise, over samples or blocks of C.
#pragma once

#include "nn/cpu/isa_namespace.h"

#include <cstdint>

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {

// A matrix read element by element: (i, j) is at data[i * row_stride + j * col_stride].
struct StridedMatrix {
  const float* data = nullptr;
  int64_t row_stride = 0, col_stride = 1;
};

// A matrix of contiguous rows: row p starts at base + (rows ? rows[p] : p * ld).
// A row table lets a convolution read shifted image rows of its input in
// place instead of copying them into an im2col matrix.
struct RowMatrix {
  const float* base = nullptr;
  int64_t ld = 0;
  const int64_t* rows = nullptr;

  const float* row(int64_t p) const { return base + (rows ? rows[p] : p * ld); }
  // The same rows from column `cols` on; the rows from row `first` on.
  RowMatrix shifted(int64_t cols) const { return {base + cols, ld, rows}; }
  RowMatrix rows_from(int64_t first) const {
    return rows ? RowMatrix{base, ld, rows + first} : RowMatrix{base + first * ld, ld, nullptr};
  }
};

// C(m, n) = A(m, k) * B(k, n), plus C itself when accumulate, plus bias[i]
// on row i when bias is not null. C is row-major with leading dimension
// ldc; A's elements are broadcast, so any strides work (A may be a
// transposed weight matrix).
void gemm_nn(int64_t m, int64_t n, int64_t k, StridedMatrix a, RowMatrix b, float* c, int64_t ldc,
             const float* bias, bool accumulate);

// The inner dimension of gemm_nt_acc, cut into `count` segments of `len`;
// segment s of A starts at a + s * a_stride, of B at b + s * b_stride.
struct Segments {
  int64_t count = 1, len = 0;
  int64_t a_stride = 0, b_stride = 0;
};

// C(m, n) += sum over segments s of A_s(m, len) * B_s(n, len)^T: dot
// products of rows that are contiguous in memory (A rows lda apart), e.g.
// dW(K, CRS) += dY(K, PQ) * col(CRS, PQ)^T summed over the samples of a
// group. Row j of B_s starts at b.row(j) + s * seg.b_stride.
void gemm_nt_acc(int64_t m, int64_t n, const float* a, int64_t lda, RowMatrix b,
                 const Segments& seg, float* c, int64_t ldc);

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
