// Average pooling, row means (global average pooling), the padding shortcut
// of CIFAR ResNets and the residual add, on CUDA. One thread per output
// element (backward: per input element, gathering), no atomics.
#include "nn/cuda/kernels.h"
#include "nn/cuda/launch.cuh"

namespace lockstep::nn::cuda {
namespace {

__global__ void avgpool_forward_kernel(int64_t n, int64_t H, int64_t W, int64_t P, int64_t Q,
                                       int64_t k, int64_t s, const float* x, float* y) {
  CUDA_KERNEL_LOOP(i, n) {
    const int64_t plane = i / (P * Q), p = (i / Q) % P, q = i % Q;
    const float* base = x + plane * H * W + p * s * W + q * s;
    float sum = 0.0f;
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t t = 0; t < k; ++t) sum += base[r * W + t];
    }
    y[i] = sum / static_cast<float>(k * k);
  }
}

__global__ void avgpool_backward_kernel(int64_t n, int64_t H, int64_t W, int64_t P, int64_t Q,
                                        int64_t k, int64_t s, const float* dy, float* dx) {
  CUDA_KERNEL_LOOP(i, n) {
    const int64_t plane = i / (H * W), h = (i / W) % H, w = i % W;
    const int64_t p0 = h < k ? 0 : (h - k) / s + 1, q0 = w < k ? 0 : (w - k) / s + 1;
    const int64_t p1 = min(P - 1, h / s), q1 = min(Q - 1, w / s);
    float sum = 0.0f;
    for (int64_t p = p0; p <= p1; ++p) {
      for (int64_t q = q0; q <= q1; ++q) sum += dy[plane * P * Q + p * Q + q];
    }
    dx[i] = sum / static_cast<float>(k * k);
  }
}

__global__ void row_mean_kernel(int64_t rows, int64_t cols, const float* x, float* y) {
  CUDA_KERNEL_LOOP(r, rows) {
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum += x[r * cols + c];
    y[r] = sum / static_cast<float>(cols);
  }
}

__global__ void row_mean_backward_kernel(int64_t n, int64_t cols, const float* dy, float* dx) {
  CUDA_KERNEL_LOOP(i, n) {
    dx[i] = dy[i / cols] / static_cast<float>(cols);
  }
}

__global__ void channel_pad_kernel(int64_t n, ChannelPadGeometry g, const float* x, float* y) {
  const int64_t P = (g.in_h - 1) / g.stride + 1, Q = (g.in_w - 1) / g.stride + 1;
  const int64_t K = g.out_channels;
  CUDA_KERNEL_LOOP(i, n) {
    const int64_t b = i / (K * P * Q), c = (i / (P * Q)) % K - g.pad_before;
    const int64_t p = (i / Q) % P, q = i % Q;
    y[i] = c < 0 || c >= g.in_channels
               ? 0.0f
               : x[((b * g.in_channels + c) * g.in_h + p * g.stride) * g.in_w + q * g.stride];
  }
}

__global__ void channel_pad_backward_kernel(int64_t n, ChannelPadGeometry g, const float* dy,
                                            float* dx) {
  const int64_t P = (g.in_h - 1) / g.stride + 1, Q = (g.in_w - 1) / g.stride + 1;
  const int64_t H = g.in_h, W = g.in_w;
  CUDA_KERNEL_LOOP(i, n) {
    const int64_t b = i / (g.in_channels * H * W), c = (i / (H * W)) % g.in_channels;
    const int64_t h = (i / W) % H, w = i % W;
    const bool hit = h % g.stride == 0 && w % g.stride == 0;
    dx[i] =
        hit ? dy[((b * g.out_channels + c + g.pad_before) * P + h / g.stride) * Q + w / g.stride]
            : 0.0f;
  }
}

__global__ void add_kernel(int64_t n, const float* a, const float* b, bool relu, float* y) {
  CUDA_KERNEL_LOOP(i, n) {
    const float v = a[i] + b[i];
    y[i] = relu && v < 0.0f ? 0.0f : v;
  }
}

}  // namespace

// x: (N, C, H, W) -> y: (N, C, P, Q)
void avgpool2d_forward(DeviceContext& ctx, const Pool2dGeometry& g, const float* x, float* y) {
  const int64_t n = g.batch * g.channels * g.out_h() * g.out_w();
  launch(avgpool_forward_kernel, n, ctx.stream(), n, g.in_h, g.in_w, g.out_h(), g.out_w(), g.kernel,
         g.stride, x, y);
}

void avgpool2d_backward(DeviceContext& ctx, const Pool2dGeometry& g, const float* dy, float* dx) {
  const int64_t n = g.batch * g.channels * g.in_h * g.in_w;
  launch(avgpool_backward_kernel, n, ctx.stream(), n, g.in_h, g.in_w, g.out_h(), g.out_w(),
         g.kernel, g.stride, dy, dx);
}

void row_mean_forward(DeviceContext& ctx, int64_t rows, int64_t cols, const float* x, float* y) {
  launch(row_mean_kernel, rows, ctx.stream(), rows, cols, x, y);
}

void row_mean_backward(DeviceContext& ctx, int64_t rows, int64_t cols, const float* dy, float* dx) {
  launch(row_mean_backward_kernel, rows * cols, ctx.stream(), rows * cols, cols, dy, dx);
}

void channel_pad_forward(DeviceContext& ctx, const ChannelPadGeometry& g, const float* x,
                         float* y) {
  const int64_t n = g.batch * g.out_channels * g.out_h() * g.out_w();
  launch(channel_pad_kernel, n, ctx.stream(), n, g, x, y);
}

void channel_pad_backward(DeviceContext& ctx, const ChannelPadGeometry& g, const float* dy,
                          float* dx) {
  const int64_t n = g.batch * g.in_channels * g.in_h * g.in_w;
  launch(channel_pad_backward_kernel, n, ctx.stream(), n, g, dy, dx);
}

void add_forward(DeviceContext& ctx, int64_t n, const float* a, const float* b, bool relu,
                 float* y) {
  launch(add_kernel, n, ctx.stream(), n, a, b, relu, y);
}

}  // namespace lockstep::nn::cuda
