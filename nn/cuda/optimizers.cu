// Optimizer updates on CUDA, one thread per element, with the formulas and
// operation order of nn/cpu/optimizers.cpp (torch.optim.SGD, torch.optim.Adam
// without amsgrad). Adam's bias corrections and 1 - b1, 1 - b2 are computed
// on the host in double, exactly as the CPU backend computes them.
#include <cmath>

#include "nn/cuda/kernels.h"
#include "nn/cuda/launch.cuh"

namespace lockstep::nn::cuda {
namespace {

// w, grad, velocity: (n).
//   g = grad * scale + wd * w
//   v = first_step ? g : momentum * v + (1 - dampening) * g     (momentum != 0)
//   g = nesterov ? g + momentum * v : v                          (momentum != 0)
//   w = w - lr * g
__global__ void sgd_kernel(int64_t n, float lr, float scale, float wd, float mu, float keep,
                           bool first, bool nesterov, float* w, const float* grad,
                           float* velocity) {
  const bool momentum = mu != 0.0f;
  CUDA_KERNEL_LOOP(i, n) {
    const float gs = grad[i] * scale;
    float g = wd != 0.0f ? gs + wd * w[i] : gs;
    if (momentum) {
      const float v = first ? g : mu * velocity[i] + keep * g;
      velocity[i] = v;
      g = nesterov ? g + mu * v : v;
    }
    w[i] = w[i] - lr * g;
  }
}

// w, grad, m, v: (n).
//   g = grad * scale + wd * w
//   m = b1 * m + c1 * g;  v = b2 * v + c2 * g^2      (c1 = 1 - b1, c2 = 1 - b2)
//   w = w - step_size * m / (sqrt(v) / bc2_sqrt + eps)
__global__ void adam_kernel(int64_t n, float step_size, float bc2_sqrt, float b1, float b2,
                            float c1, float c2, float eps, float scale, float wd, float* w,
                            const float* grad, float* m, float* v) {
  CUDA_KERNEL_LOOP(i, n) {
    const float gs = grad[i] * scale;
    const float g = wd != 0.0f ? gs + wd * w[i] : gs;
    const float mi = b1 * m[i] + c1 * g;
    const float vi = b2 * v[i] + c2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / bc2_sqrt + eps;
    w[i] = w[i] - step_size * (mi / denom);
  }
}

}  // namespace

void sgd_update(DeviceContext& ctx, int64_t n, const SgdParams& p, float* w, const float* grad,
                float* velocity) {
  launch(sgd_kernel, n, ctx.stream(), n, p.lr, p.grad_scale, p.weight_decay, p.momentum,
         1.0f - p.dampening, p.first_step, p.nesterov, w, grad, velocity);
}

void adam_update(DeviceContext& ctx, int64_t n, const AdamParams& p, float* w, const float* grad,
                 float* m, float* v) {
  const double t = static_cast<double>(p.step);
  const float step_size = static_cast<float>(p.lr / (1.0 - std::pow(p.beta1, t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(p.beta2, t)));
  launch(adam_kernel, n, ctx.stream(), n, step_size, bc2_sqrt, static_cast<float>(p.beta1),
         static_cast<float>(p.beta2), static_cast<float>(1.0 - p.beta1),
         static_cast<float>(1.0 - p.beta2), p.eps, p.grad_scale, p.weight_decay, w, grad, m, v);
}

}  // namespace lockstep::nn::cuda
