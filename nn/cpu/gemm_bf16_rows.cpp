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

// The emulated tile, one row and 16 columns at a time (dot_pairs: the
// arithmetic of vdpbf16ps).
void rows_tile_emulated(int rows, int vectors, int64_t kq, const uint32_t* a, int64_t lda,
                        const uint32_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  constexpr int U = kLanes / kNativeLanes;
  for (int i = 0; i < rows; ++i) {
    for (int v = 0; v < vectors; ++v) {
      float* ct = c + i * ldc + v * kLanes;
      vn acc[U];
      for (int u = 0; u < U; ++u) acc[u] = accumulate ? loadn(ct + u * kNativeLanes) : vn{};
      for (int64_t q = 0; q < kq; ++q) {
        uint32_t word;
        std::memcpy(&word, a + i * lda + q, sizeof word);
        for (int u = 0; u < U; ++u) {
          vn even, odd;
          split_pairs(b + q * ldb + v * kLanes + u * kNativeLanes, even, odd);
          acc[u] = dot_pairs(acc[u], word, even, odd);
        }
      }
      for (int u = 0; u < U; ++u) storen(ct + u * kNativeLanes, acc[u]);
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
