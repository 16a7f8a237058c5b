// The bf16 register tiles on vdpbf16ps (see gemm_bf16.h): compiled with
// -mavx512bf16 in the avx512 kernel build only, called only on CPUs that
// have AVX512_BF16. Each instruction adds, per fp32 lane j of C, the
// products of the pair of bf16 in lane j of B with the broadcast pair of A.
#include "nn/cpu/gemm_bf16.h"

#if defined(__AVX512BF16__)
#include <immintrin.h>

#include <cstring>

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

// R rows x 16 NV columns of C over kq pairs; A packed (a panel of
// pack_a_bf16: word (i, q) at a[q * kBf16TileRows + i]) or, with kRows,
// rows in place (word (i, q) at a[i * lda + q]); kTable: b has a row table.
template <int R, int NV, bool kRows, bool kTable>
void tile(int64_t kq, const uint32_t* a, int64_t lda, PairRows b, float* c, int64_t ldc,
          bool accumulate) {
  __m512 acc[R][NV];
  for (int i = 0; i < R; ++i) {
    for (int v = 0; v < NV; ++v)
      acc[i][v] = accumulate ? _mm512_loadu_ps(c + i * ldc + v * 16) : _mm512_setzero_ps();
  }
  for (int64_t q = 0; q < kq; ++q) {
    __m512bh bv[NV];
    const uint32_t* bq = kTable ? b.data + b.rows[q] : b.data + q * b.ld;
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(bq + v * 16);
    for (int i = 0; i < R; ++i) {
      uint32_t word;
      std::memcpy(&word, kRows ? a + i * lda + q : a + q * kBf16TileRows + i, sizeof word);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(word));
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
  }
  for (int i = 0; i < R; ++i) {
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + i * ldc + v * 16, acc[i][v]);
  }
}

}  // namespace

void bf16_tile_dot(int rows, int64_t kq, const uint32_t* ap, PairRows b, float* c, int64_t ldc,
                   bool accumulate) {
  constexpr int kNv = kBf16TileCols / 16;
  with_tile_rows(rows, [&](auto r) {
    constexpr int kR = decltype(r)::value;
    if (b.rows) return tile<kR, kNv, false, true>(kq, ap, 0, b, c, ldc, accumulate);
    tile<kR, kNv, false, false>(kq, ap, 0, b, c, ldc, accumulate);
  });
}

void bf16_rows_tile_dot(int vectors, int64_t kq, const uint32_t* a, int64_t lda, const uint32_t* b,
                        int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  static_assert(kBf16RowsAlign % 12 == 0, "whole tiles of 6 and 12 rows");
  const PairRows rows{b, ldb, nullptr};
  if (vectors == 4) return tile<6, 4, true, false>(kq, a, lda, rows, c, ldc, accumulate);
  if (vectors == 2) return tile<12, 2, true, false>(kq, a, lda, rows, c, ldc, accumulate);
  tile<12, 1, true, false>(kq, a, lda, rows, c, ldc, accumulate);
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
#endif
