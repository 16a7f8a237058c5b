// Optimizer updates on the CPU, element-wise with PyTorch's formulas and
// operation order (torch.optim.SGD, torch.optim.Adam without amsgrad).
#include <cmath>

#include "nn/cpu/kernels.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

constexpr int64_t kElementGrain = int64_t{1} << 15;

// Elements [b, e) of sgd_update, in a function of its own taking plain
// pointers so that the compiler vectorises it.
void sgd_range(const SgdParams& p, float* w, const float* grad, float* velocity, int64_t b,
               int64_t e) {
  const float wd = p.weight_decay, mu = p.momentum, keep = 1.0f - p.dampening, lr = p.lr;
  const float scale = p.grad_scale;
  const bool momentum = mu != 0.0f, first = p.first_step, nesterov = p.nesterov;
  for (int64_t i = b; i < e; ++i) {
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

}  // namespace

// w, grad, velocity: (n).
//   g = grad * grad_scale + wd * w
//   v = first_step ? g : momentum * v + (1 - dampening) * g     (momentum != 0)
//   g = nesterov ? g + momentum * v : v                          (momentum != 0)
//   w = w - lr * g
void sgd_update(ThreadPool& pool, int64_t n, const SgdParams& p, float* w, const float* grad,
                float* velocity) {
  pool.parallel_for(n, kElementGrain,
                    [=, &p](int64_t b, int64_t e, int) { sgd_range(p, w, grad, velocity, b, e); });
}

// w, grad, m, v: (n).
//   g = grad * grad_scale + wd * w
//   m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2
//   w = w - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// The bias corrections and 1 - b1, 1 - b2 are computed in double, as PyTorch
// does in Python, then rounded to float.
void adam_update(ThreadPool& pool, int64_t n, const AdamParams& p, float* w, const float* grad,
                 float* m, float* v) {
  const double t = static_cast<double>(p.step);
  const float step_size = static_cast<float>(p.lr / (1.0 - std::pow(p.beta1, t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(p.beta2, t)));
  const float b1 = static_cast<float>(p.beta1), b2 = static_cast<float>(p.beta2);
  const float c1 = static_cast<float>(1.0 - p.beta1), c2 = static_cast<float>(1.0 - p.beta2);
  const float eps = p.eps, wd = p.weight_decay, scale = p.grad_scale;
  pool.parallel_for(n, kElementGrain, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const float gs = grad[i] * scale;
      const float g = wd != 0.0f ? gs + wd * w[i] : gs;
      const float mi = b1 * m[i] + c1 * g;
      const float vi = b2 * v[i] + c2 * g * g;
      m[i] = mi;
      v[i] = vi;
      const float denom = std::sqrt(vi) / bc2_sqrt + eps;
      w[i] = w[i] - step_size * (mi / denom);
    }
  });
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
