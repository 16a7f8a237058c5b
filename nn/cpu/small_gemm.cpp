#include "nn/cpu/small_gemm.h"

#include <algorithm>
#include <cstring>

#include "nn/cpu/gemm_tile.h"
#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"
#include "nn/cpu/simd_native.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

// Calls tile(first_row, rows) over m rows cut into ceil(m / max_rows) tiles
// whose sizes differ by at most one (10 rows: 5 + 5, not 6 + 4).
template <typename F>
void balanced_tiles(int64_t m, int max_rows, F&& tile) {
  if (m <= 0) return;
  const int64_t count = (m + max_rows - 1) / max_rows;
  const int64_t base = m / count, extra = m % count;
  for (int64_t t = 0, i = 0; t < count; ++t) {
    const int rows = static_cast<int>(base + (t < extra ? 1 : 0));
    tile(i, rows);
    i += rows;
  }
}

// All rows of one column block of NV vectors.
template <int NV>
void nn_block(int64_t m, int64_t k, StridedMatrix a, RowMatrix b, float* c, int64_t ldc,
              const float* bias, bool accumulate) {
  balanced_tiles(m, kMaxTileRows, [&](int64_t i, int rows) {
    const StridedMatrix ai{a.data + i * a.row_stride, a.row_stride, a.col_stride};
    float* ci = c + i * ldc;
    const float* bi = bias ? bias + i : nullptr;
    nn_tile_rows<NV>(rows, k, ai, b, ci, ldc, bi, accumulate);
  });
}

// The last r < 16 columns: B's columns are copied into a zero-padded
// (k, 16) panel and C's rows go through a (m, 16) staging block.
void nn_tail(int64_t m, int64_t k, int64_t r, StridedMatrix a, RowMatrix b, float* c, int64_t ldc,
             const float* bias, bool accumulate) {
  float* panel = scratch(ScratchSlot::kGemmTail, static_cast<size_t>((k + m) * kLanes));
  float* staged = panel + k * kLanes;
  for (int64_t p = 0; p < k; ++p) {
    std::fill(std::copy(b.row(p), b.row(p) + r, panel + p * kLanes), panel + (p + 1) * kLanes,
              0.0f);
  }
  for (int64_t i = 0; i < m; ++i) {
    float* row = staged + i * kLanes;
    if (accumulate) std::copy(c + i * ldc, c + i * ldc + r, row);
  }
  nn_block<1>(m, k, a, RowMatrix{panel, kLanes}, staged, kLanes, bias, accumulate);
  for (int64_t i = 0; i < m; ++i)
    std::copy(staged + i * kLanes, staged + i * kLanes + r, c + i * ldc);
}

// Lanes of the partial sums of one dot product: one register in either
// build. (The avx2 build once kept 16, two registers a sum, for the avx512
// build's bits; its 3 x 2 tiles then loaded 10 vectors for 12 FMAs and ran
// the weight gradients at ~60% of the avx512 build's speed. Convolutions and
// GEMMs agree across the builds to rounding, not bits: test_cpu_isa.cpp.)
constexpr int kDotLanes = kNativeLanes;

// sums[t] = the sum of the kDotLanes partial sums of acc[t], for t < T.
template <int T>
[[gnu::always_inline]] inline void reduce_tile(const vn (&acc)[T], float* sums) {
  if constexpr (kWideRegisters) {
    v16 whole[kLanes] = {};
    for (int t = 0; t < T; ++t) whole[t] = acc[t];
    store16(sums, transpose_sum16(whole));
  } else {
    store8(sums, transpose_sum8<(T < 8 ? T : 8)>(acc));
    if constexpr (T > 8) store8(sums + 8, transpose_sum8<T - 8>(acc + 8));
  }
}

// --- C += A * B^T: MR x NR dot products in registers, reduced at the end ----
// a: (MR, len) per segment, rows lda; b: NR rows per segment; c: (MR, NR)
template <int MR, int NR>
void nt_tile(const float* a, int64_t lda, RowMatrix b, const Segments& seg, float* c, int64_t ldc) {
  static_assert(MR * NR <= kLanes, "one reduction vector per tile");
  vn acc[MR * NR] = {};
  float tail[MR * NR] = {};
  const int64_t body = seg.len / kDotLanes * kDotLanes;
  for (int64_t s = 0; s < seg.count; ++s) {
    const float* as = a + s * seg.a_stride;
    const float* bs[NR];
    for (int j = 0; j < NR; ++j) bs[j] = b.row(j) + s * seg.b_stride;
    for (int64_t p = 0; p < body; p += kDotLanes) {
      vn av[MR], bv[NR];
      for (int i = 0; i < MR; ++i) av[i] = loadn(as + i * lda + p);
      for (int j = 0; j < NR; ++j) bv[j] = loadn(bs[j] + p);
      for (int i = 0; i < MR; ++i) {
        for (int j = 0; j < NR; ++j) acc[i * NR + j] += av[i] * bv[j];
      }
    }
    for (int64_t p = body; p < seg.len; ++p) {
      for (int i = 0; i < MR; ++i) {
        for (int j = 0; j < NR; ++j) tail[i * NR + j] += as[i * lda + p] * bs[j][p];
      }
    }
  }
  float sums[kLanes];  // through memory: cheaper than 16 lane extractions
  reduce_tile<MR * NR>(acc, sums);
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) c[i * ldc + j] += sums[i * NR + j] + tail[i * NR + j];
  }
}

// Rows and columns of the dot-product tiles: 4 x 4 accumulators on AVX-512;
// on AVX, 3 x 3 (9 of the 16 registers, 3 + 3 for the operands: 6 loads for
// 9 FMAs).
constexpr int kDotRows = kWideRegisters ? 4 : 3;
constexpr int kDotCols = kWideRegisters ? 4 : 3;

template <int NR>
void nt_rows(int64_t m, const float* a, int64_t lda, RowMatrix b, const Segments& seg, float* c,
             int64_t ldc) {
  balanced_tiles(m, kDotRows, [&](int64_t i, int rows) {
    switch (rows) {
      case 4:
        nt_tile<4, NR>(a + i * lda, lda, b, seg, c + i * ldc, ldc);
        break;
      case 3:
        nt_tile<3, NR>(a + i * lda, lda, b, seg, c + i * ldc, ldc);
        break;
      case 2:
        nt_tile<2, NR>(a + i * lda, lda, b, seg, c + i * ldc, ldc);
        break;
      default:
        nt_tile<1, NR>(a + i * lda, lda, b, seg, c + i * ldc, ldc);
        break;
    }
  });
}

// Depth of the inner-dimension blocks of gemm_nn, and rows of its row blocks.
constexpr int64_t kDepthBlock = 256;
constexpr int64_t kRowBlock = 384;

}  // namespace

void gemm_nn(int64_t m, int64_t n, int64_t k, StridedMatrix a, RowMatrix b, float* c, int64_t ldc,
             const float* bias, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (m > kRowBlock && k > kDepthBlock) {
    // Blocks of rows too, so that the (kRowBlock, kDepthBlock) blocks of A
    // below stay in L2.
    for (int64_t i0 = 0; i0 < m; i0 += kRowBlock) {
      const StridedMatrix ai{a.data + i0 * a.row_stride, a.row_stride, a.col_stride};
      gemm_nn(std::min(kRowBlock, m - i0), n, k, ai, b, c + i0 * ldc, ldc,
              bias ? bias + i0 : nullptr, accumulate);
    }
    return;
  }
  if (k > kDepthBlock) {
    // Blocks of the inner dimension: each (m, kDepthBlock) block of A stays
    // in cache while every column block of C uses it.
    for (int64_t p0 = 0; p0 < k; p0 += kDepthBlock) {
      const StridedMatrix ap{a.data + p0 * a.col_stride, a.row_stride, a.col_stride};
      gemm_nn(m, n, std::min(kDepthBlock, k - p0), ap, b.rows_from(p0), c, ldc,
              p0 == 0 ? bias : nullptr, p0 == 0 ? accumulate : true);
    }
    return;
  }
  int64_t j = 0;
  for (; j + kMaxTileVectors * kLanes <= n; j += kMaxTileVectors * kLanes) {
    nn_block<kMaxTileVectors>(m, k, a, b.shifted(j), c + j, ldc, bias, accumulate);
  }
  switch ((n - j) / kLanes) {
    case 3:
      nn_block<3>(m, k, a, b.shifted(j), c + j, ldc, bias, accumulate);
      break;
    case 2:
      nn_block<2>(m, k, a, b.shifted(j), c + j, ldc, bias, accumulate);
      break;
    case 1:
      nn_block<1>(m, k, a, b.shifted(j), c + j, ldc, bias, accumulate);
      break;
    default:
      break;
  }
  j += (n - j) / kLanes * kLanes;
  if (j < n) nn_tail(m, k, n - j, a, b.shifted(j), c + j, ldc, bias, accumulate);
}

void gemm_nt_acc(int64_t m, int64_t n, const float* a, int64_t lda, RowMatrix b,
                 const Segments& seg, float* c, int64_t ldc) {
  if (m <= 0) return;
  balanced_tiles(n, kDotCols, [&](int64_t j, int cols) {
    const RowMatrix bj = b.rows_from(j);
    switch (cols) {
      case 4:
        nt_rows<4>(m, a, lda, bj, seg, c + j, ldc);
        break;
      case 3:
        nt_rows<3>(m, a, lda, bj, seg, c + j, ldc);
        break;
      case 2:
        nt_rows<2>(m, a, lda, bj, seg, c + j, ldc);
        break;
      default:
        nt_rows<1>(m, a, lda, bj, seg, c + j, ldc);
        break;
    }
  });
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
