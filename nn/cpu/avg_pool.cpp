// Average pooling, global average pooling (row means) and the zero-padded
// strided shortcut of CIFAR ResNets, on the CPU, parallel over (n, c) planes.
#include <algorithm>
#include <cstring>

#include "nn/cpu/kernels.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

int64_t plane_grain(int64_t plane) {
  return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, plane));
}

}  // namespace

// x: (N, C, H, W) -> y: (N, C, P, Q)
void avgpool2d_forward(ThreadPool& pool, const Pool2dGeometry& g, const float* x, float* y) {
  const int64_t H = g.in_h, W = g.in_w, P = g.out_h(), Q = g.out_w();
  const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
  pool.parallel_for(g.batch * g.channels, plane_grain(H * W), [=](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* xp = x + i * H * W;
      for (int64_t p = 0; p < P; ++p) {
        for (int64_t q = 0; q < Q; ++q) {
          float s = 0.0f;
          for (int64_t r = 0; r < g.kernel; ++r) {
            const float* row = xp + (p * g.stride + r) * W + q * g.stride;
            for (int64_t t = 0; t < g.kernel; ++t) s += row[t];
          }
          y[(i * P + p) * Q + q] = s * inv;
        }
      }
    }
  });
}

// dy: (N, C, P, Q) -> dx: (N, C, H, W)
void avgpool2d_backward(ThreadPool& pool, const Pool2dGeometry& g, const float* dy, float* dx) {
  const int64_t H = g.in_h, W = g.in_w, P = g.out_h(), Q = g.out_w();
  const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
  pool.parallel_for(g.batch * g.channels, plane_grain(H * W), [=](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      float* dp = dx + i * H * W;
      std::fill(dp, dp + H * W, 0.0f);
      for (int64_t p = 0; p < P; ++p) {
        for (int64_t q = 0; q < Q; ++q) {
          const float v = dy[(i * P + p) * Q + q] * inv;
          for (int64_t r = 0; r < g.kernel; ++r) {
            float* row = dp + (p * g.stride + r) * W + q * g.stride;
            for (int64_t t = 0; t < g.kernel; ++t) row[t] += v;
          }
        }
      }
    }
  });
}

// x: (rows, cols) -> y: (rows)
void row_mean_forward(ThreadPool& pool, int64_t rows, int64_t cols, const float* x, float* y) {
  const float inv = 1.0f / static_cast<float>(cols);
  pool.parallel_for(rows, plane_grain(cols), [=](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      float s = 0.0f;
      for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c];
      y[r] = s * inv;
    }
  });
}

// dy: (rows) -> dx: (rows, cols)
void row_mean_backward(ThreadPool& pool, int64_t rows, int64_t cols, const float* dy, float* dx) {
  const float inv = 1.0f / static_cast<float>(cols);
  pool.parallel_for(rows, plane_grain(cols), [=](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) std::fill(dx + r * cols, dx + (r + 1) * cols, dy[r] * inv);
  });
}

// x: (N, C, H, W) -> y: (N, K, P, Q)
void channel_pad_forward(ThreadPool& pool, const ChannelPadGeometry& g, const float* x, float* y) {
  const int64_t H = g.in_h, W = g.in_w, P = g.out_h(), Q = g.out_w(), K = g.out_channels;
  pool.parallel_for(g.batch * K, plane_grain(P * Q), [=](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t n = i / K, c = i % K - g.pad_before;
      float* yp = y + i * P * Q;
      if (c < 0 || c >= g.in_channels) {
        std::fill(yp, yp + P * Q, 0.0f);
        continue;
      }
      const float* xp = x + (n * g.in_channels + c) * H * W;
      for (int64_t p = 0; p < P; ++p) {
        for (int64_t q = 0; q < Q; ++q) yp[p * Q + q] = xp[p * g.stride * W + q * g.stride];
      }
    }
  });
}

// dy: (N, K, P, Q) -> dx: (N, C, H, W)
void channel_pad_backward(ThreadPool& pool, const ChannelPadGeometry& g, const float* dy,
                          float* dx) {
  const int64_t H = g.in_h, W = g.in_w, P = g.out_h(), Q = g.out_w(), K = g.out_channels;
  const int64_t C = g.in_channels;
  pool.parallel_for(g.batch * C, plane_grain(H * W), [=](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t n = i / C, c = i % C;
      float* xp = dx + i * H * W;
      if (g.stride != 1) std::fill(xp, xp + H * W, 0.0f);
      const float* yp = dy + (n * K + c + g.pad_before) * P * Q;
      for (int64_t p = 0; p < P; ++p) {
        for (int64_t q = 0; q < Q; ++q) xp[p * g.stride * W + q * g.stride] = yp[p * Q + q];
      }
    }
  });
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
