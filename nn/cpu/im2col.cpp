// im2col / col2im through a zero-padded copy of the sample: with the padding
// in memory, column-matrix row (c, r, s) is, for each output row p, the Q
// elements xp[c, p*stride + r, s + q*stride] (q < Q) with no bounds checks.
// For stride 1 those are Q contiguous floats, copied with a move whose
// width is fixed at compile time for Q <= 16 (small planes would otherwise
// pay a call or a loop per handful of floats).
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

// dst[p*Q + q] = src[p*src_stride + q] for p < rows, q < Q (Q fixed).
template <int Q>
void copy_rows(const float* src, int64_t src_stride, float* dst, int64_t rows) {
  for (int64_t p = 0; p < rows; ++p)
    std::memcpy(dst + p * Q, src + p * src_stride, sizeof(float) * Q);
}

// dst[p*dst_stride + q] += src[p*Q + q] for p < rows, q < Q (Q fixed).
template <int Q>
void add_rows(const float* src, float* dst, int64_t dst_stride, int64_t rows) {
  for (int64_t p = 0; p < rows; ++p) {
    float* d = dst + p * dst_stride;
    for (int q = 0; q < Q; ++q) d[q] += src[p * Q + q];
  }
}

using CopyRows = void (*)(const float*, int64_t, float*, int64_t);
using AddRows = void (*)(const float*, float*, int64_t, int64_t);

template <int... Qs>
CopyRows pick_copy(int64_t q, std::integer_sequence<int, Qs...>) {
  CopyRows f = nullptr;
  ((q == Qs + 1 ? (f = copy_rows<Qs + 1>, 0) : 0), ...);
  return f;
}
template <int... Qs>
AddRows pick_add(int64_t q, std::integer_sequence<int, Qs...>) {
  AddRows f = nullptr;
  ((q == Qs + 1 ? (f = add_rows<Qs + 1>, 0) : 0), ...);
  return f;
}

// Output rows p of one column-matrix row, read from the padded plane at
// `src` (element (p, q) at src[p * row_step + q * stride]).
struct RowMover {
  int64_t P, Q, stride, row_step;
  CopyRows copy = nullptr;  // fixed-width kernels for stride 1, Q <= 16
  AddRows add = nullptr;

  RowMover(const Conv2dGeometry& g, const Padded& pd)
      : P(g.out_h()), Q(g.out_w()), stride(g.stride), row_step(g.stride * pd.wp) {
    if (stride == 1) {
      copy = pick_copy(Q, std::make_integer_sequence<int, 16>{});
      add = pick_add(Q, std::make_integer_sequence<int, 16>{});
    }
  }
  void gather(const float* src, float* dst) const {
    if (copy) return copy(src, row_step, dst, P);
    for (int64_t p = 0; p < P; ++p) {
      if (stride == 1) {
        copy_short(src + p * row_step, dst + p * Q, Q);
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
