// The element-wise add of a residual block, with its ReLU fused.
#include "nn/cpu/kernels.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

constexpr int64_t kElementGrain = int64_t{1} << 15;

void add_range(const float* a, const float* b, float* y, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) y[i] = a[i] + b[i];
}

void add_relu_range(const float* a, const float* b, float* y, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const float v = a[i] + b[i];
    y[i] = v < 0.0f ? 0.0f : v;
  }
}

}  // namespace

// a, b, y: (n)
void add_forward(ThreadPool& pool, int64_t n, const float* a, const float* b, bool relu, float* y) {
  pool.parallel_for(n, kElementGrain, [=](int64_t i0, int64_t i1, int) {
    if (relu) return add_relu_range(a, b, y, i0, i1);
    add_range(a, b, y, i0, i1);
  });
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
