// The arithmetic peak of one core: a loop of independent 512-bit vfmadd
// (fp32, 32 flop each), 256-bit vfmadd (16 flop: the avx2 kernels' peak) or
// vdpbf16ps (bf16 pairs into fp32, 64 flop each)
// instructions, enough accumulators to cover their latency, all held in
// registers (the loop is unrolled over them: an accumulator that goes
// through memory adds a store-to-load round trip to every chain). Compiled
// for those instructions by function attributes; callers check the CPU
// first. Timed in thread CPU time.
#include "bench/peak_flops.h"

#include <immintrin.h>

#include <ctime>

namespace lockstep::bench {
namespace {

constexpr int kAccumulators = 16;
constexpr int64_t kIterations = 20'000'000;

// CPU time of the calling thread: the loop's own cycles, whatever else
// runs on a shared machine.
double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

template <typename F>
double gflops(F&& loop, double flop_per_iteration) {
  loop(kIterations / 10);  // warm-up: clocks up
  const double start = thread_seconds();
  const float sink = loop(kIterations);
  const double s = thread_seconds() - start;
  return sink == 12345.0f ? 0.0 : flop_per_iteration * kIterations / s / 1e9;
}

// The accumulators' sum, read out so that the loops cannot be optimised
// away (after the timed loop, so they stay in registers inside it).
__attribute__((target("avx512f"))) inline float fold(const __m512 (&acc)[kAccumulators]) {
  __m512 s = acc[0];
  for (int i = 1; i < kAccumulators; ++i) s = _mm512_add_ps(s, acc[i]);
  float lanes[16];
  _mm512_storeu_ps(lanes, s);
  return lanes[0] + lanes[15];
}

__attribute__((target("avx512f"))) float fma_loop(int64_t n) {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-6f);
  for (int64_t t = 0; t < n; ++t) {
#pragma GCC unroll 16
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  return fold(acc);
}

__attribute__((target("avx512f,avx512bf16"))) float dot_loop(int64_t n) {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80),
                 b = (__m512bh)_mm512_set1_epi32(0x33803380);
  for (int64_t t = 0; t < n; ++t) {
#pragma GCC unroll 16
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  return fold(acc);
}

// 12 accumulators: with a and b they fill 14 of the 16 AVX registers (16
// spilled to the stack and measured 58% of the real peak).
constexpr int kAvxAccumulators = 12;

__attribute__((target("avx2,fma"))) float fma256_loop(int64_t n) {
  __m256 acc[kAvxAccumulators];
  for (int i = 0; i < kAvxAccumulators; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-6f);
  for (int64_t t = 0; t < n; ++t) {
#pragma GCC unroll 12
    for (int i = 0; i < kAvxAccumulators; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 s = acc[0];
  for (int i = 1; i < kAvxAccumulators; ++i) s = _mm256_add_ps(s, acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  return lanes[0] + lanes[7];
}

}  // namespace

double fp32_fma256_peak_gflops() {
  return gflops(fma256_loop, 16.0 * kAvxAccumulators);
}

double fp32_fma_peak_gflops() {
  return gflops(fma_loop, 32.0 * kAccumulators);
}

double bf16_dot_peak_gflops() {
  return gflops(dot_loop, 64.0 * kAccumulators);
}

}  // namespace lockstep::bench
