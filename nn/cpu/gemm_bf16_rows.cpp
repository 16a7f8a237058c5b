// gemm_bf16_rows (gemm_bf16.h): both operands as bf16 pair words read in
// place, for products whose inner dimension runs along rows of both (the
// weight gradient: output positions). Per block of kQb pairs of depth (B's
// block stays in L1), column blocks of 64, 32 or 16 and row tiles of 6 or
// 12; each C element is summed over the pairs in increasing order.
#include <algorithm>
#include <cstring>

#include "nn/cpu/bf16_convert.h"
#include "nn/cpu/gemm_bf16.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

constexpr int64_t kQb = 128;

// The emulated tile (emulated_dot_tile: the arithmetic of vdpbf16ps): the
// rows of A split into floats as they are gathered, pair q of row i at
// q * rows + i; then per 6 rows, as many columns at a time as registers
// allow (AVX2: 16; AVX-512: the tile's 16 to 64).
void rows_tile_emulated(int rows, int vectors, int64_t kq, const uint32_t* a, int64_t lda,
                        const uint32_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  constexpr int kMaxRows = 12;
  alignas(64) float a_odd[kQb * kMaxRows], a_even[kQb * kMaxRows];
  for (int64_t q = 0; q < kq; ++q) {
    for (int i = 0; i < rows; ++i)
      split_pair_word(a[i * lda + q], a_odd + q * rows + i, a_even + q * rows + i);
  }
  const int registers = vectors * kLanes / kNativeLanes;
  constexpr int kMaxNv = kWideRegisters ? 4 : 2;
  for (int i = 0; i < rows; i += 6) {
    for (int u = 0; u < registers; u += kMaxNv) {
      const uint32_t* bu = b + u * kNativeLanes;
      const auto b_row = [&](int64_t q) { return bu + q * ldb; };
      float* cu = c + i * ldc + u * kNativeLanes;
      const int nv = std::min(kMaxNv, registers - u);
      if (nv == 4) {
        emulated_dot_tile<6, 4>(kq, a_odd + i, a_even + i, rows, b_row, cu, ldc, accumulate);
      } else if (nv == 2) {
        emulated_dot_tile<6, 2>(kq, a_odd + i, a_even + i, rows, b_row, cu, ldc, accumulate);
      } else {
        emulated_dot_tile<6, 1>(kq, a_odd + i, a_even + i, rows, b_row, cu, ldc, accumulate);
      }
    }
  }
}

void rows_tile(int vectors, int64_t kq, const uint32_t* a, int64_t lda, const uint32_t* b,
               int64_t ldb, float* c, int64_t ldc, bool accumulate, bool dot) {
#if defined(__AVX512F__)
  if (dot) return bf16_rows_tile_dot(vectors, kq, a, lda, b, ldb, c, ldc, accumulate);
#endif
  rows_tile_emulated(vectors == 4 ? 6 : 12, vectors, kq, a, lda, b, ldb, c, ldc, accumulate);
}

}  // namespace

// c(m, n) rows ldc (+)= A(m, 2 kq) B(2 kq, n), both as pair words in place
void gemm_bf16_rows(int64_t m, int64_t n, int64_t kq, const uint32_t* a, int64_t lda,
                    const uint32_t* b, int64_t ldb, int64_t b_panel_stride, float* c, int64_t ldc,
                    bool accumulate, bool dot) {
  if (kq <= 0 && !accumulate) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
  }
  for (int64_t q0 = 0; q0 < kq; q0 += kQb) {
    const int64_t qc = std::min(kQb, kq - q0);
    for (int64_t j = 0; j < n;) {
      const int64_t left = std::min(n - j, ldb - j % ldb);  // in this panel of B
      const int vectors = left >= 64 ? 4 : left >= 32 ? 2 : 1;
      const int64_t rows = vectors == 4 ? 6 : 12;
      const uint32_t* bj = b + j / ldb * b_panel_stride + q0 * ldb + j % ldb;
      for (int64_t i = 0; i < m; i += rows) {
        rows_tile(vectors, qc, a + i * lda + q0, lda, bj, ldb, c + i * ldc + j, ldc,
                  accumulate || q0 > 0, dot);
      }
      j += kLanes * vectors;
    }
  }
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
