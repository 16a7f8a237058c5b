// A cache-blocked GEMM over packed operands (GotoBLAS / BLIS loop order),
// single-threaded, for the large products of the CPU backend:
//
//   C(m, n) = A(m, k) * B(k, n)  (+ C when accumulate)
//
// A and B are read through strides, so any transpose works: (i, p) of A is
// at a.data[i * a.row_stride + p * a.col_stride], likewise for B. Per
// (kKc x kNc) block of B and (kMc x kKc) block of A, the operands are copied
// into contiguous panels (B in kNr-column panels, A in kMr-row panels, tails
// zero-padded), and a kMr x kNr register tile of C runs over each pair of
// panels. Each C element is summed over p in increasing order with one
// accumulator, whatever the blocking of m and n: callers may split C into
// blocks across threads and get the same bits.
#pragma once

#include <cstdint>

#include "nn/cpu/small_gemm.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {

// The register tile: blocks of C whose rows (columns) are multiples of these
// waste no work on padding.
inline constexpr int kPackedTileRows = 6;
#if defined(__AVX512F__)
inline constexpr int kPackedTileCols = 64;  // 6 x 4 of the 32 AVX-512 registers
#else
inline constexpr int kPackedTileCols = 16;  // 6 x 2 of the 16 AVX registers
#endif
// Depth of the packed blocks: products whose inner dimension is a multiple
// of this have no short block (each block costs a pass over C).
inline constexpr int64_t kPackedDepth = 256;

void packed_gemm(int64_t m, int64_t n, int64_t k, StridedMatrix a, StridedMatrix b, float* c,
                 int64_t ldc, bool accumulate);

// The same with A packed beforehand (e.g. a weight matrix used by several
// products, by several threads): pack_a writes a(m, k) into packed_a_size
// floats at dst, which packed_gemm_prepacked then only reads.
int64_t packed_a_size(int64_t m, int64_t k);
void pack_a(int64_t m, int64_t k, StridedMatrix a, float* dst);
void packed_gemm_prepacked(int64_t m, int64_t n, int64_t k, const float* a_packed, StridedMatrix b,
                           float* c, int64_t ldc, bool accumulate);

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
