// Packed, cache-blocked GEMM (see packed_gemm.h). A is packed whole first
// (kMr-high panels over the full depth), then, outer to inner:
//   jc: kNc columns of C       pack B(pc.., jc..) (kc, nc) into kNr-wide panels
//   pc: kKc of the inner dim      (kept in L2, reused by every row block)
//   ic: kMc rows of C          the (mc, kc) block of packed A
//   jr, ir: one kMr x kNr register tile over a pair of panels.
#include "nn/cpu/packed_gemm.h"

#include <algorithm>
#include <cstring>

#include "nn/cpu/round_up.h"
#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"
#include "nn/cpu/simd_native.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

constexpr int kMr = kPackedTileRows;   // rows of the register tile
constexpr int kNr = kPackedTileCols;   // columns of the register tile
constexpr int kNv = kNr / kLanes;      // vectors per row of the register tile
constexpr int64_t kKc = kPackedDepth;  // depth of a packed block
constexpr int64_t kMc = 96;            // rows of a packed block of A (at most)
// Columns of a packed block of B: 512 (a 512 KiB block at full depth) rather
// than 1024 leaves more of the 2 MiB L2 to C and A; 128 x 4096 x 4096 with
// B^T went from 113 to 119 GFLOP/s, other shapes within noise.
constexpr int64_t kNc = 512;

// Block extent for `total` cut into pieces of at most `cap`, as equal as
// possible and rounded up to whole panels of `unit`.
int64_t even_block(int64_t total, int64_t cap, int64_t unit) {
  const int64_t count = (total + cap - 1) / cap;
  return round_up((total + count - 1) / count, unit);
}

// c(R, kNr) rows ldc (+)= ap(kc, kMr) packed * bp(kc, kNr) packed, for the
// first R <= kMr rows of the panel of A (the register tile, or the last rows
// of a block: no work on the padding). While the tile runs, next_rows rows of
// the next tile of C (next_c, rows ldc apart) are prefetched into L2, one row
// per step: without it the loads of C at the start of a tile wait on memory
// when C is not in cache (shallow products: 4096 x 4096 x 128 went from 110
// to 140 GFLOP/s).
template <int R>
void micro_tile(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc,
                bool accumulate, const float* next_c, int64_t next_rows) {
  constexpr int U = kNr / kNativeLanes;  // registers per row of the tile
  vn acc[R][U];
  if (accumulate) {
    for (int i = 0; i < R; ++i) {
      for (int u = 0; u < U; ++u) acc[i][u] = loadn(c + i * ldc + u * kNativeLanes);
    }
  } else {
    for (int i = 0; i < R; ++i) {
      for (int u = 0; u < U; ++u) acc[i][u] = vn{};
    }
  }
  const int64_t prefetch_rows = next_c != nullptr ? next_rows : 0;
  for (int64_t p = 0; p < kc; ++p) {
    if (p < prefetch_rows) {
      const float* row = next_c + p * ldc;  // its kNr floats: up to kNv + 1 lines
      for (int v = 0; v < kNv; ++v) __builtin_prefetch(row + v * kLanes, 0, 2);
      __builtin_prefetch(row + kNr - 1, 0, 2);
    }
    vn bv[U];
    for (int u = 0; u < U; ++u) bv[u] = loadn(bp + p * kNr + u * kNativeLanes);
    for (int i = 0; i < R; ++i) {
      const float x = ap[p * kMr + i];
      for (int u = 0; u < U; ++u) acc[i][u] += x * bv[u];
    }
  }
  for (int i = 0; i < R; ++i) {
    for (int u = 0; u < U; ++u) storen(c + i * ldc + u * kNativeLanes, acc[i][u]);
  }
}

// micro_tile<rows>, rows in [1, kMr].
void rows_tile(int64_t rows, int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc,
               bool accumulate, const float* next_c, int64_t next_rows) {
  static_assert(kMr == 6, "one case per row count");
  switch (rows) {
    case 1:
      return micro_tile<1>(kc, ap, bp, c, ldc, accumulate, next_c, next_rows);
    case 2:
      return micro_tile<2>(kc, ap, bp, c, ldc, accumulate, next_c, next_rows);
    case 3:
      return micro_tile<3>(kc, ap, bp, c, ldc, accumulate, next_c, next_rows);
    case 4:
      return micro_tile<4>(kc, ap, bp, c, ldc, accumulate, next_c, next_rows);
    case 5:
      return micro_tile<5>(kc, ap, bp, c, ldc, accumulate, next_c, next_rows);
    default:
      return micro_tile<6>(kc, ap, bp, c, ldc, accumulate, next_c, next_rows);
  }
}

// The same for a tile of fewer than kNr columns of C, through a staging tile.
void edge_tile(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, bool accumulate,
               int64_t rows, int64_t cols) {
  alignas(64) float staged[kMr * kNr];
  if (accumulate) {
    for (int64_t i = 0; i < rows; ++i) std::copy(c + i * ldc, c + i * ldc + cols, staged + i * kNr);
  }
  rows_tile(rows, kc, ap, bp, staged, kNr, accumulate, nullptr, 0);
  for (int64_t i = 0; i < rows; ++i)
    std::copy(staged + i * kNr, staged + i * kNr + cols, c + i * ldc);
}

// One panel: dst(k, kMr) <- rows [0, r) of a(r, k), r <= kMr, rows past r zero.
void pack_a_panel(StridedMatrix a, int64_t r, int64_t k, float* dst) {
  int64_t p0 = 0;
  if (a.row_stride == 1 && r == kMr) {  // columns of A contiguous
    for (int64_t p = 0; p < k; ++p) {
      for (int rr = 0; rr < kMr; ++rr) dst[p * kMr + rr] = a.data[p * a.col_stride + rr];
    }
    return;
  }
  if (a.col_stride == 1 && r == kMr) {  // rows contiguous: a register of columns at a time
    constexpr int V = kNativeLanes;
    static_assert(kMr <= V, "a panel's rows fit one square block");
    for (; p0 + V <= k; p0 += V) {
      vn t[V] = {};
      for (int rr = 0; rr < kMr; ++rr) t[rr] = loadn(a.data + rr * a.row_stride + p0);
      transpose_square(t);
      for (int q = 0; q < V; ++q) std::memcpy(dst + (p0 + q) * kMr, &t[q], kMr * sizeof(float));
    }
  }
  for (int64_t p = p0; p < k; ++p) {
    for (int64_t rr = 0; rr < kMr; ++rr) {
      dst[p * kMr + rr] = rr < r ? a.data[rr * a.row_stride + p * a.col_stride] : 0.0f;
    }
  }
}

// One (kc, kNr) panel from w <= kNr columns of B whose elements are
// row_stride apart down a column (B transposed: row_stride 1), columns
// col_stride apart; square register blocks (16 x 16, or 8 x 8 in the avx2
// build) go through registers.
void pack_b_transposed(const float* s, int64_t row_stride, int64_t col_stride, int64_t kc,
                       int64_t w, float* d) {
  constexpr int V = kNativeLanes;
  int64_t p0 = 0;
  if (row_stride == 1 && w == kNr) {
    for (; p0 + V <= kc; p0 += V) {
      for (int j0 = 0; j0 < kNr; j0 += V) {
        vn r[V];
        for (int t = 0; t < V; ++t) r[t] = loadn(s + (j0 + t) * col_stride + p0);
        transpose_square(r);
        for (int t = 0; t < V; ++t) storen(d + (p0 + t) * kNr + j0, r[t]);
      }
    }
  }
  for (int64_t jj = 0; jj < kNr; ++jj) {
    const float* sj = s + jj * col_stride;
    for (int64_t p = p0; p < kc; ++p) d[p * kNr + jj] = jj < w ? sj[p * row_stride] : 0.0f;
  }
}

// dst <- b(kc, cols) as panels of kNr columns, each (kc, kNr), tail columns
// zero. Rows of B are read whole, one after the other (streams the hardware
// prefetcher follows), and dealt out to the panels.
void pack_b(StridedMatrix b, int64_t kc, int64_t cols, float* dst) {
  if (b.col_stride != 1) {
    for (int64_t j = 0; j < cols; j += kNr) {
      pack_b_transposed(b.data + j * b.col_stride, b.row_stride, b.col_stride, kc,
                        std::min<int64_t>(kNr, cols - j), dst + j * kc);
    }
    return;
  }
  const int64_t full = cols / kNr * kNr;
  for (int64_t p = 0; p < kc; ++p) {
    const float* sp = b.data + p * b.row_stride;
    for (int64_t j = 0; j < full; j += kNr) {
      float* dp = dst + j * kc + p * kNr;
      for (int v = 0; v < kNv; ++v) store16(dp + v * kLanes, load16(sp + j + v * kLanes));
    }
    if (full < cols) {
      float* dp = dst + full * kc + p * kNr;
      std::fill(std::copy(sp + full, sp + cols, dp), dp + kNr, 0.0f);
    }
  }
}

// All register tiles of one (mc, nc) block of C over packed panels; the
// panels of A are a_stride floats apart.
void block_tiles(int64_t mc, int64_t nc, int64_t kc, const float* apack, int64_t a_stride,
                 const float* bpack, float* c, int64_t ldc, bool accumulate) {
  for (int64_t jr = 0; jr < nc; jr += kNr) {
    const float* bp = bpack + jr * kc;
    for (int64_t ir = 0; ir < mc; ir += kMr) {
      float* ct = c + ir * ldc + jr;
      const float* ap = apack + ir / kMr * a_stride;
      const int64_t rows = std::min<int64_t>(kMr, mc - ir);
      if (jr + kNr > nc) {
        edge_tile(kc, ap, bp, ct, ldc, accumulate, rows, nc - jr);
      } else if (ir + kMr < mc) {  // the next tile: the rows below
        rows_tile(rows, kc, ap, bp, ct, ldc, accumulate, ct + kMr * ldc,
                  std::min<int64_t>(kMr, mc - ir - kMr));
      } else if (jr + 2 * kNr <= nc) {  // the top of the next column of tiles
        rows_tile(rows, kc, ap, bp, ct, ldc, accumulate, c + jr + kNr, std::min<int64_t>(kMr, mc));
      } else {
        rows_tile(rows, kc, ap, bp, ct, ldc, accumulate, nullptr, 0);
      }
    }
  }
}

}  // namespace

int64_t packed_a_size(int64_t m, int64_t k) {
  return round_up(m, kMr) * k;
}

// dst <- a(m, k) as panels of kMr rows, each (k, kMr)
void pack_a(int64_t m, int64_t k, StridedMatrix a, float* dst) {
  for (int64_t i = 0; i < m; i += kMr) {
    const StridedMatrix ai{a.data + i * a.row_stride, a.row_stride, a.col_stride};
    pack_a_panel(ai, std::min<int64_t>(kMr, m - i), k, dst + i * k);
  }
}

// c(m, n) rows ldc = A(m, k) * b(k, n) (+ c when accumulate), A packed by pack_a
void packed_gemm_prepacked(int64_t m, int64_t n, int64_t k, const float* a_packed, StridedMatrix b,
                           float* c, int64_t ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    }
    return;
  }
  const int64_t mb = even_block(m, kMc, kMr), nb = even_block(n, kNc, kNr);
  const int64_t kb = std::min(k, kKc);
  float* bpack = scratch(ScratchSlot::kPackB, static_cast<size_t>(kb * nb));
  for (int64_t jc = 0; jc < n; jc += nb) {
    const int64_t nc = std::min(nb, n - jc);
    for (int64_t pc = 0; pc < k; pc += kb) {
      const int64_t kc = std::min(kb, k - pc);
      pack_b(
          StridedMatrix{b.data + pc * b.row_stride + jc * b.col_stride, b.row_stride, b.col_stride},
          kc, nc, bpack);
      for (int64_t ic = 0; ic < m; ic += mb) {
        block_tiles(std::min(mb, m - ic), nc, kc, a_packed + ic * k + pc * kMr, kMr * k, bpack,
                    c + ic * ldc + jc, ldc, accumulate || pc > 0);
      }
    }
  }
}

// c(m, n) rows ldc = a(m, k) * b(k, n) (+ c when accumulate)
void packed_gemm(int64_t m, int64_t n, int64_t k, StridedMatrix a, StridedMatrix b, float* c,
                 int64_t ldc, bool accumulate) {
  if (m <= 0 || n <= 0 || k <= 0)
    return packed_gemm_prepacked(m, n, k, nullptr, b, c, ldc, accumulate);
  float* a_packed = scratch(ScratchSlot::kPackA, static_cast<size_t>(packed_a_size(m, k)));
  pack_a(m, k, a, a_packed);
  packed_gemm_prepacked(m, n, k, a_packed, b, c, ldc, accumulate);
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
