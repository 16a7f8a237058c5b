// Element-wise ops on CUDA: dropout and the small vector helpers, one
// thread per element (grid-stride), each the CPU loop body of
// nn/cpu/elementwise.cpp. (ReLU goes through cuDNN: cudnn_ops.cpp.)
#include "nn/counter_rng.h"
#include "nn/cuda/kernels.h"
#include "nn/cuda/launch.cuh"

namespace lockstep::nn::cuda {
namespace {

// sample_ids: (N); mask: (N, C). mask[n, c] = keep when
// counter_uniform(key, sample_ids[n] * C + c) >= p, else 0: the CPU formula.
__global__ void dropout_mask_kernel(int64_t batch, int64_t channels, const int64_t* sample_ids,
                                    uint64_t key, float p, float keep, float* mask) {
  CUDA_KERNEL_LOOP(i, batch * channels) {
    const int64_t n = i / channels, c = i % channels;
    const uint64_t counter =
        static_cast<uint64_t>(sample_ids[n]) * static_cast<uint64_t>(channels) +
        static_cast<uint64_t>(c);
    mask[i] = counter_uniform(key, counter) >= p ? keep : 0.0f;
  }
}

// x, y: (N, C, S); mask: (N, C); y = x * mask (x and y may alias)
__global__ void dropout_apply_kernel(int64_t count, int64_t spatial, const float* mask,
                                     const float* x, float* y) {
  CUDA_KERNEL_LOOP(i, count) {
    y[i] = x[i] * mask[i / spatial];
  }
}

__global__ void fill_kernel(int64_t n, float value, float* x) {
  CUDA_KERNEL_LOOP(i, n) {
    x[i] = value;
  }
}

__global__ void scale_kernel(int64_t n, float alpha, float* x) {
  CUDA_KERNEL_LOOP(i, n) {
    x[i] *= alpha;
  }
}

__global__ void axpy_kernel(int64_t n, float alpha, const float* x, float* y) {
  CUDA_KERNEL_LOOP(i, n) {
    y[i] += alpha * x[i];
  }
}

// The CPU's expressions (nn/cpu/elementwise.cpp): x < 0 ? 0 : x keeps NaN
// and -0.0; dx = dy where y > 0, so 0 where y is NaN.
__global__ void relu_forward_kernel(int64_t n, const float* x, float* y) {
  CUDA_KERNEL_LOOP(i, n) {
    const float v = x[i];
    y[i] = v < 0.0f ? 0.0f : v;
  }
}

__global__ void relu_backward_kernel(int64_t n, const float* y, const float* dy, float* dx) {
  CUDA_KERNEL_LOOP(i, n) {
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  }
}

__global__ void relu_backward_accumulate_kernel(int64_t n, const float* y, const float* dy,
                                                float* dx) {
  CUDA_KERNEL_LOOP(i, n) {
    dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;
  }
}

// Sets *flag to 1 when some x[i] is an infinity or NaN (racing writes of
// the same value).
__global__ void non_finite_flag_kernel(int64_t n, const float* x, int* flag) {
  CUDA_KERNEL_LOOP(i, n) {
    if (!isfinite(x[i])) *flag = 1;
  }
}

}  // namespace

// x, y: (N, C, S); mask: (N, C); sample_ids: host (N)
void dropout_forward(DeviceContext& ctx, const DropoutGeometry& g, const int64_t* sample_ids,
                     const float* x, float* y, float* mask) {
  if (g.batch == 0) return;
  int64_t* ids = ctx.scratch<int64_t>(Scratch::kSampleIds, g.batch);
  ctx.copy_to_device(ids, sample_ids, static_cast<size_t>(g.batch) * sizeof(int64_t));
  dropout_forward_device_ids(ctx, g, ids, x, y, mask);
}

// The same with sample_ids: device (N)
void dropout_forward_device_ids(DeviceContext& ctx, const DropoutGeometry& g,
                                const int64_t* sample_ids, const float* x, float* y, float* mask) {
  if (g.batch == 0) return;
  const uint64_t key = hash_combine(g.seed, g.stream);
  const float keep = 1.0f / (1.0f - g.p);
  launch(dropout_mask_kernel, g.batch * g.channels, ctx.stream(), g.batch, g.channels, sample_ids,
         key, g.p, keep, mask);
  const int64_t count = g.batch * g.channels * g.spatial;
  launch(dropout_apply_kernel, count, ctx.stream(), count, g.spatial,
         static_cast<const float*>(mask), x, y);
}

// dy, dx: (N, C, S); mask: (N, C); dx = dy * mask (dy and dx may alias)
void dropout_backward(DeviceContext& ctx, const DropoutGeometry& g, const float* mask,
                      const float* dy, float* dx) {
  const int64_t count = g.batch * g.channels * g.spatial;
  launch(dropout_apply_kernel, count, ctx.stream(), count, g.spatial, mask, dy, dx);
}

void fill(DeviceContext& ctx, int64_t n, float value, float* x) {
  launch(fill_kernel, n, ctx.stream(), n, value, x);
}

void scale(DeviceContext& ctx, int64_t n, float alpha, float* x) {
  launch(scale_kernel, n, ctx.stream(), n, alpha, x);
}

// y += alpha * x
void axpy(DeviceContext& ctx, int64_t n, float alpha, const float* x, float* y) {
  launch(axpy_kernel, n, ctx.stream(), n, alpha, x, y);
}

// x, y: (n); y = max(x, 0) as the CPU has it; x and y may alias
void relu_forward(DeviceContext& ctx, int64_t n, const float* x, float* y) {
  launch(relu_forward_kernel, n, ctx.stream(), n, x, y);
}

// y, dy, dx: (n); dx = dy where y > 0, else 0; dy and dx may alias
void relu_backward(DeviceContext& ctx, int64_t n, const float* y, const float* dy, float* dx) {
  launch(relu_backward_kernel, n, ctx.stream(), n, y, dy, dx);
}

void relu_backward_accumulate(DeviceContext& ctx, int64_t n, const float* y, const float* dy,
                              float* dx) {
  launch(relu_backward_accumulate_kernel, n, ctx.stream(), n, y, dy, dx);
}

// n floats, device to device; src == dst is a no-op, other overlaps are bugs.
void copy(DeviceContext& ctx, int64_t n, const float* src, float* dst) {
  if (n <= 0 || src == dst) return;
  LOCKSTEP_CHECK(src + n <= dst || dst + n <= src, "copy of ", n, " floats between overlapping ",
                 "ranges");
  CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float),
                             cudaMemcpyDeviceToDevice, ctx.stream()));
}

// One flag on the device for all arrays, read back once.
bool any_non_finite(DeviceContext& ctx, std::span<const ConstFloats> arrays) {
  int* flag = ctx.scratch<int>(Scratch::kFlag, 1);
  CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), ctx.stream()));
  for (const ConstFloats& a : arrays) {
    if (a.n > 0) launch(non_finite_flag_kernel, a.n, ctx.stream(), a.n, a.data, flag);
  }
  int found = 0;
  ctx.copy_to_host(&found, flag, sizeof(int));
  return found != 0;
}

}  // namespace lockstep::nn::cuda
