// What the Winograd F(4x4, 3x3) convolution's forward pass
// (conv_winograd.cpp) and weight gradient (conv_winograd_filter.cpp) share:
// the blocking (Wino), and the input transform of a block of tile rows
// (winograd_tiles.cpp). The method and its rounding: conv_winograd.cpp.
#pragma once

#include "nn/cpu/isa_namespace.h"

#include <algorithm>
#include <cstdint>

#include "nn/backend.h"
#include "nn/cpu/gemm_tile.h"
#include "nn/cpu/round_up.h"
#include "nn/cpu/simd_native.h"
#include "nn/cpu/winograd_blocking.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv::winograd {

constexpr int64_t L = kNativeLanes;
constexpr int kAlpha = 6;                     // input patch and transformed tile: 6 x 6
constexpr int kE = kAlpha * kAlpha;           // transformed elements per tile
constexpr int64_t kRowGroup = 12;             // GEMM rows are padded to a multiple of this
constexpr int64_t kElementBytes = 512 << 10;  // V(e), M(e) and U(e) of a block (L2)
constexpr int64_t kFilterGrain = 8;           // channels a thread transforms, at least

// Channels are padded with zeros to whole 16-float blocks, the GEMM tile's
// column unit (gemm_tile.h), in both builds.
inline int64_t padded_channels(int64_t c) {
  return round_up(c, kLanes);
}

// Planes (channels, h, w) read into strips of `columns` columns, column s
// holding plane column s - pad; the tiles read the first `used` of them.
// map.coef not null: each value as the map gives it (ConvInputMap), the
// padding zeros as they are.
struct Planes {
  int64_t channels, h, w, pad, columns, used;
  ConvInputMap map = {};
};

struct Wino {
  int64_t C, K, H, W, P, Q, pad;
  int64_t CL, KL;                     // channels padded to whole 16-float blocks
  int64_t th, tw;                     // tiles per column and per row of one sample
  int64_t strip_w;                    // input columns of a strip, whole vectors: >= 4 tw + 2
  int64_t out_w;                      // output columns of an output strip, whole vectors: >= 4 tw
  int64_t rows_per_block, tiles_cap;  // tile rows per block; V/M rows (padded)
  ConvInputMap map = {};              // of the input x (none: coef null)

  // threads: the pool's, for at least two blocks per thread where the
  // batch allows (0: no such limit).
  Wino(const Conv2dGeometry& g, int threads)
      : C(g.in_channels),
        K(g.out_channels),
        H(g.in_h),
        W(g.in_w),
        P(g.out_h()),
        Q(g.out_w()),
        pad(g.pad),
        CL(padded_channels(C)),
        KL(padded_channels(K)),
        th((P + 3) / 4),
        tw((Q + 3) / 4),
        strip_w(round_up(4 * tw + 2, L)),
        out_w(round_up(4 * tw, L)) {
    // Tiles per block: all of V and M in the L2 cache; or, where U does
    // not fit it (hundreds of channels), as many as fit it per element e
    // (V(e), M(e) and U(e) in kElementBytes), so that each U(e) is read
    // from memory once for many tiles. Then as many tile rows of those
    // as leave the GEMMs the least padding (winograd_blocking.h). Both
    // together (before: 384 KiB on every CPU, rows as many as fit) made
    // resnet20's convolutions 9% faster and alexnet_cifar's 15% (AVX-512,
    // 1 thread, Zen 4 with 1 MiB of L2 a core; kernel_bench).
    constexpr int64_t f = sizeof(float);
    const int64_t tiles = kE * CL * KL * f <= kElementBytes * 2
                              ? winograd_block_bytes() / (kE * f * (CL + KL))
                              : (kElementBytes / f - CL * KL) / (CL + KL);
    rows_per_block = winograd_block_rows(tiles, tw, g.batch * th, threads, kRowGroup);
    tiles_cap = round_up(rows_per_block * tw, kRowGroup);
  }
  // V (tiles, e, CL): a tile's 36 transformed vectors side by side (the
  // input transform writes them as one run), V(e) the (tiles, CL) matrix
  // at v + e CL, rows v_row() apart. M (tiles, e, KL) of the products and
  // Yv of the output gradient likewise, rows m_row() apart. (With V(e)
  // whole, rows CL apart, each tile's 36 stores went to 36 places far
  // apart: resnet20 about 2% slower.)
  int64_t v_row() const { return kE * CL; }
  int64_t m_row() const { return kE * KL; }
  int64_t v_size() const { return kE * tiles_cap * CL; }
  int64_t m_size() const { return kE * tiles_cap * KL; }
  // input strip (4 th + 2, strip_w, L) + output strip (4 th, out_w, L)
  int64_t strip_size() const { return (4 * th + 2) * strip_w * L + 4 * th * out_w * L; }
  Planes input() const { return {C, H, W, pad, strip_w, 4 * tw + 2, map}; }
  Planes output() const { return {K, P, Q, 0, out_w, 4 * tw}; }
};

// strip (count, columns, L) <- rows h0 .. h0 + count - 1 of channels
// [cb L, cb L + L) of x (channels, h, w), through z.map; zeros outside the
// planes and past their channels. Columns from z.used on are not written.
void fill_strip(const Planes& z, const float* x, int64_t cb, int64_t h0, int64_t count,
                float* strip);

// V (t, e, CL) <- the input transforms of the tiles of tile rows [r0, r1)
// (tile t = (r - r0) tw + tx), tiles past them up to a multiple of
// kRowGroup zeroed. strip: (4 th + 2, strip_w, L).
void transform_inputs(const Wino& z, const float* x, int64_t r0, int64_t r1, float* strip,
                      float* v);

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv::winograd
