// The element-wise updates of SGD and Adam with PyTorch's formulas and
// operation order (torch.optim.SGD, torch.optim.Adam without amsgrad), one
// definition that the CPU (nn/cpu/optimizers.cpp) and CUDA
// (nn/cuda/optimizers.cu) backends both run. The functions have internal
// linkage: the CPU kernels compile this header once per instruction set.
#pragma once

#include <cmath>
#include <cstdint>

#include "nn/backend.h"
#include "nn/host_device.h"

namespace lockstep::nn {

// Element i of w, grad, velocity (velocity: unused without momentum).
//   g = grad * grad_scale + wd * w
//   v = first_step ? g : momentum * v + (1 - dampening) * g     (momentum != 0)
//   g = nesterov ? g + momentum * v : v                          (momentum != 0)
//   w = w - lr * g
LOCKSTEP_HOST_DEVICE static inline void sgd_element(const SgdParams& p, float* w, const float* grad,
                                                    float* velocity, int64_t i) {
  const float gs = grad[i] * p.grad_scale;
  float g = p.weight_decay != 0.0f ? gs + p.weight_decay * w[i] : gs;
  if (p.momentum != 0.0f) {
    const float v = p.first_step ? g : p.momentum * velocity[i] + (1.0f - p.dampening) * g;
    velocity[i] = v;
    g = p.nesterov ? g + p.momentum * v : v;
  }
  w[i] = w[i] - p.lr * g;
}

// AdamParams as the element loop reads them: the bias corrections and
// 1 - b1, 1 - b2 computed in double, as PyTorch does in Python, then
// rounded to float.
struct AdamFactors {
  float step_size;       // lr / (1 - b1^t)
  float bc2_sqrt;        // sqrt(1 - b2^t)
  float b1, b2, c1, c2;  // c1 = 1 - b1, c2 = 1 - b2
  float eps, weight_decay, grad_scale;
};

static inline AdamFactors adam_factors(const AdamParams& p) {
  const double t = static_cast<double>(p.step);
  return {static_cast<float>(p.lr / (1.0 - std::pow(p.beta1, t))),
          static_cast<float>(std::sqrt(1.0 - std::pow(p.beta2, t))),
          static_cast<float>(p.beta1),
          static_cast<float>(p.beta2),
          static_cast<float>(1.0 - p.beta1),
          static_cast<float>(1.0 - p.beta2),
          p.eps,
          p.weight_decay,
          p.grad_scale};
}

// Element i of w, grad, m, v.
//   g = grad * grad_scale + wd * w
//   m = b1 * m + c1 * g;  v = b2 * v + c2 * g^2
//   w = w - step_size * m / (sqrt(v) / bc2_sqrt + eps)
LOCKSTEP_HOST_DEVICE static inline void adam_element(const AdamFactors& f, float* w,
                                                     const float* grad, float* m, float* v,
                                                     int64_t i) {
  const float gs = grad[i] * f.grad_scale;
  const float g = f.weight_decay != 0.0f ? gs + f.weight_decay * w[i] : gs;
  const float mi = f.b1 * m[i] + f.c1 * g;
  const float vi = f.b2 * v[i] + f.c2 * g * g;
  m[i] = mi;
  v[i] = vi;
  const float denom = sqrtf(vi) / f.bc2_sqrt + f.eps;
  w[i] = w[i] - f.step_size * (mi / denom);
}

}  // namespace lockstep::nn
