// Transposes and reductions on whole registers (vn, kNativeLanes floats:
// eight in the avx2 build, sixteen in the avx512 build), for kernels that
// shuffle lanes: a shuffle of a v16 that spans two AVX registers is lowered
// lane by lane through the stack, one of a v8 is one or two instructions.
#pragma once

#include "nn/cpu/simd.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {

// In-place transpose of the 8 x 8 block held in r[0..8): unpack pairs,
// then quads, then swap the 128-bit halves.
inline void transpose8x8(v8 (&r)[8]) {
  v8 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4) {  // u[i + c]: column c (low half) and c + 4 (high half)
    for (int j = 0; j < 2; ++j) {
      const v8 a = t[i + j], b = t[i + j + 2];
      u[i + 2 * j] = __builtin_shufflevector(a, b, 0, 1, 8, 9, 4, 5, 12, 13);
      u[i + 2 * j + 1] = __builtin_shufflevector(a, b, 2, 3, 10, 11, 6, 7, 14, 15);
    }
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    r[i + 4] = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// The square transpose of one register block: 8 x 8 or 16 x 16.
inline void transpose_square(v8 (&r)[8]) {
  transpose8x8(r);
}
inline void transpose_square(v16 (&r)[16]) {
  transpose16x16(r);
}

// Lane j < N of the result: the sum of the 8 lanes of h[j], added as
// transpose_sum16 adds the halves of a v16 after its first fold:
// (l0 + l4) + (l2 + l6), then + ((l1 + l5) + (l3 + l7)). Lanes from N on
// are zero. N <= 8.
template <int N>
inline v8 transpose_sum8(const v8* h) {
  static_assert(N >= 1 && N <= 8, "one result lane per vector");
  constexpr int NQ = (N + 1) / 2, NP = (NQ + 1) / 2;
  auto at = [](const auto& a, int i, int n) { return i < n ? a[i] : v8{}; };
  v8 q[NQ], p[NP];
  for (int i = 0; i < NQ; ++i) {  // lanes 0-3: l + (l + 4) of h[2i]; lanes 4-7: of h[2i + 1]
    const v8 a = h[2 * i], b = at(h, 2 * i + 1, N);
    q[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11) +
           __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15);
  }
  for (int i = 0; i < NP; ++i) {  // pairs of lanes: (q0 + q2, q1 + q3) per vector
    const v8 a = q[2 * i], b = at(q, 2 * i + 1, NQ);
    p[i] = __builtin_shufflevector(a, b, 0, 1, 4, 5, 8, 9, 12, 13) +
           __builtin_shufflevector(a, b, 2, 3, 6, 7, 10, 11, 14, 15);
  }
  const v8 a = p[0], b = at(p, 1, NP);
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14) +
         __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
