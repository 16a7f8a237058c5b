// The bf16 register tile on vdpbf16ps (see gemm_bf16.h): compiled with
// -mavx512bf16 in the avx512 kernel build only, called only on CPUs that
// have AVX512_BF16. Each instruction adds, per fp32 lane j of C, the
// products of the pair of bf16 in lane j of B with the broadcast pair of A.
#include "nn/cpu/gemm_bf16.h"

#if defined(__AVX512BF16__)
#include <immintrin.h>

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

constexpr int kNv = kBf16TileCols / 16;

template <int R>
void tile(int64_t kq, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc,
          bool accumulate) {
  __m512 acc[R][kNv];
  for (int i = 0; i < R; ++i) {
    for (int v = 0; v < kNv; ++v) {
      acc[i][v] = accumulate ? _mm512_loadu_ps(c + i * ldc + v * 16) : _mm512_setzero_ps();
    }
  }
  for (int64_t q = 0; q < kq; ++q) {
    __m512bh bv[kNv];
    for (int v = 0; v < kNv; ++v) {
      bv[v] = (__m512bh)_mm512_loadu_si512(bp + q * kBf16TileCols + v * 16);
    }
    for (int i = 0; i < R; ++i) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[q * kBf16TileRows + i]));
      for (int v = 0; v < kNv; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], a, bv[v]);
    }
  }
  for (int i = 0; i < R; ++i) {
    for (int v = 0; v < kNv; ++v) _mm512_storeu_ps(c + i * ldc + v * 16, acc[i][v]);
  }
}

}  // namespace

void bf16_tile_dot(int rows, int64_t kq, const uint32_t* ap, const uint32_t* bp, float* c,
                   int64_t ldc, bool accumulate) {
  static_assert(kBf16TileRows == 6, "one case per row count");
  switch (rows) {
    case 1:
      return tile<1>(kq, ap, bp, c, ldc, accumulate);
    case 2:
      return tile<2>(kq, ap, bp, c, ldc, accumulate);
    case 3:
      return tile<3>(kq, ap, bp, c, ldc, accumulate);
    case 4:
      return tile<4>(kq, ap, bp, c, ldc, accumulate);
    case 5:
      return tile<5>(kq, ap, bp, c, ldc, accumulate);
    default:
      return tile<6>(kq, ap, bp, c, ldc, accumulate);
  }
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
#endif
