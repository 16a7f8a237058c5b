// Optimizer updates on CUDA: the element updates of nn/optimizer_updates.h,
// one thread per element (Adam's factors computed on the host, in double,
// as on the CPU).
#include "nn/cuda/kernels.h"
#include "nn/cuda/launch.cuh"
#include "nn/optimizer_updates.h"

namespace lockstep::nn::cuda {
namespace {

// w, grad, velocity: (n)
__global__ void sgd_kernel(int64_t n, SgdParams p, float* w, const float* grad, float* velocity) {
  CUDA_KERNEL_LOOP(i, n) {
    sgd_element(p, w, grad, velocity, i);
  }
}

// w, grad, m, v: (n)
__global__ void adam_kernel(int64_t n, AdamFactors f, float* w, const float* grad, float* m,
                            float* v) {
  CUDA_KERNEL_LOOP(i, n) {
    adam_element(f, w, grad, m, v, i);
  }
}

}  // namespace

void sgd_update(DeviceContext& ctx, int64_t n, const SgdParams& p, float* w, const float* grad,
                float* velocity) {
  launch(sgd_kernel, n, ctx.stream(), n, p, w, grad, velocity);
}

void adam_update(DeviceContext& ctx, int64_t n, const AdamParams& p, float* w, const float* grad,
                 float* m, float* v) {
  launch(adam_kernel, n, ctx.stream(), n, adam_factors(p), w, grad, m, v);
}

}  // namespace lockstep::nn::cuda
