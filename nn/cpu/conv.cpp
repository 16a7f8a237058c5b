// Convolution ops of the CPU backend: each picks one of three algorithms,
//   Winograd (conv_winograd.cpp): 3x3, stride 1, at least 8 channels in and
//                               out, unless the backend was built without it
//                               (resnet20 but its stem and strided layers);
//   wide   (conv_wide.cpp):   stride 1, outputs wider than 16 columns, when
//                             few output columns are wasted (MNIST conv1);
//   im2col (conv_im2col.cpp): everything else (MNIST conv2, AlexNet-CIFAR),
// all parallel over samples or tiles. The weight gradient is summed per chunk of
// samples into private partials, then reduced in chunk order; the chunks do
// not depend on the thread count, so neither does the result.
#include <algorithm>

#include "nn/cpu/conv_common.h"
#include "nn/cpu/kernels.h"
#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

// The batch is split into at most this many chunks of samples for the
// weight gradient, whatever the thread count; weight gradients larger than
// kManyPartialsWeights floats (whose partials cost memory traffic) into at
// most kFewPartials.
constexpr int64_t kManyPartials = 16;
constexpr int64_t kFewPartials = 4;
constexpr int64_t kManyPartialsWeights = int64_t{1} << 16;

// out[e] = sum over chunks t of partials[t * stride + e] for e < count.
void reduce_partials(ThreadPool& pool, const float* partials, int chunks, int64_t stride,
                     int64_t count, float* out) {
  pool.parallel_for(count, 1 << 14, [=](int64_t e0, int64_t e1, int) {
    std::copy(partials + e0, partials + e1, out + e0);
    for (int t = 1; t < chunks; ++t) add_short(partials + t * stride + e0, out + e0, e1 - e0);
  });
}

// The data gradient's convolution: with stride 1, a square kernel and
// "same" padding, the forward pass of the transposed one (below).
bool transposes(const Conv2dGeometry& g) {
  return g.stride == 1 && g.kernel_w == g.kernel_h && 2 * g.pad == g.kernel_h - 1;
}
Conv2dGeometry transposed(const Conv2dGeometry& g) {
  return {g.batch,    g.out_channels, g.out_h(), g.out_w(), g.in_channels,
          g.kernel_h, g.kernel_h,     1,         g.pad};
}

// Winograd's weight gradient: per chunk of samples (as below) the
// transformed sums and the bias's, reduced in chunk order, then taken to
// dw once.
void winograd_backward_filter(ThreadPool& pool, const Conv2dGeometry& g, const float* x,
                              const float* dy, float* dw, float* db, const ConvInputMap& map) {
  const int64_t K = g.out_channels, sums = conv::winograd_sums_size(g), stride = sums + K;
  const int chunks = static_cast<int>(
      std::min(g.batch, sums > kManyPartialsWeights ? kFewPartials : kManyPartials));
  float* total = scratch(ScratchSlot::kPackedWeights, static_cast<size_t>(stride));
  if (const int64_t tiles = conv::winograd_filter_tiles_size(g, chunks); tiles > 0) {
    // Large sums: per element e, then the bias's partials alone (the same bits).
    float* buffer = scratch(ScratchSlot::kPartials, static_cast<size_t>(tiles + chunks * K));
    conv::winograd_filter_total(pool, g, chunks, x, dy, buffer, total, map);
    if (db) {
      float* bias = buffer + tiles;
      conv::for_each_chunk(pool, g.batch, chunks, bias, K,
                           [&](int64_t n0, int64_t n1, float* part) {
                             conv::accumulate_bias_grad(g, dy, n0, n1, part);
                           });
      reduce_partials(pool, bias, chunks, K, K, total + sums);
    }
  } else {
    float* partials = scratch(ScratchSlot::kPartials, static_cast<size_t>(chunks * stride));
    conv::for_each_chunk(pool, g.batch, chunks, partials, stride,
                         [&](int64_t n0, int64_t n1, float* part) {
                           conv::winograd_filter_sums(g, x, dy, n0, n1, part, map);
                           if (db) conv::accumulate_bias_grad(g, dy, n0, n1, part + sums);
                         });
    reduce_partials(pool, partials, chunks, stride, db ? stride : sums, total);
  }
  conv::winograd_sums_to_filter(pool, g, total, dw);
  if (db) std::copy(total + sums, total + stride, db);
}

}  // namespace

namespace conv {

void accumulate_bias_grad(const Conv2dGeometry& g, const float* dy, int64_t n0, int64_t n1,
                          float* db) {
  const Dims d(g);
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t k = 0; k < g.out_channels; ++k) {
      db[k] += sum_floats(dy + n * d.kpq + k * d.pq, d.pq);
    }
  }
}

}  // namespace conv

WinogradPasses winograd_passes(const Conv2dGeometry& g) {
  const bool applies = conv::winograd_applies(g);
  return {.forward = applies,
          .backward_data = transposes(g) && conv::winograd_applies(transposed(g)),
          .backward_filter = applies};
}

// x: (N, C, H, W), w: (K, C, R, S), b: (K) or null -> y: (N, K, P, Q)
void conv2d_forward(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const float* w,
                    const float* b, float* y, bool winograd) {
  if (winograd && winograd_passes(g).forward) {
    conv::winograd_forward(pool, g, x, w, b, y);
  } else if (conv::wide_applies(g)) {
    conv::wide_forward(pool, g, x, w, b, y);
  } else {
    conv::im2col_forward(pool, g, x, w, b, y);
  }
}

// The two above with the input x mapped as it is read (ConvInputMap), on
// Winograd: the caller has checked that it takes g (CpuBackend's
// conv2d_maps_input).
void conv2d_forward_mapped(ThreadPool& pool, const Conv2dGeometry& g, const ConvInputMap& map,
                           const float* x, const float* w, const float* b, float* y) {
  conv::winograd_forward(pool, g, x, w, b, y, map);
}

void conv2d_backward_filter_mapped(ThreadPool& pool, const Conv2dGeometry& g,
                                   const ConvInputMap& map, const float* x, const float* dy,
                                   float* dw, float* db) {
  if (g.batch <= 0) return conv2d_backward_filter(pool, g, x, dy, dw, db, true);
  winograd_backward_filter(pool, g, x, dy, dw, db, map);
}

// w: (K, C, R, S), dy: (N, K, P, Q) -> dx: (N, C, H, W). With stride 1, a
// square kernel and "same" padding, dx is the convolution of dy with the
// flipped, transposed w (C, K, R, S): the forward pass, without col2im or
// the gather of shifted rows, for as many flops. It pays where the usual
// product is shallow (its inner dimension is K): resnet20's 16- and
// 32-channel convolutions ran 1.5-1.75x faster on avx2, 1.05-1.25x on
// avx512; at K = 64 and more (resnet20's 8x8 stage, AlexNet-CIFAR) it was
// 0-25% slower, and without "same" padding (MNIST conv2) it adds flops.
void conv2d_backward_data(ThreadPool& pool, const Conv2dGeometry& g, const float* w,
                          const float* dy, float* dx, bool winograd) {
  const int64_t K = g.out_channels, C = g.in_channels, R = g.kernel_h, RS = R * R;
  if (transposes(g) && (K <= 32 || (winograd && winograd_passes(g).backward_data))) {
    float* flipped = scratch(ScratchSlot::kPartials, static_cast<size_t>(K * C * RS));
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t t = 0; t < RS; ++t)
          flipped[(c * K + k) * RS + RS - 1 - t] = w[(k * C + c) * RS + t];
      }
    }
    return conv2d_forward(pool, transposed(g), dy, flipped, nullptr, dx, winograd);
  }
  if (conv::wide_applies(g)) {
    conv::wide_backward_data(pool, g, w, dy, dx);
  } else {
    conv::im2col_backward_data(pool, g, w, dy, dx);
  }
}

// x: (N, C, H, W), dy: (N, K, P, Q) -> dw: (K, C, R, S), db: (K) or null
void conv2d_backward_filter(ThreadPool& pool, const Conv2dGeometry& g, const float* x,
                            const float* dy, float* dw, float* db, bool winograd) {
  const int64_t K = g.out_channels, wsize = K * conv::Dims(g).crs, stride = wsize + K;
  if (g.batch <= 0) {
    std::fill(dw, dw + wsize, 0.0f);
    if (db) std::fill(db, db + K, 0.0f);
    return;
  }
  // The wide algorithm's dot-product kernel suits small weights; the packed GEMM on
  // im2col matrices suits large ones.
  if (winograd && winograd_passes(g).backward_filter) {
    return winograd_backward_filter(pool, g, x, dy, dw, db, {});
  }
  const conv::FilterChunk chunk_fn = conv::wide_applies(g) && wsize <= conv::kSmallWeights
                                         ? conv::wide_filter_chunk
                                         : conv::im2col_filter_chunk;
  // Every chunk zeroes and fills a private copy of dw, then the copies are
  // summed in chunk order.
  const int chunks = static_cast<int>(
      std::min(g.batch, wsize > kManyPartialsWeights ? kFewPartials : kManyPartials));
  if (chunks == 1) {  // one sample: accumulate in place
    std::fill(dw, dw + wsize, 0.0f);
    if (db) std::fill(db, db + K, 0.0f);
    chunk_fn(g, x, dy, 0, g.batch, dw, db);
    return;
  }
  float* partials = scratch(ScratchSlot::kPartials, static_cast<size_t>(chunks * stride));
  conv::for_each_chunk(pool, g.batch, chunks, partials, stride,
                       [&](int64_t n0, int64_t n1, float* dwt) {
                         chunk_fn(g, x, dy, n0, n1, dwt, db ? dwt + wsize : nullptr);
                       });
  reduce_partials(pool, partials, chunks, stride, wsize, dw);
  if (db) reduce_partials(pool, partials + wsize, chunks, stride, K, db);
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
