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

// The float nearest x in bf16 (round to nearest even; NaN stays NaN).
float round_to_bf16(float x);

// Register tile: rows <= 6 rows of C (kBf16TileCols columns, ldc apart)
// (+)= the packed panels ap (kq pairs x 6) and bp (kq pairs x kBf16TileCols).
inline constexpr int kBf16TileRows = 6;
#if defined(__AVX512F__)
inline constexpr int kBf16TileCols = 64;
void bf16_tile_dot(int rows, int64_t kq, const uint32_t* ap, const uint32_t* bp, float* c,
                   int64_t ldc, bool accumulate);
#else
inline constexpr int kBf16TileCols = 16;
#endif

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
