// Optimizer updates on the CPU: the element updates of
// nn/optimizer_updates.h over ranges of the arrays, in parallel.
#include "nn/cpu/kernels.h"
#include "nn/optimizer_updates.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

constexpr int64_t kElementGrain = int64_t{1} << 15;

// Elements [b, e), in functions of their own taking the parameters by value
// and plain pointers so that the compiler vectorises them.
void sgd_range(const SgdParams p, float* w, const float* grad, float* velocity, int64_t b,
               int64_t e) {
  for (int64_t i = b; i < e; ++i) sgd_element(p, w, grad, velocity, i);
}

void adam_range(const AdamFactors f, float* w, const float* grad, float* m, float* v, int64_t b,
                int64_t e) {
  for (int64_t i = b; i < e; ++i) adam_element(f, w, grad, m, v, i);
}

}  // namespace

// w, grad, velocity: (n).
void sgd_update(ThreadPool& pool, int64_t n, const SgdParams& p, float* w, const float* grad,
                float* velocity) {
  pool.parallel_for(n, kElementGrain,
                    [=, &p](int64_t b, int64_t e, int) { sgd_range(p, w, grad, velocity, b, e); });
}

// w, grad, m, v: (n).
void adam_update(ThreadPool& pool, int64_t n, const AdamParams& p, float* w, const float* grad,
                 float* m, float* v) {
  const AdamFactors f = adam_factors(p);
  pool.parallel_for(n, kElementGrain,
                    [=, &f](int64_t b, int64_t e, int) { adam_range(f, w, grad, m, v, b, e); });
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
