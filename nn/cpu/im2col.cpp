// im2col / col2im through a zero-padded copy of the sample: with the padding
// in memory, column-matrix row (c, r, s) is, for each output row p, the Q
// elements xp[c, p*stride + r, s + q*stride] (q < Q) with no bounds checks.
// For stride 1 those are Q contiguous floats, copied with a move whose
// width is fixed at compile time for Q <= 16 (small planes would otherwise
// pay a call or a loop per handful of floats); stride 2 (resnet20's
// downsampling layers) moves every other float with vector shuffles, the
// same way; other strides go one float at a time.
#include "nn/cpu/im2col.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

struct Padded {
  int64_t hp, wp, area;
  explicit Padded(const Conv2dGeometry& g)
      : hp(g.in_h + 2 * g.pad), wp(g.in_w + 2 * g.pad), area(hp * wp) {}
};

// xp: (C, Hp, Wp) <- x: (C, H, W) with zero padding
void pad_input(const Conv2dGeometry& g, const Padded& pd, const float* x, float* xp) {
  zero_short(xp, g.in_channels * pd.area);
  for (int64_t c = 0; c < g.in_channels; ++c) {
    for (int64_t h = 0; h < g.in_h; ++h) {
      copy_short(x + (c * g.in_h + h) * g.in_w, xp + c * pd.area + (h + g.pad) * pd.wp + g.pad,
                 g.in_w);
    }
  }
}

// --- stride 2: d[q] = s[2q] ------------------------------------------------
// A vector V of W lanes moves W outputs through two overlapping W-float
// accesses of the strided side, s[0, W) and s[W-1, 2W-1): nothing past
// s[2(W-1)], the last float used, is read or written (the next row, or
// another thread's sample, follows). The scatter still adds each float once
// per call, and the calls keep col2im's (c, s, r) order, so the sums have
// the scalar loop's bits.

template <typename V>
constexpr int kWidth = sizeof(V) / sizeof(float);

template <typename V>
V load_v(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V>
void store_v(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// Lanes 0, 2, .. of a = s[0, W) then lanes 1, 3, .. of b = s[W-1, 2W-1).
template <typename V, int... L>
V even_lanes(V a, V b, std::integer_sequence<int, L...>) {
  return __builtin_shufflevector(a, b, (L < kWidth<V> / 2 ? 2 * L : 2 * L + 1)...);
}
// x spread over the even positions of s[0, W) (lo) and s[W-1, 2W-1) (hi),
// -0.0 in between: x + -0.0 == x for every float x, so adding the spread
// vector changes only the positions of x and each by one rounding, as the
// scalar loop did.
template <typename V, int... L>
V spread_lo(V x, std::integer_sequence<int, L...>) {
  return __builtin_shufflevector(x, -V{}, (L % 2 == 0 ? L / 2 : kWidth<V>)...);
}
template <typename V, int... L>
V spread_hi(V x, std::integer_sequence<int, L...>) {
  constexpr int W = kWidth<V>;
  return __builtin_shufflevector(x, -V{}, (L % 2 == 1 ? (W - 1 + L) / 2 : W)...);
}

template <typename V>
void gather2_vector(const float* s, float* d) {
  constexpr auto lanes = std::make_integer_sequence<int, kWidth<V>>{};
  store_v(d, even_lanes(load_v<V>(s), load_v<V>(s + kWidth<V> - 1), lanes));
}
template <typename V>
void scatter2_vector(const float* s, float* d) {
  constexpr auto lanes = std::make_integer_sequence<int, kWidth<V>>{};
  const V x = load_v<V>(s), lo = load_v<V>(d), hi = load_v<V>(d + kWidth<V> - 1);
  store_v(d, lo + spread_lo(x, lanes));
  store_v(d + kWidth<V> - 1, hi + spread_hi(x, lanes));
}

// d[q] = s[2q] for q < n: native vectors, then 8 floats, then one at a time.
inline void gather2(const float* s, float* d, int64_t n) {
  int64_t q = 0;
  for (; q + kNativeLanes <= n; q += kNativeLanes) gather2_vector<vn>(s + 2 * q, d + q);
  if (kNativeLanes > 8 && q + 8 <= n) gather2_vector<v8>(s + 2 * q, d + q), q += 8;
  for (; q < n; ++q) d[q] = s[2 * q];
}
// d[2q] += s[q] for q < n, likewise.
inline void scatter2(const float* s, float* d, int64_t n) {
  int64_t q = 0;
  for (; q + kNativeLanes <= n; q += kNativeLanes) scatter2_vector<vn>(s + q, d + 2 * q);
  if (kNativeLanes > 8 && q + 8 <= n) scatter2_vector<v8>(s + q, d + 2 * q), q += 8;
  for (; q < n; ++q) d[2 * q] += s[q];
}

// dst[p*Q + q] = src[p*src_stride + q*Stride] for p < rows, q < Q (Q fixed).
template <int Stride, int Q>
void copy_rows(const float* src, int64_t src_stride, float* dst, int64_t rows) {
  for (int64_t p = 0; p < rows; ++p) {
    if constexpr (Stride == 1) {
      std::memcpy(dst + p * Q, src + p * src_stride, sizeof(float) * Q);
    } else {
      gather2(src + p * src_stride, dst + p * Q, Q);
    }
  }
}

// dst[p*dst_stride + q*Stride] += src[p*Q + q] for p < rows, q < Q (Q fixed).
template <int Stride, int Q>
void add_rows(const float* src, float* dst, int64_t dst_stride, int64_t rows) {
  for (int64_t p = 0; p < rows; ++p) {
    float* d = dst + p * dst_stride;
    if constexpr (Stride == 1) {
      for (int q = 0; q < Q; ++q) d[q] += src[p * Q + q];
    } else {
      scatter2(src + p * Q, d, Q);
    }
  }
}

using CopyRows = void (*)(const float*, int64_t, float*, int64_t);
using AddRows = void (*)(const float*, float*, int64_t, int64_t);

template <int Stride, int... Qs>
CopyRows pick_copy(int64_t q, std::integer_sequence<int, Qs...>) {
  CopyRows f = nullptr;
  ((q == Qs + 1 ? (f = copy_rows<Stride, Qs + 1>, 0) : 0), ...);
  return f;
}
template <int Stride, int... Qs>
AddRows pick_add(int64_t q, std::integer_sequence<int, Qs...>) {
  AddRows f = nullptr;
  ((q == Qs + 1 ? (f = add_rows<Stride, Qs + 1>, 0) : 0), ...);
  return f;
}

// Output rows p of one column-matrix row, read from the padded plane at
// `src` (element (p, q) at src[p * row_step + q * stride]).
struct RowMover {
  int64_t P, Q, stride, row_step;
  CopyRows copy = nullptr;  // fixed-width kernels for strides 1 and 2, Q <= 16
  AddRows add = nullptr;

  RowMover(const Conv2dGeometry& g, const Padded& pd)
      : P(g.out_h()), Q(g.out_w()), stride(g.stride), row_step(g.stride * pd.wp) {
    constexpr auto widths = std::make_integer_sequence<int, 16>{};
    if (stride == 1) {
      copy = pick_copy<1>(Q, widths);
      add = pick_add<1>(Q, widths);
    } else if (stride == 2) {
      copy = pick_copy<2>(Q, widths);
      add = pick_add<2>(Q, widths);
    }
  }
  void gather(const float* src, float* dst) const {
    if (copy) return copy(src, row_step, dst, P);
    for (int64_t p = 0; p < P; ++p) {
      if (stride == 1) {
        copy_short(src + p * row_step, dst + p * Q, Q);
      } else if (stride == 2) {
        gather2(src + p * row_step, dst + p * Q, Q);
      } else {
        for (int64_t q = 0; q < Q; ++q) dst[p * Q + q] = src[p * row_step + q * stride];
      }
    }
  }
  void scatter_add(const float* src, float* dst) const {
    if (add) return add(src, dst, row_step, P);
    for (int64_t p = 0; p < P; ++p) {
      if (stride == 1) {
        add_short(src + p * Q, dst + p * row_step, Q);
      } else if (stride == 2) {
        scatter2(src + p * Q, dst + p * row_step, Q);
      } else {
        for (int64_t q = 0; q < Q; ++q) dst[p * row_step + q * stride] += src[p * Q + q];
      }
    }
  }
};

}  // namespace

// Rows (c, r, s) outermost and samples innermost: each row of the (large)
// column matrix is written from start to end, not 16 floats at a time in
// every row per sample.
void im2col(const Conv2dGeometry& g, const float* x, int64_t count, float* col, int64_t ld) {
  const Padded pd(g);
  const int64_t chw = g.in_channels * g.in_h * g.in_w, plane = g.in_channels * pd.area;
  const int64_t pq = g.out_h() * g.out_w();
  const float* xp = x;
  if (g.pad > 0) {
    float* buffer = scratch(ScratchSlot::kPadded, static_cast<size_t>(count * plane));
    for (int64_t i = 0; i < count; ++i) pad_input(g, pd, x + i * chw, buffer + i * plane);
    xp = buffer;
  }
  const int64_t stride = g.pad > 0 ? plane : chw;  // between samples of xp
  const RowMover mover(g, pd);
  for (int64_t c = 0; c < g.in_channels; ++c) {
    for (int64_t r = 0; r < g.kernel_h; ++r) {
      for (int64_t s = 0; s < g.kernel_w; ++s) {
        float* dst = col + ((c * g.kernel_h + r) * g.kernel_w + s) * ld;
        const float* src = xp + c * pd.area + r * pd.wp + s;
        for (int64_t i = 0; i < count; ++i) mover.gather(src + i * stride, dst + i * pq);
      }
    }
  }
}

void col2im(const Conv2dGeometry& g, const float* col, int64_t ld, int64_t count, float* dx) {
  const Padded pd(g);
  const int64_t chw = g.in_channels * g.in_h * g.in_w, plane = g.in_channels * pd.area;
  const int64_t pq = g.out_h() * g.out_w();
  float* dxp = dx;
  if (g.pad > 0) dxp = scratch(ScratchSlot::kPadded, static_cast<size_t>(count * plane));
  const int64_t stride = g.pad > 0 ? plane : chw;
  zero_short(dxp, count * stride);
  const RowMover mover(g, pd);
  // Kernel column s before r: consecutive additions into one sample then
  // touch different rows (partly overlapping ones would stall store-to-load
  // forwarding).
  for (int64_t c = 0; c < g.in_channels; ++c) {
    for (int64_t s = 0; s < g.kernel_w; ++s) {
      for (int64_t r = 0; r < g.kernel_h; ++r) {
        const float* src = col + ((c * g.kernel_h + r) * g.kernel_w + s) * ld;
        float* dst = dxp + c * pd.area + r * pd.wp + s;
        for (int64_t i = 0; i < count; ++i) mover.scatter_add(src + i * pq, dst + i * stride);
      }
    }
  }
  if (g.pad == 0) return;
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t c = 0; c < g.in_channels; ++c) {
      for (int64_t h = 0; h < g.in_h; ++h) {
        copy_short(dxp + i * plane + c * pd.area + (h + g.pad) * pd.wp + g.pad,
                   dx + i * chw + (c * g.in_h + h) * g.in_w, g.in_w);
      }
    }
  }
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
