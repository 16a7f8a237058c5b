// The register tile of the CPU GEMMs: an MR x (16 NV) block of C held in
// vector registers while the inner dimension streams through, A broadcast
// element by element, B read as whole vectors.
#pragma once

#include <cstdint>

#include "nn/cpu/simd.h"
#include "nn/cpu/small_gemm.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {

inline constexpr int kMaxTileRows = 6;
// Vectors per row of the widest tile (6 x 4 accumulators fill 24 of the 32
// AVX-512 registers; 6 x 1 fill 12 of the 16 AVX registers).
inline constexpr int kMaxTileVectors = kWideRegisters ? 4 : 1;

// a: (MR, k) strided, b: (k, 16 * NV), c: (MR, 16 * NV) rows ldc.
template <int MR, int NV>
inline void nn_tile(int64_t k, StridedMatrix a, RowMatrix b, float* c, int64_t ldc,
                    const float* bias, bool accumulate) {
  constexpr int U = NV * kLanes / kNativeLanes;  // registers per row
  vn acc[MR][U];
  // Loads or zeros, then the bias, in separate loops, all unrolled early:
  // otherwise GCC 12 kept the accumulators in memory at the tile's start
  // and end (48 extra moves a call of the 8 x 2 tile of the Winograd
  // weight gradient: 64 -> 64 channels on 8 x 8, 2.45-2.53 -> 2.42-2.48 ms).
  if (accumulate) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) acc[i][u] = loadn(c + i * ldc + u * kNativeLanes);
    }
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) acc[i][u] = vn{};
    }
  }
  if (bias) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) acc[i][u] += bias[i];
    }
  }
  for (int64_t p = 0; p < k; ++p) {
    vn bv[U];
    const float* bp = b.row(p);
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) bv[u] = loadn(bp + u * kNativeLanes);
    const float* ap = a.data + p * a.col_stride;
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const float x = ap[i * a.row_stride];
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) acc[i][u] += x * bv[u];
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) storen(c + i * ldc + u * kNativeLanes, acc[i][u]);
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

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
