// Max pooling on the CPU, parallel over (n, c) planes. As in PyTorch, a
// window's maximum is its first element v with v > max or v NaN (scanning
// rows then columns), and the backward pass routes the gradient to that
// element only. The common 2x2, stride-2 case has its own unrolled loops.
#include <algorithm>
#include <cmath>
#include <limits>

#include "nn/cpu/kernels.h"
#include "nn/cpu/simd.h"

namespace lockstep::nn::cpu {
namespace {

constexpr float kLowest = -std::numeric_limits<float>::infinity();

inline bool takes_over(float v, float best) {
  return v > best || std::isnan(v);
}

// Planes per chunk: about 16K input elements.
int64_t plane_grain(const Pool2dGeometry& g) {
  return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, g.in_h * g.in_w));
}

// Offset (r * W + s) of the first maximum of the window at (p, q).
inline int64_t argmax_window(const Pool2dGeometry& g, const float* plane, int64_t p, int64_t q) {
  const float* base = plane + p * g.stride * g.in_w + q * g.stride;
  float best = kLowest;
  int64_t at = 0;
  for (int64_t r = 0; r < g.kernel; ++r) {
    for (int64_t s = 0; s < g.kernel; ++s) {
      const float v = base[r * g.in_w + s];
      if (takes_over(v, best)) best = v, at = r * g.in_w + s;
    }
  }
  return p * g.stride * g.in_w + q * g.stride + at;
}

// x: (H, W) -> y: (P, Q), 2x2 windows, stride 2. Branch-free so that the
// compiler vectorises over q.
void forward_plane_2x2(const Pool2dGeometry& g, const float* x, float* y) {
  const int64_t P = g.out_h(), Q = g.out_w(), W = g.in_w;
  for (int64_t p = 0; p < P; ++p) {
    const float* r0 = x + 2 * p * W;
    const float* r1 = r0 + W;
    float* out = y + p * Q;
    for (int64_t q = 0; q < Q; ++q) {
      const float a = r0[2 * q], b = r0[2 * q + 1], c = r1[2 * q], d = r1[2 * q + 1];
      float best = a;
      best = takes_over(b, best) ? b : best;
      best = takes_over(c, best) ? c : best;
      best = takes_over(d, best) ? d : best;
      out[q] = best;
    }
  }
}

using v8i = int32_t __attribute__((vector_size(32)));

inline v8i takes_over8(v8 v, v8 best) {
  return (v > best) | (v != v);
}

// Gradients of 2x2 windows q with their four candidates a b (row 0), c d
// (row 1): the winner is d if it takes over, else c if it does, else b if
// it does, else a.
inline void window_grads(float a, float b, float c, float d, float g, float* d0, float* d1) {
  const bool tb = takes_over(b, a);
  const float ab = tb ? b : a;
  const bool tc = takes_over(c, ab);
  const bool td = takes_over(d, tc ? c : ab);
  d0[0] = !tb && !tc && !td ? g : 0.0f;
  d0[1] = tb && !tc && !td ? g : 0.0f;
  d1[0] = tc && !td ? g : 0.0f;
  d1[1] = td ? g : 0.0f;
}

// The same for 8 windows at once: r0, r1 and d0, d1 hold 16 columns.
inline void window_grads8(const float* r0, const float* r1, const float* grad, float* d0,
                          float* d1) {
  const v16 top = load16(r0), bottom = load16(r1);
  const v8 a = __builtin_shufflevector(top, top, 0, 2, 4, 6, 8, 10, 12, 14);
  const v8 b = __builtin_shufflevector(top, top, 1, 3, 5, 7, 9, 11, 13, 15);
  const v8 c = __builtin_shufflevector(bottom, bottom, 0, 2, 4, 6, 8, 10, 12, 14);
  const v8 d = __builtin_shufflevector(bottom, bottom, 1, 3, 5, 7, 9, 11, 13, 15);
  const v8i tb = takes_over8(b, a);
  const v8 ab = tb ? b : a;
  const v8i tc = takes_over8(c, ab);
  const v8i td = takes_over8(d, tc ? c : ab);
  const v8 g = load8(grad), zero = {};
  const v8 ga = (tb | tc | td) ? zero : g;
  const v8 gb = (tb & ~(tc | td)) ? g : zero;
  const v8 gc = (tc & ~td) ? g : zero;
  const v8 gd = td ? g : zero;
  store16(d0,
          __builtin_shufflevector(ga, gb, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
  store16(d1,
          __builtin_shufflevector(gc, gd, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
}

// x, dx: (H, W); dy: (P, Q); 2x2 windows, stride 2 (they tile the image)
void backward_plane_2x2(const Pool2dGeometry& g, const float* x, const float* dy, float* dx) {
  const int64_t P = g.out_h(), Q = g.out_w(), W = g.in_w;
  std::fill(dx + 2 * P * W, dx + g.in_h * W, 0.0f);  // rows no window covers
  for (int64_t p = 0; p < P; ++p) {
    const float* r0 = x + 2 * p * W;
    const float* r1 = r0 + W;
    float* d0 = dx + 2 * p * W;
    float* d1 = d0 + W;
    const float* grad = dy + p * Q;
    int64_t q = 0;
    for (; q + 8 <= Q; q += 8)
      window_grads8(r0 + 2 * q, r1 + 2 * q, grad + q, d0 + 2 * q, d1 + 2 * q);
    for (; q < Q; ++q) {
      window_grads(r0[2 * q], r0[2 * q + 1], r1[2 * q], r1[2 * q + 1], grad[q], d0 + 2 * q,
                   d1 + 2 * q);
    }
    if (W > 2 * Q) {  // odd width: the last column is in no window
      d0[W - 1] = 0.0f;
      d1[W - 1] = 0.0f;
    }
  }
}

void forward_plane(const Pool2dGeometry& g, const float* x, float* y) {
  const int64_t P = g.out_h(), Q = g.out_w();
  for (int64_t p = 0; p < P; ++p) {
    for (int64_t q = 0; q < Q; ++q) y[p * Q + q] = x[argmax_window(g, x, p, q)];
  }
}

void backward_plane(const Pool2dGeometry& g, const float* x, const float* dy, float* dx) {
  const int64_t P = g.out_h(), Q = g.out_w();
  std::fill(dx, dx + g.in_h * g.in_w, 0.0f);
  for (int64_t p = 0; p < P; ++p) {
    for (int64_t q = 0; q < Q; ++q) dx[argmax_window(g, x, p, q)] += dy[p * Q + q];
  }
}

}  // namespace

// x: (N, C, H, W) -> y: (N, C, P, Q)
void maxpool2d_forward(ThreadPool& pool, const Pool2dGeometry& g, const float* x, float* y) {
  const int64_t hw = g.in_h * g.in_w, pq = g.out_h() * g.out_w();
  const bool two = g.kernel == 2 && g.stride == 2;
  pool.parallel_for(g.batch * g.channels, plane_grain(g), [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      if (two) {
        forward_plane_2x2(g, x + i * hw, y + i * pq);
      } else {
        forward_plane(g, x + i * hw, y + i * pq);
      }
    }
  });
}

// x, dx: (N, C, H, W); dy: (N, C, P, Q)
void maxpool2d_backward(ThreadPool& pool, const Pool2dGeometry& g, const float* x, const float* dy,
                        float* dx) {
  const int64_t hw = g.in_h * g.in_w, pq = g.out_h() * g.out_w();
  const bool two = g.kernel == 2 && g.stride == 2;
  pool.parallel_for(g.batch * g.channels, plane_grain(g), [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      if (two) {
        backward_plane_2x2(g, x + i * hw, dy + i * pq, dx + i * hw);
      } else {
        backward_plane(g, x + i * hw, dy + i * pq, dx + i * hw);
      }
    }
  });
}

}  // namespace lockstep::nn::cpu
