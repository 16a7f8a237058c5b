// Element-wise ops on the CPU: activation, dropout and the small vector
// helpers. Plain loops the compiler vectorises, each in a function of its
// own taking plain pointers (inside a chunk lambda that captures by
// reference, GCC reloads the pointers and gives up vectorising); split across
// the pool only when an array is large enough to repay waking a worker.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "nn/counter_rng.h"
#include "nn/cpu/kernels.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

// Elements per chunk below which an element-wise op stays on one thread.
constexpr int64_t kElementGrain = int64_t{1} << 15;

// Dropout rows (n, c) per chunk, so that a chunk covers ~kElementGrain floats.
int64_t dropout_grain(const DropoutGeometry& g) {
  return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, g.spatial));
}

void relu_range(const float* x, float* y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

void relu_grad_range(const float* y, const float* dy, float* dx, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const float g = dy[i];  // loaded unconditionally: a select, not a branch
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

// dx += dy where y > 0: relu_grad_range, then axpy_range with alpha 1
// (1 * g is exact, so the sum is the same with or without a contraction).
void relu_grad_accumulate_range(const float* y, const float* dy, float* dx, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const float g = dy[i];
    dx[i] += y[i] > 0.0f ? g : 0.0f;
  }
}

// y(rows, S) = x(rows, S) * mask(rows) for rows [b, e)
void mask_range(const float* x, const float* mask, int64_t S, float* y, int64_t b, int64_t e) {
  if (S == 1) {
    for (int64_t i = b; i < e; ++i) y[i] = x[i] * mask[i];
    return;
  }
  for (int64_t i = b; i < e; ++i) {
    const float m = mask[i];
    for (int64_t s = 0; s < S; ++s) y[i * S + s] = x[i * S + s] * m;
  }
}

void scale_range(float alpha, float* x, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) x[i] *= alpha;
}

void axpy_range(float alpha, const float* x, float* y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) y[i] += alpha * x[i];
}

}  // namespace

// x, y: (n); y = max(x, 0) (NaN stays NaN, as in PyTorch)
void relu_forward(ThreadPool& pool, int64_t n, const float* x, float* y) {
  pool.parallel_for(n, kElementGrain, [=](int64_t b, int64_t e, int) { relu_range(x, y, b, e); });
}

// y, dy, dx: (n); dx = dy where y > 0, else 0
void relu_backward(ThreadPool& pool, int64_t n, const float* y, const float* dy, float* dx) {
  pool.parallel_for(n, kElementGrain,
                    [=](int64_t b, int64_t e, int) { relu_grad_range(y, dy, dx, b, e); });
}

// y, dy, dx: (n); dx += dy where y > 0
void relu_backward_accumulate(ThreadPool& pool, int64_t n, const float* y, const float* dy,
                              float* dx) {
  pool.parallel_for(n, kElementGrain, [=](int64_t b, int64_t e, int) {
    relu_grad_accumulate_range(y, dy, dx, b, e);
  });
}

// x, y: (N, C, S); mask: (N, C). mask[n, c] = 1/(1-p) when
// counter_uniform(hash_combine(seed, stream), sample_ids[n] * C + c) >= p, else 0.
void dropout_forward(ThreadPool& pool, const DropoutGeometry& g, const int64_t* sample_ids,
                     const float* x, float* y, float* mask) {
  const uint64_t key = hash_combine(g.seed, g.stream);
  const float keep = g.p < 1.0f ? 1.0f / (1.0f - g.p) : 0.0f;  // p = 1 drops everything
  const int64_t C = g.channels, S = g.spatial;
  pool.parallel_for(g.batch * C, dropout_grain(g), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e;) {  // one sample's channels per pass
      const int64_t n = i / C, c0 = i % C, c1 = std::min(C, c0 + (e - i));
      const uint64_t base = static_cast<uint64_t>(sample_ids[n]) * static_cast<uint64_t>(C);
      float* mrow = mask + n * C;
      for (int64_t c = c0; c < c1; ++c) {
        mrow[c] = counter_uniform(key, base + static_cast<uint64_t>(c)) >= g.p ? keep : 0.0f;
      }
      i += c1 - c0;
    }
    mask_range(x, mask, S, y, b, e);
  });
}

// dy, dx: (N, C, S); mask: (N, C); dx = dy * mask
void dropout_backward(ThreadPool& pool, const DropoutGeometry& g, const float* mask,
                      const float* dy, float* dx) {
  const int64_t S = g.spatial;
  pool.parallel_for(g.batch * g.channels, dropout_grain(g),
                    [=](int64_t b, int64_t e, int) { mask_range(dy, mask, S, dx, b, e); });
}

void fill(ThreadPool& pool, int64_t n, float value, float* x) {
  pool.parallel_for(n, kElementGrain,
                    [&](int64_t b, int64_t e, int) { std::fill(x + b, x + e, value); });
}

void scale(ThreadPool& pool, int64_t n, float alpha, float* x) {
  pool.parallel_for(n, kElementGrain,
                    [=](int64_t b, int64_t e, int) { scale_range(alpha, x, b, e); });
}

// y += alpha * x
void axpy(ThreadPool& pool, int64_t n, float alpha, const float* x, float* y) {
  pool.parallel_for(n, kElementGrain,
                    [=](int64_t b, int64_t e, int) { axpy_range(alpha, x, y, b, e); });
}

void copy(ThreadPool& pool, int64_t n, const float* src, float* dst) {
  if (src == dst) return;
  pool.parallel_for(n, 4 * kElementGrain, [&](int64_t b, int64_t e, int) {
    std::memmove(dst + b, src + b, static_cast<size_t>(e - b) * sizeof(float));
  });
}

// Infinity and NaN are the floats whose magnitude bits are at least
// 0x7f800000: an integer max over blocks vectorises (a float sum would not,
// its order being fixed) and stops at the first block holding one.
bool any_non_finite(int64_t n, const float* x) {
  constexpr int64_t kBlock = 4096;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    uint32_t largest = 0;
    for (int64_t i = start; i < end; ++i) {
      largest = std::max(largest, std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu);
    }
    if (largest >= 0x7f800000u) return true;
  }
  return false;
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
