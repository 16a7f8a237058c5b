// Pieces shared by the two CPU convolution algorithms (conv_im2col.cpp and
// conv_wide.cpp) and the dispatching ops in conv.cpp.
#pragma once

#include "nn/cpu/isa_namespace.h"

#include <algorithm>
#include <cstdint>

#include "nn/backend.h"
#include "nn/cpu/thread_pool.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv {

// Sizes of one sample: CRS = C*R*S rows of the column matrix, PQ output
// positions, CHW input and KPQ output elements.
struct Dims {
  int64_t crs, pq, chw, kpq;
  explicit Dims(const Conv2dGeometry& g)
      : crs(g.in_channels * g.kernel_h * g.kernel_w),
        pq(g.out_h() * g.out_w()),
        chw(g.in_channels * g.in_h * g.in_w),
        kpq(g.out_channels * g.out_h() * g.out_w()) {}
};

// Weight matrices up to this many floats use the dot-product kernel for the
// weight gradient; larger ones the packed GEMM (packed_gemm.h), whose cache
// blocking wins there.
inline constexpr int64_t kSmallWeights = int64_t{1} << 14;

// Adds the weight gradient of samples [n0, n1) to dw (K, CRS) and db (K;
// null: no bias, none summed).
// x: (N, C, H, W), dy: (N, K, P, Q).
using FilterChunk = void (*)(const Conv2dGeometry& g, const float* x, const float* dy, int64_t n0,
                             int64_t n1, float* dw, float* db);

// The weight gradient's chunks: chunk c (of `chunks`, samples
// [chunk_begin(batch, chunks, c), chunk_begin(.., c + 1))) runs
// fn(n0, n1, part) on its zeroed partials part = partials + c * stride,
// chunks spread across the pool.
template <typename F>
void for_each_chunk(ThreadPool& pool, int64_t batch, int chunks, float* partials, int64_t stride,
                    F&& fn) {
  pool.parallel_for(chunks, 1, [&](int64_t c0, int64_t c1, int) {
    for (int64_t c = c0; c < c1; ++c) {
      float* part = partials + c * stride;
      std::fill(part, part + stride, 0.0f);
      const int chunk = static_cast<int>(c);
      fn(ThreadPool::chunk_begin(batch, chunks, chunk),
         ThreadPool::chunk_begin(batch, chunks, chunk + 1), part);
    }
  });
}

// Sum of each of the K rows (PQ long) of samples [n0, n1) of dy, added to db.
void accumulate_bias_grad(const Conv2dGeometry& g, const float* dy, int64_t n0, int64_t n1,
                          float* db);

// dst(k, gs*PQ) <- the gs samples' (k, PQ) blocks of src (N, k, PQ) side by
// side; scatter_samples is its inverse.
void gather_samples(const float* src, int64_t gs, int64_t k, const Dims& d, float* dst);
void scatter_samples(const float* src, int64_t gs, int64_t k, const Dims& d, float* dst);

// --- im2col + GEMM (any stride and padding): conv_im2col.cpp ---------------
void im2col_forward(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const float* w,
                    const float* b, float* y);
void im2col_backward_data(ThreadPool& pool, const Conv2dGeometry& g, const float* w,
                          const float* dy, float* dx);
void im2col_filter_chunk(const Conv2dGeometry& g, const float* x, const float* dy, int64_t n0,
                         int64_t n1, float* dw, float* db);

// --- "wide" GEMM over shifted rows of the padded input (stride 1): conv_wide.cpp
// True when the wide algorithm applies (stride 1), suits g (outputs wider
// than 16 columns) and wastes little work on it.
bool wide_applies(const Conv2dGeometry& g);
void wide_forward(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const float* w,
                  const float* b, float* y);
void wide_backward_data(ThreadPool& pool, const Conv2dGeometry& g, const float* w, const float* dy,
                        float* dx);
void wide_filter_chunk(const Conv2dGeometry& g, const float* x, const float* dy, int64_t n0,
                       int64_t n1, float* dw, float* db);

// --- Winograd F(4x4, 3x3) (3x3 kernels, stride 1): conv_winograd{,_filter}.cpp
// True for 3x3 kernels with stride 1, padding <= 2, at least 8 input and
// output channels and outputs of at least 4 x 4. map: of the input x, as
// it is read (ConvInputMap; none where coef is null), in the forward pass
// and the weight gradient.
bool winograd_applies(const Conv2dGeometry& g);
void winograd_forward(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const float* w,
                      const float* b, float* y, const ConvInputMap& map = {});
// The weight gradient in the transformed domain: winograd_sums_size(g)
// floats, (36, K, C) with the channels padded to whole vectors;
// winograd_filter_sums adds those of samples [n0, n1) (one thread).
int64_t winograd_sums_size(const Conv2dGeometry& g);
void winograd_filter_sums(const Conv2dGeometry& g, const float* x, const float* dy, int64_t n0,
                          int64_t n1, float* sums, const ConvInputMap& map = {});
// The sums of the whole batch, as winograd_filter_sums gives them per chunk
// (ThreadPool::chunk_begin of `chunks`) summed in chunk order: the same
// bits, for sums too large for the cache. winograd_filter_sums sweeps all
// of them once per block of tiles; here every block's transformed tiles go
// to `tiles` first (winograd_filter_tiles_size floats), then, parallel
// over the 36 elements e, each chunk's DW(e) is summed in a buffer that
// stays in cache and added to total(e). The size is 0 where that does not
// pay (sums that fit the cache) or the tiles would take too much memory.
int64_t winograd_filter_tiles_size(const Conv2dGeometry& g, int chunks);
void winograd_filter_total(ThreadPool& pool, const Conv2dGeometry& g, int chunks, const float* x,
                           const float* dy, float* tiles, float* total,
                           const ConvInputMap& map = {});
// dw (K, C, 3, 3) <- G^T DW G of the sums.
void winograd_sums_to_filter(ThreadPool& pool, const Conv2dGeometry& g, const float* sums,
                             float* dw);

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv
