// Batch normalisation on the CPU, parallel over channels. Each pass reads its
// inputs once: the statistics pass sums x and x^2 together, the apply pass
// fuses the ReLU, the backward sums pass sums g' and g' * x together.
// Per-plane partial sums are float (S elements, 8 lanes); planes are added
// in double.
#include <algorithm>
#include <cstring>

#include "nn/cpu/kernels.h"
#include "nn/cpu/simd.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

constexpr int kAcc = 8;  // float accumulators per plane

// sum(a) and sum(a * b) of a, b[0..n), in 8 float lanes: with a = b = x
// the sum and sum of squares of a plane, with a = dy, b = x the gradient sums.
// Inlined: each caller's loop is vectorised for its own operands.
[[gnu::always_inline]] inline void plane_sums(const float* a, const float* b, int64_t n,
                                              double& sum_a, double& sum_ab) {
  float s[kAcc] = {}, q[kAcc] = {};
  int64_t i = 0;
  for (; i + kAcc <= n; i += kAcc) {
    for (int l = 0; l < kAcc; ++l) {
      s[l] += a[i + l];
      q[l] += a[i + l] * b[i + l];
    }
  }
  for (; i < n; ++i) s[0] += a[i], q[0] += a[i] * b[i];
  for (int l = 0; l < kAcc; ++l) sum_a += s[l], sum_ab += q[l];
}

// As above with g' = dy * (y > 0) (a fused ReLU): 16-float vectors with a
// select, which GCC does not make of the scalar loop.
void plane_grad_sums_relu(const float* x, const float* y, const float* dy, int64_t n, double& sum_g,
                          double& sum_gx) {
  v16 s{}, q{};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const v16 g = load16(y + i) > 0.0f ? load16(dy + i) : v16{};
    s += g;
    q += g * load16(x + i);
  }
  float ts = 0.0f, tq = 0.0f;
  for (; i < n; ++i) {
    const float g = y[i] > 0.0f ? dy[i] : 0.0f;
    ts += g, tq += g * x[i];
  }
  for (int l = 0; l < kLanes; ++l) ts += s[l], tq += q[l];
  sum_g += ts;
  sum_gx += tq;
}

void plane_apply(const float* x, float scale, float shift, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale + shift;
}

void plane_apply_relu(const float* x, float scale, float shift, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] * scale + shift;
    y[i] = v < 0.0f ? 0.0f : v;
  }
}

// dx = k * (g' - a - (x - mean) * invstd * b) = g' * k + x * u + w
void plane_backward(const float* x, const float* y, const float* dy, float k, float u, float w,
                    int64_t n, float* dx) {
  if (y == nullptr) {
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * k + x[i] * u + w;
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float d = dy[i];
    const float g = y[i] > 0.0f ? d : 0.0f;
    dx[i] = g * k + x[i] * u + w;
  }
}

}  // namespace

// x: (N, C, S) -> sum, sumsq: host (C)
void batchnorm_stats(ThreadPool& pool, const BatchNormGeometry& g, const float* x, double* sum,
                     double* sumsq) {
  const int64_t S = g.spatial, CS = g.channels * S;
  pool.parallel_for(g.channels, 1, [=](int64_t c0, int64_t c1, int) {
    for (int64_t c = c0; c < c1; ++c) {
      double s = 0.0, q = 0.0;
      for (int64_t n = 0; n < g.batch; ++n)
        plane_sums(x + n * CS + c * S, x + n * CS + c * S, S, s, q);
      sum[c] = s;
      sumsq[c] = q;
    }
  });
}

// x, y: (N, C, S); coef: (2, C)
void batchnorm_apply(ThreadPool& pool, const BatchNormGeometry& g, const float* x,
                     const float* coef, bool relu, float* y) {
  const int64_t S = g.spatial, C = g.channels;
  pool.parallel_for(g.batch * C, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, S)),
                    [=](int64_t i0, int64_t i1, int) {
                      for (int64_t i = i0; i < i1; ++i) {
                        const int64_t c = i % C;
                        if (relu) {
                          plane_apply_relu(x + i * S, coef[c], coef[C + c], S, y + i * S);
                        } else {
                          plane_apply(x + i * S, coef[c], coef[C + c], S, y + i * S);
                        }
                      }
                    });
}

// x, y, dy: (N, C, S); coef: (2, C) -> sum_dy, sum_dy_xhat: host (C)
void batchnorm_backward_sums(ThreadPool& pool, const BatchNormGeometry& g, const float* x,
                             const float* y, const float* dy, const float* coef, double* sum_dy,
                             double* sum_dy_xhat) {
  const int64_t S = g.spatial, C = g.channels, CS = C * S;
  pool.parallel_for(C, 1, [=](int64_t c0, int64_t c1, int) {
    for (int64_t c = c0; c < c1; ++c) {
      double sg = 0.0, sgx = 0.0;
      for (int64_t n = 0; n < g.batch; ++n) {
        const int64_t at = n * CS + c * S;
        if (y == nullptr) {
          plane_sums(dy + at, x + at, S, sg, sgx);
        } else {
          plane_grad_sums_relu(x + at, y + at, dy + at, S, sg, sgx);
        }
      }
      sum_dy[c] = sg;
      // sum g' (x - mean) invstd
      sum_dy_xhat[c] = (sgx - static_cast<double>(coef[c]) * sg) * coef[C + c];
    }
  });
}

// x, y, dy, dx: (N, C, S); coef: (5, C)
void batchnorm_backward_apply(ThreadPool& pool, const BatchNormGeometry& g, const float* x,
                              const float* y, const float* dy, const float* coef, float* dx) {
  const int64_t S = g.spatial, C = g.channels;
  pool.parallel_for(g.batch * C, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, S)),
                    [=](int64_t i0, int64_t i1, int) {
                      for (int64_t i = i0; i < i1; ++i) {
                        const int64_t c = i % C;
                        const float mean = coef[c], invstd = coef[C + c], k = coef[2 * C + c];
                        const float a = coef[3 * C + c], b = coef[4 * C + c];
                        const float u = -k * invstd * b;  // coefficient of x
                        const float w = -k * a - u * mean;
                        plane_backward(x + i * S, y == nullptr ? nullptr : y + i * S, dy + i * S, k,
                                       u, w, S, dx + i * S);
                      }
                    });
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
