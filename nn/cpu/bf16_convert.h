// Rounding fp32 to bfloat16 (nearest even, NaN quieted, as PyTorch's
// conversion) for the bf16 kernels: scalars, 16-lane vectors, and pairs of
// consecutive values packed into one 32-bit word (the lower address in the
// low half), the operand format of vdpbf16ps.
#pragma once

#include "nn/cpu/isa_namespace.h"

#include <cstdint>
#include <cstring>

#include "nn/cpu/simd.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {

using v16u = uint32_t __attribute__((vector_size(64)));

// bf16 bits of x in the low half.
inline uint32_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if (x != x) return (u >> 16) | 0x40u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

inline v16u bf16_bits16(v16 x) {
  v16u u;
  std::memcpy(&u, &x, sizeof u);
  const v16u rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const v16u nan = reinterpret_cast<v16u>(x != x);
  return (rounded & ~nan) | (((u >> 16) | 0x40u) & nan);
}

// The 16 pairs of p[0..32), rounded: lane q holds p[2q] | p[2q + 1] << 16.
inline v16u pairs16(const float* p) {
  const v16u a = bf16_bits16(load16(p)), b = bf16_bits16(load16(p + kLanes));
  const v16u even =
      __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const v16u odd =
      __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  return even | (odd << 16);
}

// t[r] = pairs16 of the 16 vectors' rows, transposed in place: t[q] lane r
// then holds pair q of row r.
inline void transpose_pairs(v16u (&t)[kLanes]) {
  v16 f[kLanes];
  std::memcpy(f, t, sizeof f);
  transpose16x16(f);
  std::memcpy(t, f, sizeof f);
}

// dst[0..n) = the bf16 of src[0..n), 16 bits each.
inline void bf16_row(const float* src, int64_t n, uint16_t* dst) {
  using v16h = uint16_t __attribute__((vector_size(32)));
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    const v16h h = __builtin_convertvector(bf16_bits16(load16(src + j)), v16h);
    std::memcpy(dst + j, &h, sizeof h);
  }
  for (; j < n; ++j) dst[j] = static_cast<uint16_t>(bf16_bits(src[j]));
}

// One register of pair words' high (odd) or low (even) halves, as the
// floats they are the upper 16 bits of.
inline vn odd_halves(const uint32_t* p) {
  using vu = uint32_t __attribute__((vector_size(sizeof(vn))));
  vu w;
  std::memcpy(&w, p, sizeof w);
  w &= 0xffff0000u;
  vn out;
  std::memcpy(&out, &w, sizeof out);
  return out;
}
inline vn even_halves(const uint32_t* p) {
  using vu = uint32_t __attribute__((vector_size(sizeof(vn))));
  vu w;
  std::memcpy(&w, p, sizeof w);
  w <<= 16;
  vn out;
  std::memcpy(&out, &w, sizeof out);
  return out;
}

// *odd and *even = the floats of the high and low halves of one pair word.
inline void split_pair_word(uint32_t word, float* odd, float* even) {
  const uint32_t hi = word & 0xffff0000u, lo = word << 16;
  std::memcpy(odd, &hi, sizeof hi);
  std::memcpy(even, &lo, sizeof lo);
}

// odd[j] and even[j] = the floats of the high and low halves of words[j],
// j < n: an operand split once so that register tiles broadcast its halves
// straight from memory.
inline void split_pair_words(const uint32_t* words, int64_t n, float* odd, float* even) {
  int64_t j = 0;
  for (; j + kNativeLanes <= n; j += kNativeLanes) {
    storen(odd + j, odd_halves(words + j));
    storen(even + j, even_halves(words + j));
  }
  for (; j < n; ++j) split_pair_word(words[j], odd + j, even + j);
}

// The arithmetic of vdpbf16ps, emulated, on R rows x NV registers of C
// (rows ldc apart): for each pair q < kq in increasing order, C(i, :) +=
// A(i, 2q + 1) B(2q + 1, :), then += A(i, 2q) B(2q, :); every product of
// two bf16 is exact in fp32, so each addition rounds once, as vdpbf16ps's.
// A is split (split_pair_words): pair q of row i at a_odd[q * a_step + i]
// and a_even[...], broadcast from memory; b_row(q) points at pair q's
// words of B (NV registers of them). The odd products of a pair go to every
// accumulator before the even ones. At most 3 rows at a time: GCC spills
// two of 6 x 2 accumulators (AVX2, 16 registers) and three of 6 x 4
// (AVX-512, 32) beside the halves of B and their mask; 3 rows run without
// spills, each pair of B read twice from L1.
template <int R, int NV, typename BRow>
[[gnu::always_inline]] inline void emulated_dot_tile(int64_t kq, const float* a_odd,
                                                     const float* a_even, int64_t a_step,
                                                     BRow b_row, float* c, int64_t ldc,
                                                     bool accumulate) {
  constexpr int kMaxRows = 3;
  if constexpr (R > kMaxRows) {
    emulated_dot_tile<kMaxRows, NV>(kq, a_odd, a_even, a_step, b_row, c, ldc, accumulate);
    emulated_dot_tile<R - kMaxRows, NV>(kq, a_odd + kMaxRows, a_even + kMaxRows, a_step, b_row,
                                        c + kMaxRows * ldc, ldc, accumulate);
    return;
  }
  vn acc[R][NV];
  for (int i = 0; i < R; ++i) {
    for (int u = 0; u < NV; ++u)
      acc[i][u] = accumulate ? loadn(c + i * ldc + u * kNativeLanes) : vn{};
  }
  for (int64_t q = 0; q < kq; ++q) {
    const uint32_t* bq = b_row(q);
    const float* ao = a_odd + q * a_step;
    const float* ae = a_even + q * a_step;
    vn odd[NV];
    for (int u = 0; u < NV; ++u) odd[u] = odd_halves(bq + u * kNativeLanes);
    for (int i = 0; i < R; ++i) {
      const float a = ao[i];
      for (int u = 0; u < NV; ++u) acc[i][u] += a * odd[u];
    }
    vn even[NV];
    for (int u = 0; u < NV; ++u) even[u] = even_halves(bq + u * kNativeLanes);
    for (int i = 0; i < R; ++i) {
      const float a = ae[i];
      for (int u = 0; u < NV; ++u) acc[i][u] += a * even[u];
    }
  }
  for (int i = 0; i < R; ++i) {
    for (int u = 0; u < NV; ++u) storen(c + i * ldc + u * kNativeLanes, acc[i][u]);
  }
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
