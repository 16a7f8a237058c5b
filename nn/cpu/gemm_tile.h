// The register tile of the CPU GEMMs: an MR x (16 NV) block of C held in
// vector registers while the inner dimension streams through, A broadcast
// element by element, B read as whole vectors.
#pragma once

#include <cstdint>

#include "nn/cpu/simd.h"
#include "nn/cpu/small_gemm.h"

namespace lockstep::nn::cpu {

inline constexpr int kMaxTileRows = 6;

// a: (MR, k) strided, b: (k, 16 * NV), c: (MR, 16 * NV) rows ldc.
template <int MR, int NV>
inline void nn_tile(int64_t k, StridedMatrix a, RowMatrix b, float* c, int64_t ldc,
                    const float* bias, bool accumulate) {
  v16 acc[MR][NV];
  for (int i = 0; i < MR; ++i) {
    for (int v = 0; v < NV; ++v) {
      acc[i][v] = accumulate ? load16(c + i * ldc + v * kLanes) : v16{};
      if (bias) acc[i][v] += bias[i];
    }
  }
  for (int64_t p = 0; p < k; ++p) {
    v16 bv[NV];
    const float* bp = b.row(p);
    for (int v = 0; v < NV; ++v) bv[v] = load16(bp + v * kLanes);
    const float* ap = a.data + p * a.col_stride;
    for (int i = 0; i < MR; ++i) {
      const float x = ap[i * a.row_stride];
      for (int v = 0; v < NV; ++v) acc[i][v] += x * bv[v];
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int v = 0; v < NV; ++v) store16(c + i * ldc + v * kLanes, acc[i][v]);
  }
}

// nn_tile with a run-time number of rows, 1..kMaxTileRows.
template <int NV>
inline void nn_tile_rows(int rows, int64_t k, StridedMatrix a, RowMatrix b, float* c, int64_t ldc,
                         const float* bias, bool accumulate) {
  switch (rows) {
    case 6:
      return nn_tile<6, NV>(k, a, b, c, ldc, bias, accumulate);
    case 5:
      return nn_tile<5, NV>(k, a, b, c, ldc, bias, accumulate);
    case 4:
      return nn_tile<4, NV>(k, a, b, c, ldc, bias, accumulate);
    case 3:
      return nn_tile<3, NV>(k, a, b, c, ldc, bias, accumulate);
    case 2:
      return nn_tile<2, NV>(k, a, b, c, ldc, bias, accumulate);
    default:
      return nn_tile<1, NV>(k, a, b, c, ldc, bias, accumulate);
  }
}

}  // namespace lockstep::nn::cpu
