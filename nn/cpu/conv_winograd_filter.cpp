// The weight gradient of the Winograd convolution (method: conv_winograd.cpp),
// dw = G^T [ sum over tiles of (A dY A^T) . (B^T d B) ] G: the transformed
// sums per chunk of samples (winograd_filter_sums), then G^T . G
// (winograd_sums_to_filter).
#include <algorithm>
#include <cstdint>

#include "nn/cpu/conv_common.h"
#include "nn/cpu/gemm_tile.h"
#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"
#include "nn/cpu/simd_native.h"
#include "nn/cpu/winograd_filters.h"
#include "nn/cpu/winograd_tiles.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv {
namespace {

using namespace winograd;

// A y for one column of 4 vectors: 6 vectors (the transpose of output_1d).
[[gnu::always_inline]] inline void grad_1d(const vn (&y)[4], vn (&o)[kAlpha]) {
  const vn a = y[0] + y[2], b = y[1] + y[3];
  const vn c = y[0] + 4.0f * y[2], d = 2.0f * y[1] + 8.0f * y[3];
  o[0] = y[0];
  o[1] = a + b;
  o[2] = a - b;
  o[3] = c + d;
  o[4] = c - d;
  o[5] = y[3];
}

// A dY A^T of the 4 x 4 output-gradient tile at strip (rows columns * L
// apart): its 36 vectors to yv + e * stride.
void grad_tile(const float* strip, int64_t columns, float* yv, int64_t stride) {
  vn t[kAlpha][4];  // t[e][j]: (A dY)(e, j)
  for (int j = 0; j < 4; ++j) {
    vn col[4], o[kAlpha];
    for (int i = 0; i < 4; ++i) col[i] = loadn(strip + (i * columns + j) * L);
    grad_1d(col, o);
    for (int e = 0; e < kAlpha; ++e) t[e][j] = o[e];
  }
  for (int e = 0; e < kAlpha; ++e) {
    vn o[kAlpha];
    grad_1d(t[e], o);
    for (int f = 0; f < kAlpha; ++f) storen(yv + (e * kAlpha + f) * stride, o[f]);
  }
}

// DW (KL, CL) += Yv (rows, KL)^T V (rows, CL) on the GEMMs' register tile
// (Yv read transposed): tiles of 8 x 2 16-float blocks (avx512) or 4 x 1
// (avx2), a last single block in 8 x 1.
void gemm_tn_block(int64_t rows, int64_t kl, int64_t cl, const float* yv, const float* v,
                   float* dw) {
  constexpr int kRows = kWideRegisters ? 8 : 4, kBlocks = kWideRegisters ? 2 : 1;
  int64_t c0 = 0;
  for (; c0 + kBlocks * kLanes <= cl; c0 += kBlocks * kLanes) {
    for (int64_t k0 = 0; k0 < kl; k0 += kRows) {
      nn_tile<kRows, kBlocks>(rows, {yv + k0, 1, kl}, {v + c0, cl}, dw + k0 * cl + c0, cl, nullptr,
                              true);
    }
  }
  for (; c0 < cl; c0 += kLanes) {
    for (int64_t k0 = 0; k0 < kl; k0 += 8) {
      nn_tile<8, 1>(rows, {yv + k0, 1, kl}, {v + c0, cl}, dw + k0 * cl + c0, cl, nullptr, true);
    }
  }
}

}  // namespace

void winograd_sums_to_filter(ThreadPool& pool, const Conv2dGeometry& g, const float* sums,
                             float* dw) {
  const int64_t K = g.out_channels, C = g.in_channels;
  pool.parallel_for(K, kFilterGrain, [&](int64_t k0, int64_t k1, int) {
    std::fill(dw + k0 * C * 9, dw + k1 * C * 9, 0.0f);
    winograd_filter_grads(C, sums, padded_channels(K), padded_channels(C), k0, k1, dw);
  });
}

int64_t winograd_sums_size(const Conv2dGeometry& g) {
  return kE * padded_channels(g.out_channels) * padded_channels(g.in_channels);
}

// Adds to sums (36, KL, CL) the transformed weight gradient of samples
// [n0, n1): per e, DW(e) (K, C) += sum over their tiles of
// (A dY A^T)(e) (B^T d B)(e), the tiles in a fixed order.
void winograd_filter_sums(const Conv2dGeometry& g, const float* x, const float* dy, int64_t n0,
                          int64_t n1, float* sums) {
  const Wino z(g, 0);
  float* v = scratch(ScratchSlot::kColumns, static_cast<size_t>(z.v_size()));
  float* yv = scratch(ScratchSlot::kGather, static_cast<size_t>(z.m_size()));
  float* strip = scratch(ScratchSlot::kPadded, static_cast<size_t>(z.strip_size()));
  float* ostrip = strip + (4 * z.th + 2) * z.strip_w * L;
  const int64_t v_stride = z.tiles_cap * z.CL, y_stride = z.tiles_cap * z.KL;
  const int64_t end = n1 * z.th;
  for (int64_t r0 = n0 * z.th; r0 < end; r0 += z.rows_per_block) {
    const int64_t r1 = std::min(end, r0 + z.rows_per_block);
    const int64_t tiles = (r1 - r0) * z.tw, rows = round_up(tiles, kRowGroup);
    transform_inputs(z, x, r0, r1, strip, v);
    for (int64_t ra = r0, rb; ra < r1; ra = rb) {
      const int64_t n = ra / z.th, ty0 = ra % z.th;
      rb = std::min(r1, (n + 1) * z.th);
      for (int64_t kb = 0; kb < z.KL / L; ++kb) {
        fill_strip(z.output(), dy + n * z.K * z.P * z.Q, kb, 4 * ty0, 4 * (rb - ra), ostrip);
        for (int64_t r = ra; r < rb; ++r) {
          for (int64_t tx = 0; tx < z.tw; ++tx) {
            const int64_t t = (r - r0) * z.tw + tx;
            grad_tile(ostrip + (4 * (r - ra) * z.out_w + 4 * tx) * L, z.out_w,
                      yv + t * z.KL + kb * L, y_stride);
          }
        }
      }
    }
    for (int e = 0; e < kE; ++e) {  // padding rows: zeros
      std::fill(yv + e * y_stride + tiles * z.KL, yv + e * y_stride + rows * z.KL, 0.0f);
    }
    for (int e = 0; e < kE; ++e) {
      gemm_tn_block(rows, z.KL, z.CL, yv + e * y_stride, v + e * v_stride, sums + e * z.KL * z.CL);
    }
  }
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv
