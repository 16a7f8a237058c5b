// Max-pool backward on CUDA (the forward is cuDNN's: cudnn_ops.cpp). As on
// the CPU (nn/cpu/pool.cpp), a window's maximum is its first element v with
// v > max or v NaN, scanning rows then columns, and only that element gets
// the window's gradient.
//
// One thread per *input* element gathers the gradients of the windows that
// chose it, in window order (p, then q): no atomics, deterministic, and the
// same additions in the same order as the CPU's scatter loop.
#include "nn/cuda/kernels.h"
#include "nn/cuda/launch.cuh"

namespace lockstep::nn::cuda {
namespace {

__device__ inline bool takes_over(float v, float best) {
  return v > best || isnan(v);
}

// Offset (r * W + s) within the plane of the first maximum of window (p, q).
__device__ int64_t argmax_window(int64_t kernel, int64_t stride, int64_t in_w, const float* plane,
                                 int64_t p, int64_t q) {
  const int64_t origin = p * stride * in_w + q * stride;
  float best = -INFINITY;
  int64_t at = 0;
  for (int64_t r = 0; r < kernel; ++r) {
    for (int64_t s = 0; s < kernel; ++s) {
      const float v = plane[origin + r * in_w + s];
      if (takes_over(v, best)) best = v, at = r * in_w + s;
    }
  }
  return origin + at;
}

// First window index (along one axis) whose window covers position h.
__device__ inline int64_t first_window(int64_t h, int64_t kernel, int64_t stride) {
  return h < kernel ? 0 : (h - kernel) / stride + 1;
}

// x, dx: (N, C, H, W); dy: (N, C, P, Q)
__global__ void maxpool_backward_kernel(int64_t planes, int64_t in_h, int64_t in_w, int64_t out_h,
                                        int64_t out_w, int64_t kernel, int64_t stride,
                                        const float* x, const float* dy, float* dx) {
  const int64_t hw = in_h * in_w, pq = out_h * out_w;
  CUDA_KERNEL_LOOP(i, planes * hw) {
    const int64_t plane = i / hw, at = i % hw, h = at / in_w, w = at % in_w;
    const float* xp = x + plane * hw;
    const float* dyp = dy + plane * pq;
    const int64_t p1 = min(out_h - 1, h / stride), q1 = min(out_w - 1, w / stride);
    float grad = 0.0f;
    for (int64_t p = first_window(h, kernel, stride); p <= p1; ++p) {
      for (int64_t q = first_window(w, kernel, stride); q <= q1; ++q) {
        if (argmax_window(kernel, stride, in_w, xp, p, q) == at) grad += dyp[p * out_w + q];
      }
    }
    dx[i] = grad;
  }
}

}  // namespace

// x, dx: (N, C, H, W); dy: (N, C, P, Q)
void maxpool2d_backward(DeviceContext& ctx, const Pool2dGeometry& g, const float* x,
                        const float* dy, float* dx) {
  const int64_t planes = g.batch * g.channels;
  launch(maxpool_backward_kernel, planes * g.in_h * g.in_w, ctx.stream(), planes, g.in_h, g.in_w,
         g.out_h(), g.out_w(), g.kernel, g.stride, x, dy, dx);
}

}  // namespace lockstep::nn::cuda
