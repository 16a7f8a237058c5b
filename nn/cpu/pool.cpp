// Max pooling on the CPU, parallel over (n, c) planes. As in PyTorch, a
// window's maximum is its first element v with v > max or v NaN (scanning
// rows then columns), and the backward pass routes the gradient to that
// element only. The common 2x2, stride-2 case is vectorised in pool_2x2.cpp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "nn/cpu/kernels.h"
#include "nn/cpu/pool_2x2.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
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

bool vector_2x2(const Pool2dGeometry& g) {
  return g.kernel == 2 && g.stride == 2;
}

}  // namespace

// x: (N, C, H, W) -> y: (N, C, P, Q)
void maxpool2d_forward(ThreadPool& pool, const Pool2dGeometry& g, const float* x, float* y) {
  const int64_t hw = g.in_h * g.in_w, pq = g.out_h() * g.out_w();
  const bool two = vector_2x2(g);
  pool.parallel_for(g.batch * g.channels, plane_grain(g), [&](int64_t i0, int64_t i1, int) {
    if (two) return maxpool2x2_forward(g, x, y, i0, i1);
    for (int64_t i = i0; i < i1; ++i) forward_plane(g, x + i * hw, y + i * pq);
  });
}

// x, dx: (N, C, H, W); dy: (N, C, P, Q)
void maxpool2d_backward(ThreadPool& pool, const Pool2dGeometry& g, const float* x, const float* dy,
                        float* dx) {
  const int64_t hw = g.in_h * g.in_w, pq = g.out_h() * g.out_w();
  const bool two = vector_2x2(g);
  pool.parallel_for(g.batch * g.channels, plane_grain(g), [&](int64_t i0, int64_t i1, int) {
    if (two) return maxpool2x2_backward(g, x, dy, dx, i0, i1);
    for (int64_t i = i0; i < i1; ++i) backward_plane(g, x + i * hw, dy + i * pq, dx + i * hw);
  });
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
