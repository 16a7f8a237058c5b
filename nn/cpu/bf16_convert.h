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

// The low (even) and high (odd) halves of one register of pair words, as
// the floats they are the upper 16 bits of.
inline void split_pairs(const uint32_t* p, vn& even, vn& odd) {
  using vu = uint32_t __attribute__((vector_size(sizeof(vn))));
  vu w;
  std::memcpy(&w, p, sizeof w);
  const vu lo = w << 16, hi = w & 0xffff0000u;
  std::memcpy(&even, &lo, sizeof lo);
  std::memcpy(&odd, &hi, sizeof hi);
}

// acc plus the two products of the pair word a with the split pairs (even,
// odd): the odd product first, one rounding per addition, as vdpbf16ps adds
// them (every product of two bf16 is exact in fp32).
inline vn dot_pairs(vn acc, uint32_t a, vn even, vn odd) {
  const uint32_t lo = a << 16, hi = a & 0xffff0000u;
  float a_even, a_odd;
  std::memcpy(&a_even, &lo, sizeof a_even);
  std::memcpy(&a_odd, &hi, sizeof a_odd);
  acc += a_odd * odd;
  acc += a_even * even;
  return acc;
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
