// The bf16 GEMM of the CPU backend's bf16 precision:
//
//   C(m, n) = bf16(A)(m, k) * bf16(B)(k, n)  (+ C when accumulate)
//
// A and B are rounded to bfloat16 (round to nearest even, as PyTorch's
// conversion) while they are packed, as pairs of consecutive k in one
// 32-bit lane; products are summed in fp32. On CPUs with AVX512_BF16 the
// register tile runs on vdpbf16ps (gemm_bf16_dot.cpp, its own flags); else
// an emulation with the same arithmetic: each pair is added to the sum odd
// element first, every product exact in fp32, one rounding per addition.
// (vdpbf16ps also flushes denormal inputs and results to zero; the
// emulation does not.) Operands are read through strides as in
// packed_gemm.h; each C element is summed over k in increasing order of
// pairs whatever the blocking of m and n, so callers may split C across
// threads and get the same bits.
#pragma once

#include <cstdint>
#include <type_traits>

#include "nn/cpu/isa_namespace.h"
#include "nn/cpu/small_gemm.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {

// A packed beforehand: pack_a_bf16 writes a(m, k) into packed_a_bf16_size
// 32-bit words at dst.
int64_t packed_a_bf16_size(int64_t m, int64_t k);
void pack_a_bf16(int64_t m, int64_t k, StridedMatrix a, uint32_t* dst);
// dot: use vdpbf16ps (only when the CPU has AVX512_BF16).
void gemm_bf16_prepacked(int64_t m, int64_t n, int64_t k, const uint32_t* a_packed, StridedMatrix b,
                         float* c, int64_t ldc, bool accumulate, bool dot);
void gemm_bf16(int64_t m, int64_t n, int64_t k, StridedMatrix a, StridedMatrix b, float* c,
               int64_t ldc, bool accumulate, bool dot);

// Rows of bf16 pair words: word j of row q holds bf16 B(2q, j) in its low
// half and B(2q + 1, j) in its high half; row q starts at data + rows[q]
// with a row table (shifted rows of an image read in place), else at
// data + q * ld.
struct PairRows {
  const uint32_t* data = nullptr;
  int64_t ld = 0;
  const int64_t* rows = nullptr;

  const uint32_t* row(int64_t q) const { return data + (rows ? rows[q] : q * ld); }
};

// The same with B already rounded and paired, kq rows of n words read in
// place (no packing); A packed by pack_a_bf16 with depth 2 kq. Same sums as
// gemm_bf16.
void gemm_bf16_pairs(int64_t m, int64_t n, int64_t kq, const uint32_t* a_packed, PairRows b,
                     float* c, int64_t ldc, bool accumulate, bool dot);

// The same with A also as pair words read in place: row i of A is kq words
// at a + i * lda, word q holding bf16 A(i, 2q) low and A(i, 2q + 1) high;
// B's columns in panels ldb wide (a multiple of 16): word (q, j) at
// b + (j / ldb) * b_panel_stride + q * ldb + j % ldb. m must be a multiple
// of kBf16RowsAlign, n of 16 (gemm_bf16_rows.cpp).
inline constexpr int64_t kBf16RowsAlign = 12;
void gemm_bf16_rows(int64_t m, int64_t n, int64_t kq, const uint32_t* a, int64_t lda,
                    const uint32_t* b, int64_t ldb, int64_t b_panel_stride, float* c, int64_t ldc,
                    bool accumulate, bool dot);

// dst[j] = bf16(lo[j]) | bf16(hi[j]) << 16 for j < n, as floats' bits (so
// that float copies such as im2col move them); hi null: zero high halves.
// dot: on vcvtne2ps2bf16 (only when the CPU has AVX512_BF16), which also
// flushes fp32 denormals to zero.
void bf16_pair_rows(const float* lo, const float* hi, int64_t n, float* dst, bool dot);
// dst[0..n) = the bf16 of src[0..n), 16 bits each; dot as above.
void bf16_row(const float* src, int64_t n, uint16_t* dst, bool dot);

// The float nearest x in bf16 (round to nearest even; NaN stays NaN).
float round_to_bf16(float x);

// Register tile: rows <= 6 rows of C (kBf16TileCols columns, ldc apart)
// (+)= the packed panel ap (kq pairs x 6) times kq rows of kBf16TileCols
// pair words of b.
inline constexpr int kBf16TileRows = 6;
#if defined(__AVX512F__)
inline constexpr int kBf16TileCols = 64;
void bf16_tile_dot(int rows, int64_t kq, const uint32_t* ap, PairRows b, float* c, int64_t ldc,
                   bool accumulate);
// Its tile: 16 * vectors columns (4, 2 or 1) by 6 rows (4 vectors) or 12.
void bf16_rows_tile_dot(int vectors, int64_t kq, const uint32_t* a, int64_t lda, const uint32_t* b,
                        int64_t ldb, float* c, int64_t ldc, bool accumulate);
void bf16_pair_rows_dot(const float* lo, const float* hi, int64_t n, float* dst);
void bf16_row_dot(const float* src, int64_t n, uint16_t* dst);
#else
inline constexpr int kBf16TileCols = 16;
#endif

// f(std::integral_constant<int, rows>{}) for rows in 1..kBf16TileRows.
template <typename F>
void with_tile_rows(int rows, F&& f) {
  switch (rows) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 5:
      return f(std::integral_constant<int, 5>{});
    default:
      return f(std::integral_constant<int, 6>{});
  }
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
