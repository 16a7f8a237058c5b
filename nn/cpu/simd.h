// Sixteen-float vectors from the GCC/Clang vector extensions: one AVX-512
// register in the avx512 build, two AVX registers in the avx2 build (split
// by the compiler), so the kernels have a single code path; kWideRegisters
// tells the kernels how many such vectors the register file holds (32 or
// 8), for the size of their register tiles. Loads and stores are unaligned.
#pragma once

#include "nn/cpu/isa_namespace.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <utility>

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {

using v16 = float __attribute__((vector_size(64)));
inline constexpr int kLanes = 16;

inline v16 load16(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store16(float* p, v16 v) {
  std::memcpy(p, &v, sizeof v);
}
#if defined(__AVX512F__)
// The first n lanes (0 <= n < 16) of a 16-lane mask register.
inline __mmask16 head_mask16(int64_t n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}
#endif
// p[0..n) in the first n lanes (0 <= n < 16), zeros after; reads nothing
// past p + n.
inline v16 load16_head(const float* p, int64_t n) {
#if defined(__AVX512F__)
  return reinterpret_cast<v16>(_mm512_maskz_loadu_ps(head_mask16(n), p));
#else
  v16 v{};
  for (int t = 0; t < kLanes - 1; ++t) {  // fixed trip count: unrolled
    if (t < n) v[t] = p[t];
  }
  return v;
#endif
}
using v8 = float __attribute__((vector_size(32)));

inline v16 splat16(float x) {
  return v16{} + x;
}

// One register: vn of kNativeLanes floats, for register tiles (GCC spills
// and builds operands through the stack when a v16 spans two registers).
#if defined(__AVX512F__)
inline constexpr bool kWideRegisters = true;
using vn = v16;
#else
inline constexpr bool kWideRegisters = false;
using vn = v8;
#endif
inline constexpr int kNativeLanes = sizeof(vn) / sizeof(float);

inline vn loadn(const float* p) {
  vn v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void storen(float* p, vn v) {
  std::memcpy(p, &v, sizeof v);
}
// v to p past the caches: a non-temporal store, which does not read the
// line first (p aligned to sizeof(vn)). stream_fence() makes such stores
// visible before the stores after it, as another thread must see them.
inline void streamn(float* p, vn v) {
#if defined(__AVX512F__)
  _mm512_stream_ps(p, reinterpret_cast<__m512>(v));
#else
  _mm256_stream_ps(p, reinterpret_cast<__m256>(v));
#endif
}
inline void stream_fence() {
  _mm_sfence();
}
// p[0..n) in the first n lanes of a native register (0 <= n < kNativeLanes),
// zeros after; reads nothing past p + n.
inline vn loadn_head(const float* p, int64_t n) {
#if defined(__AVX512F__)
  return load16_head(p, n);
#else
  static constexpr int32_t kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1};
  const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnes + 8 - n));
  return reinterpret_cast<vn>(_mm256_maskload_ps(p, mask));
#endif
}

// p[0..n) for 0 <= n <= kNativeLanes: a plain load when n is a whole
// register, else loadn_head.
[[gnu::always_inline]] inline vn loadn_part(const float* p, int64_t n) {
  return n == kNativeLanes ? loadn(p) : loadn_head(p, n);
}

// The first n lanes of v to p[0..n) (0 <= n < kNativeLanes); writes nothing
// past p + n.
inline void storen_head(float* p, vn v, int64_t n) {
#if defined(__AVX512F__)
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), reinterpret_cast<__m512>(v));
#else
  static constexpr int32_t kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1};
  const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnes + 8 - n));
  _mm256_maskstore_ps(p, mask, reinterpret_cast<__m256>(v));
#endif
}

inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, v8 v) {
  std::memcpy(p, &v, sizeof v);
}

// d[0..n) = s[0..n): inline vector moves, for the short rows of im2col where
// a call to memmove would cost more than the copy.
inline void copy_short(const float* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store16(d + i, load16(s + i));
  if (i + 8 <= n) store8(d + i, load8(s + i)), i += 8;
  for (int t = 0; t < 7; ++t) {  // fixed trip count: unrolled, never a memcpy call
    if (i + t < n) d[i + t] = s[i + t];
  }
}

// d[0..n) = 0, likewise.
inline void zero_short(float* d, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store16(d + i, v16{});
  if (i + 8 <= n) store8(d + i, v8{}), i += 8;
  for (int t = 0; t < 7; ++t) {
    if (i + t < n) d[i + t] = 0.0f;
  }
}

// d[0..n) += s[0..n), likewise.
inline void add_short(const float* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store16(d + i, load16(d + i) + load16(s + i));
  if (i + 8 <= n) store8(d + i, load8(d + i) + load8(s + i)), i += 8;
  for (int t = 0; t < 7; ++t) {
    if (i + t < n) d[i + t] += s[i + t];
  }
}

// Adds the two halves of each of a and b: lanes 0-7 of the result hold the
// partial sums of a, lanes 8-15 those of b (each half folded in two).
inline v16 fold_halves(v16 a, v16 b) {
  return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
         __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30,
                                 31);
}
inline v16 fold_quarters(v16 a, v16 b) {
  return __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
         __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
}
inline v16 fold_pairs(v16 a, v16 b) {
  return __builtin_shufflevector(a, b, 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
         __builtin_shufflevector(a, b, 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
}
inline v16 fold_singles(v16 a, v16 b) {
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
         __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

// Horizontal sums of 16 vectors at once: lane j of the result is the sum of
// the 16 lanes of a[j] (15 folds instead of 16 separate reductions).
inline v16 transpose_sum16(const v16 (&a)[16]) {
  if constexpr (!kWideRegisters) {  // the same additions, one vector at a time
    v16 out;
    for (int j = 0; j < 16; ++j) {
      float h[8], q[4];
      for (int l = 0; l < 8; ++l) h[l] = a[j][l] + a[j][l + 8];
      for (int l = 0; l < 4; ++l) q[l] = h[l] + h[l + 4];
      out[j] = (q[0] + q[2]) + (q[1] + q[3]);
    }
    return out;
  }
  v16 h[8], q[4], p[2];
  for (int i = 0; i < 8; ++i) h[i] = fold_halves(a[2 * i], a[2 * i + 1]);
  for (int i = 0; i < 4; ++i) q[i] = fold_quarters(h[2 * i], h[2 * i + 1]);
  for (int i = 0; i < 2; ++i) p[i] = fold_pairs(q[2 * i], q[2 * i + 1]);
  return fold_singles(p[0], p[1]);
}

// Lane l of the two halves of one butterfly stage of transpose16x16 over
// a top row a and the row b below it (index 16 + l: lane l of b).
constexpr int top_lane(int l, int b) {
  return (l & b) ? 16 + l - b : l;
}
constexpr int bottom_lane(int l, int b) {
  return (l & b) ? 16 + l : l + b;
}
template <int B, int... L>
inline v16 butterfly_top(v16 a, v16 b, std::integer_sequence<int, L...>) {
  return __builtin_shufflevector(a, b, top_lane(L, B)...);
}
template <int B, int... L>
inline v16 butterfly_bottom(v16 a, v16 b, std::integer_sequence<int, L...>) {
  return __builtin_shufflevector(a, b, bottom_lane(L, B)...);
}

// Stage B of transpose16x16: swaps the off-diagonal B x B blocks of every
// 2B x 2B block (lane l of a top row takes lane l - B of the row B below it).
template <int B>
inline void transpose_stage(v16 (&r)[16]) {
  constexpr auto lanes = std::make_integer_sequence<int, 16>{};
  for (int i = 0; i < 16; ++i) {
    if (i & B) continue;
    const v16 t = butterfly_top<B>(r[i], r[i + B], lanes);
    const v16 u = butterfly_bottom<B>(r[i], r[i + B], lanes);
    r[i] = t;
    r[i + B] = u;
  }
}

// In-place transpose of the 16 x 16 block held in r[0..16): four butterfly
// stages.
inline void transpose16x16(v16 (&r)[16]) {
  transpose_stage<1>(r);
  transpose_stage<2>(r);
  transpose_stage<4>(r);
  transpose_stage<8>(r);
}

// Sum of x[0..n) with four vector accumulators (a float reduction the
// compiler would not vectorise on its own).
inline float sum_floats(const float* x, int64_t n) {
  v16 acc[4] = {};
  int64_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    for (int a = 0; a < 4; ++a) acc[a] += load16(x + i + a * kLanes);
  }
  for (; i + kLanes <= n; i += kLanes) acc[0] += load16(x + i);
  const v16 v = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  float sum = 0.0f;
  for (int l = 0; l < kLanes; ++l) sum += v[l];
  for (; i < n; ++i) sum += x[i];
  return sum;
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
