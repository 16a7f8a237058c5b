// Dense-layer ops on the CPU. GEMM with alpha = 1 and beta 0 or 1:
//   small products: the register-tile kernels of small_gemm.h, which need
//                   no packing, so splitting C across threads duplicates no
//                   work: gemm_nn for A B and A^T B, gemm_nt_acc (dot
//                   products of rows) for A B^T;
//   large A B^T:    C^T = B A^T through gemm_nn, with A and C^T transposed
//                   in memory (cheap next to the product);
//   other large:    packed_gemm (packed_gemm.h), any transposes.
// Other alpha/beta, and small A^T B^T, go through Eigen (dense_eigen.h). Products are split
// into blocks of rows or columns of C across the pool when large enough;
// each C element is summed in the same order whatever the split. Plus the
// bias helpers.
#include <algorithm>

#include "nn/cpu/dense_eigen.h"
#include "nn/cpu/kernels.h"
#include "nn/cpu/packed_gemm.h"
#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"
#include "nn/cpu/small_gemm.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

// Products below this many multiply-adds run on the calling thread (waking
// a worker costs about as much as ~100K multiply-adds).
constexpr int64_t kParallelGemmWork = int64_t{1} << 18;
// The smallest block of rows (or columns) of C given to one thread.
constexpr int64_t kMinBlock = 16;
// Products up to this many multiply-adds use the unpacked kernels.
constexpr int64_t kSmallGemmWork = int64_t{1} << 22;
// The smallest block of rows or columns of C given to one thread by the
// packed GEMM (each thread packs a whole operand: B for rows, A for columns).
constexpr int64_t kMinPackedBlock = 128;

// The same block through small_gemm.h; alpha = 1, beta 0 or 1, not both
// operands transposed.
void small_gemm_block(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                      const float* b, float beta, float* c, int64_t r0, int64_t r1, int64_t c0,
                      int64_t c1) {
  const int64_t rows = r1 - r0, cols = c1 - c0;
  float* cb = c + r0 * n + c0;
  if (tb) {  // C += A * B^T as dot products of rows; A not transposed
    if (beta == 0.0f) {
      for (int64_t i = 0; i < rows; ++i) std::fill_n(cb + i * n, cols, 0.0f);
    }
    gemm_nt_acc(rows, cols, a + r0 * k, k, RowMatrix{b + c0 * k, k}, Segments{1, k, 0, 0}, cb, n);
    return;
  }
  // C = A * B (+ C): A's elements are broadcast, so A^T is just other strides
  const StridedMatrix av = ta ? StridedMatrix{a + r0, 1, m} : StridedMatrix{a + r0 * k, k, 1};
  gemm_nn(rows, cols, k, av, RowMatrix{b + c0, n}, cb, n, nullptr, beta != 0.0f);
}

// dst(cols, rows) (+)= src(rows, cols)^T, rows lds and ldd apart, in 16 x 16
// blocks so that both sides stay in cache.
void transpose(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd,
               bool accumulate) {
  for (int64_t i0 = 0; i0 < rows; i0 += kLanes) {
    for (int64_t j0 = 0; j0 < cols; j0 += kLanes) {
      const int64_t i1 = std::min(rows, i0 + kLanes), j1 = std::min(cols, j0 + kLanes);
      for (int64_t j = j0; j < j1; ++j) {
        for (int64_t i = i0; i < i1; ++i) {
          const float v = src[i * lds + j];
          dst[j * ldd + i] = accumulate ? dst[j * ldd + i] + v : v;
        }
      }
    }
  }
}

// C(m, n) (+)= A(m, k) B(n, k)^T for large products, as C^T = B A^T with
// gemm_nn, split over columns of C (measured faster than packing B^T).
void gemm_nt_by_transposes(ThreadPool& pool, int64_t m, int64_t n, int64_t k, const float* a,
                           const float* b, float beta, float* c) {
  float* at = scratch(ScratchSlot::kPartials, static_cast<size_t>(k * m));  // A^T (k, m)
  transpose(a, m, k, k, at, m, false);
  pool.parallel_for(n, kMinBlock, [&](int64_t c0, int64_t c1, int) {
    float* ct = scratch(ScratchSlot::kGather, static_cast<size_t>((c1 - c0) * m));  // C^T rows
    gemm_nn(c1 - c0, m, k, StridedMatrix{b + c0 * k, k, 1}, RowMatrix{at, m}, ct, m, nullptr,
            false);
    transpose(ct, c1 - c0, m, m, c + c0, n, beta != 0.0f);
  });
}

// C(m, n) (+)= op(A) op(B) for large products through packed_gemm, split
// into blocks of whole register tiles: of rows when C is tall, else of
// columns. Every thread packs the parts of A and B its block needs.
void gemm_packed(ThreadPool& pool, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 const float* a, const float* b, float beta, float* c) {
  const StridedMatrix av = ta ? StridedMatrix{a, 1, m} : StridedMatrix{a, k, 1};
  const StridedMatrix bv = tb ? StridedMatrix{b, 1, k} : StridedMatrix{b, n, 1};
  const bool by_rows = m >= n;
  const int64_t unit = by_rows ? kPackedTileRows : kPackedTileCols;
  const int64_t extent = ((by_rows ? m : n) + unit - 1) / unit;
  const int64_t grain = std::max<int64_t>(1, kMinPackedBlock / unit);
  pool.parallel_for(extent, grain, [&](int64_t e0, int64_t e1, int) {
    const int64_t r0 = by_rows ? e0 * unit : 0, r1 = by_rows ? std::min(m, e1 * unit) : m;
    const int64_t c0 = by_rows ? 0 : e0 * unit, c1 = by_rows ? n : std::min(n, e1 * unit);
    const StridedMatrix ab{av.data + r0 * av.row_stride, av.row_stride, av.col_stride};
    const StridedMatrix bb{bv.data + c0 * bv.col_stride, bv.row_stride, bv.col_stride};
    packed_gemm(r1 - r0, c1 - c0, k, ab, bb, c + r0 * n + c0, n, beta != 0.0f);
  });
}

}  // namespace

// C(m, n) = alpha * op(A)(m, k) * op(B)(k, n) + beta * C, all row-major
void gemm(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, const float* b, float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    eigen_scale_matrix(m, n, beta, c);
    return;
  }
  const bool simple = alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
  const bool small = m * n * k <= kSmallGemmWork;
  if (simple && !small && trans_b && !trans_a) {
    return gemm_nt_by_transposes(pool, m, n, k, a, b, beta, c);
  }
  if (simple && !small) return gemm_packed(pool, trans_a, trans_b, m, n, k, a, b, beta, c);
  const bool ours = simple && small && !(trans_a && trans_b);
  // Split rows, or columns in whole vectors (a block of C whose width is not
  // a multiple of 16 costs the kernels a padded tail).
  const bool by_rows = m >= n;
  const int64_t unit = by_rows ? 1 : kLanes;
  const int64_t extent = by_rows ? m : (n + kLanes - 1) / kLanes;
  const int64_t grain = m * n * k < kParallelGemmWork ? extent : (kMinBlock + unit - 1) / unit;
  pool.parallel_for(extent, grain, [&](int64_t e0, int64_t e1, int) {
    const int64_t r0 = by_rows ? e0 : 0, r1 = by_rows ? e1 : m;
    const int64_t c0 = by_rows ? 0 : e0 * unit, c1 = by_rows ? n : std::min(n, e1 * unit);
    if (ours) {
      small_gemm_block(trans_a, trans_b, m, n, k, a, b, beta, c, r0, r1, c0, c1);
    } else {
      eigen_gemm_block(trans_a, trans_b, m, n, k, alpha, a, b, beta, c, r0, r1, c0, c1);
    }
  });
}

// y(rows, cols) += bias(cols) on every row
void add_row_bias(ThreadPool& pool, int64_t rows, int64_t cols, const float* bias, float* y) {
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, cols));
  pool.parallel_for(rows, grain, [=](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) add_short(bias, y + r * cols, cols);
  });
}

// db(cols) = sum over rows of dy(rows, cols); each column is summed by one
// thread in row order, so the result does not depend on the thread count.
void sum_rows(ThreadPool& pool, int64_t rows, int64_t cols, const float* dy, float* db) {
  const int64_t grain = std::max<int64_t>(kLanes, (int64_t{1} << 15) / std::max<int64_t>(1, rows));
  pool.parallel_for(cols, grain, [=](int64_t j0, int64_t j1, int) {
    std::fill(db + j0, db + j1, 0.0f);
    for (int64_t r = 0; r < rows; ++r) add_short(dy + r * cols + j0, db + j0, j1 - j0);
  });
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
