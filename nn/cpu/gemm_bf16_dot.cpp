// The bf16 register tiles on vdpbf16ps (see gemm_bf16.h), and the
// conversions into their operands on vcvtne(2)ps2bf16: compiled with
// -mavx512bf16 in the avx512 kernel build only, called only on CPUs that
// have AVX512_BF16. Each vdpbf16ps adds, per fp32 lane j of C, the
// products of the pair of bf16 in lane j of B with the broadcast pair of A.
#include "nn/cpu/gemm_bf16.h"

#if defined(__AVX512BF16__)
#include <immintrin.h>

#include <cstring>

#include "nn/cpu/simd.h"

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

// vcvtne2ps2bf16 rounds to nearest even and quiets NaN as bf16_bits does,
// and flushes fp32 denormals to zero (which vdpbf16ps would do to them as
// bf16 inputs anyway). Two conversions and one word interleave per 16 pairs.
void bf16_pair_rows_dot(const float* lo, const float* hi, int64_t n, float* dst) {
  alignas(64) static constexpr uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i order = _mm512_load_si512(kInterleave);
  auto pairs = [&](__m512 l, __m512 h) {  // h zero without hi: bf16 zero
    return _mm512_permutexvar_epi16(order, (__m512i)_mm512_cvtne2ps_pbh(h, l));
  };
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 h = hi ? _mm512_loadu_ps(hi + j) : _mm512_setzero_ps();
    _mm512_storeu_si512(dst + j, pairs(_mm512_loadu_ps(lo + j), h));
  }
  if (j == n) return;
  const __mmask16 m = head_mask16(n - j);
  const __m512 h = hi ? _mm512_maskz_loadu_ps(m, hi + j) : _mm512_setzero_ps();
  _mm512_mask_storeu_epi32(dst + j, m, pairs(_mm512_maskz_loadu_ps(m, lo + j), h));
}

void bf16_row_dot(const float* src, int64_t n, uint16_t* dst) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j),
                        (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + j)));
  if (j == n) return;
  const __mmask16 m = head_mask16(n - j);
  _mm256_mask_storeu_epi16(dst + j, m,
                           (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + j)));
}

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
