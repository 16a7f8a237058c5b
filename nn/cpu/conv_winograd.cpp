// 3x3 convolution with stride 1 by Winograd's minimal filtering, F(4x4, 3x3)
// (Lavin and Gray 2016, interpolation points 0, +-1, +-2, infinity): each
// 4 x 4 block of outputs ("tile") is
//   Y = A^T [ (G g G^T) . (B^T d B) ] A
// from the 6 x 6 input patch d under it and each 3 x 3 filter g, which
// takes 36 multiplications per (tile, input channel, output channel)
// against 144 for the direct convolution. The data gradient is the forward
// pass of the transposed convolution (conv.cpp); the weight gradient is the
// transpose of the same identity, dw = G^T [ (A dY A^T) . (B^T d B) ] G
// summed over tiles.
//
// Work runs per block of whole tile rows (the tiles of 4 output rows of one
// sample; a block may span samples), on vectors of kNativeLanes channels:
//   1. input transform: the block's input rows of each sample, kNativeLanes
//      channels at a time, are transposed once into a strip (rows, columns,
//      lanes) with the padding as zeros; each tile's 36 transformed vectors
//      go to V(tile, e, c), e = 0..35, side by side;
//   2. forward: 36 GEMMs M(e) (tiles, K) = V(e) (tiles, C) U(e) (C, K) (M
//      tile-major as V), the filters transformed once per call,
//      U(e, c, k) = (G g_kc G^T)(e);
//      weight gradient: DW(e) (K, C) += (A dY A^T)(e)^T (K, tiles) V(e);
//   3. forward: each tile's 36 vectors of M, kNativeLanes output channels at
//      a time, give its 4 x 4 outputs, transposed back into the output's
//      rows (bias added); weight gradient, once per chunk of samples:
//      dw += G^T DW G.
// A block's V and M stay in the L2 cache; while its products run, the input
// rows of the next block are fetched into it (winograd_prefetch.h); a large
// output is written past the caches (winograd_blocking.h). Channels are padded with zeros
// to whole 16-float blocks. The filter transforms are compiled once for both
// builds (winograd_filters.cpp). Shared with the weight gradient
// (conv_winograd_filter.cpp): winograd_tiles.h.
//
// Every output depends only on its own tile's inputs and the filters, in an
// order fixed by C alone: the result does not depend on the batch, the
// blocking or the thread count; the weight gradient sums its tiles in a
// fixed order within the conv.cpp's chunks of samples. The avx2 and avx512
// builds make the same additions in the same order (the same bits). The
// results differ from the direct convolution's by rounding (the transforms'
// constants 1/4, 1/6, 1/12 and 1/24 are inexact in binary, and the
// transformed terms are larger than the direct ones): within the tests'
// bound of 2e-5 of the sum of the terms' magnitudes.
#include <algorithm>
#include <cstdint>

#include "nn/cpu/conv_common.h"
#include "nn/cpu/gemm_tile.h"
#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"
#include "nn/cpu/simd_native.h"
#include "nn/cpu/winograd_filters.h"
#include "nn/cpu/winograd_prefetch.h"
#include "nn/cpu/winograd_tiles.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv {
namespace {

using namespace winograd;

// A^T m: 6 vectors to 4.
[[gnu::always_inline]] inline void output_1d(const vn (&m)[kAlpha], vn (&o)[4]) {
  const vn s = m[1] + m[2], d = m[1] - m[2];
  const vn s2 = m[3] + m[4], d2 = m[3] - m[4];
  o[0] = m[0] + s + s2;
  o[1] = d + 2.0f * d2;
  o[2] = s + 4.0f * s2;
  o[3] = d + 8.0f * d2 + m[5];
}

// A^T m A of the tile whose 36 vectors are at m + e * m_stride, plus bias
// (null: none), to the output strip from column * L on (rows out_w * L apart).
void output_tile(const float* m, int64_t m_stride, const vn* bias, float* out, int64_t out_w) {
  vn t[4][kAlpha];  // t[i][j]: (A^T m)(i, j)
  for (int j = 0; j < kAlpha; ++j) {
    vn col[kAlpha], o[4];
    for (int i = 0; i < kAlpha; ++i) col[i] = loadn(m + (i * kAlpha + j) * m_stride);
    output_1d(col, o);
    for (int i = 0; i < 4; ++i) t[i][j] = o[i];
  }
  for (int i = 0; i < 4; ++i) {
    vn o[4];
    output_1d(t[i], o);
    for (int j = 0; j < 4; ++j) {
      if (bias) o[j] += *bias;
      storen(out + (i * out_w + j) * L, o[j]);
    }
  }
}

// Output rows 4 ty .. + 3 (those < P) of channels [kb L, kb L + L) (those
// < K) of sample y (K, P, Q) <- the output strip (4, out_w, L); with
// `stream`, whole aligned vectors past the caches (streamn).
void store_strip(const Wino& z, const float* strip, int64_t kb, int64_t ty, float* y, bool stream) {
  for (int i = 0; i < 4 && 4 * ty + i < z.P; ++i) {
    const int64_t h = 4 * ty + i;
    for (int64_t q = 0; q < z.Q; q += L) {
      vn r[L];
      for (int64_t j = 0; j < L; ++j) r[j] = loadn(strip + (i * z.out_w + q + j) * L);
      transpose_square(r);
      const int64_t n = std::min(L, z.Q - q);
      for (int64_t l = 0; l < L && kb * L + l < z.K; ++l) {
        float* dst = y + ((kb * L + l) * z.P + h) * z.Q + q;
        if (n == L && stream && reinterpret_cast<uintptr_t>(dst) % sizeof(vn) == 0) {
          streamn(dst, r[l]);
        } else if (n == L) {
          storen(dst, r[l]);
        } else {
          storen_head(dst, r[l], n);
        }
      }
    }
  }
}

// --- the products ----------------------------------------------------------------

// M (rows, KL; rows ldm apart) = V (rows, CL; rows ldv apart) U (CL, KL)
// on the GEMMs' register tile (gemm_tile.h), rows a multiple of
// kRowGroup: at most 24 accumulators (12 on avx2), rows x 16-float column
// blocks of 6 x 4 or 12 x 2 or 12 x 1 (avx512), 6 x 1 (avx2).
void gemm_block(int64_t rows, int64_t cl, int64_t kl, const float* v, int64_t ldv, const float* u,
                float* m, int64_t ldm, WinogradRowFetch& ahead) {
  constexpr int kWide = kMaxTileVectors;
  // one share of the fetches ahead every kRowGroup rows of the first
  // column block, between the tiles
  const auto fetch = [&](int64_t r, int64_t k0) {
    if (k0 == 0 && r % kRowGroup == 0) ahead.next();
  };
  int64_t k0 = 0;
  for (; k0 + kWide * kLanes <= kl; k0 += kWide * kLanes) {
    for (int64_t r = 0; r < rows; r += 6) {
      fetch(r, k0);
      nn_tile<6, kWide>(cl, {v + r * ldv, ldv, 1}, {u + k0, kl}, m + r * ldm + k0, ldm, nullptr,
                        false);
    }
  }
  if constexpr (kWideRegisters) {
    for (; k0 + 2 * kLanes <= kl; k0 += 2 * kLanes) {
      for (int64_t r = 0; r < rows; r += 12) {
        fetch(r, k0);
        nn_tile<12, 2>(cl, {v + r * ldv, ldv, 1}, {u + k0, kl}, m + r * ldm + k0, ldm, nullptr,
                       false);
      }
    }
    for (; k0 < kl; k0 += kLanes) {
      for (int64_t r = 0; r < rows; r += 12) {
        fetch(r, k0);
        nn_tile<12, 1>(cl, {v + r * ldv, ldv, 1}, {u + k0, kl}, m + r * ldm + k0, ldm, nullptr,
                       false);
      }
    }
  }
}

}  // namespace

bool winograd_applies(const Conv2dGeometry& g) {
  return g.kernel_h == 3 && g.kernel_w == 3 && g.stride == 1 && g.pad <= 2 && g.in_channels >= 8 &&
         g.out_channels >= 8 && g.out_h() >= 4 && g.out_w() >= 4;
}

// x: (N, C, H, W), w: (K, C, 3, 3), b: (K) or null -> y: (N, K, P, Q)
void winograd_forward(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const float* w,
                      const float* b, float* y, const ConvInputMap& map) {
  Wino z(g, pool.threads());
  z.map = map;
  float* u = scratch(ScratchSlot::kPackedWeights, static_cast<size_t>(kE * z.CL * z.KL));
  pool.parallel_for(z.CL, kFilterGrain, [&](int64_t c0, int64_t c1, int) {
    winograd_filters(g.out_channels, g.in_channels, w, z.KL, z.CL, c0, c1, u);
  });
  const int64_t tile_rows = g.batch * z.th;
  const int64_t blocks = (tile_rows + z.rows_per_block - 1) / z.rows_per_block;
  const bool stream =
      g.batch * z.K * z.P * z.Q * static_cast<int64_t>(sizeof(float)) >= winograd_stream_bytes();
  pool.parallel_for(blocks, 1, [&](int64_t b0, int64_t b1, int) {
    float* v = scratch(ScratchSlot::kColumns, static_cast<size_t>(z.v_size()));
    float* m = scratch(ScratchSlot::kGather, static_cast<size_t>(z.m_size()));
    float* strip = scratch(ScratchSlot::kPadded, static_cast<size_t>(z.strip_size()));
    float* ostrip = strip + (4 * z.th + 2) * z.strip_w * L;
    const int64_t m_row = z.m_row();
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t r0 = blk * z.rows_per_block;
      const int64_t r1 = std::min(tile_rows, r0 + z.rows_per_block);
      const int64_t rows = round_up((r1 - r0) * z.tw, kRowGroup);
      transform_inputs(z, x, r0, r1, strip, v);
      // The next block's input rows, while the products run; past this
      // chunk too: the thread's next chunk, unless its share ends here.
      WinogradRowFetch ahead;
      if (r1 < tile_rows) {
        ahead =
            WinogradRowFetch(x, z.C, z.H, z.W, z.pad, 2, z.th, r1,
                             std::min(tile_rows, r1 + z.rows_per_block), kE * (rows / kRowGroup));
      }
      for (int e = 0; e < kE; ++e) {
        gemm_block(rows, z.CL, z.KL, v + e * z.CL, z.v_row(), u + e * z.CL * z.KL, m + e * z.KL,
                   m_row, ahead);
      }
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / z.th, ty = r % z.th;
        for (int64_t kb = 0; kb < z.KL / L; ++kb) {
          vn bias{};
          if (b) {
            float lanes[L] = {};
            for (int64_t l = 0; l < L && kb * L + l < z.K; ++l) lanes[l] = b[kb * L + l];
            bias = loadn(lanes);
          }
          for (int64_t tx = 0; tx < z.tw; ++tx) {
            const int64_t t = (r - r0) * z.tw + tx;
            output_tile(m + t * m_row + kb * L, z.KL, b ? &bias : nullptr, ostrip + 4 * tx * L,
                        z.out_w);
          }
          store_strip(z, ostrip, kb, ty, y + n * z.K * z.P * z.Q, stream);
        }
      }
    }
    if (stream) stream_fence();
  });
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv
