// The weight gradient of the Winograd convolution (method: conv_winograd.cpp),
// dw = G^T [ sum over tiles of (A dY A^T) . (B^T d B) ] G: the transformed
// sums per chunk of samples (winograd_filter_sums), then G^T . G
// (winograd_sums_to_filter).
#include <algorithm>
#include <cstdint>
#include <vector>

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

// The register tiles of DW (KL, CL) in gemm_tn_block's order: 8 x 2
// 16-float blocks (avx512) or 4 x 1 (avx2), a last single block in 8 x 1;
// tile(k0, c0, wide), wide for the first kind.
constexpr int kTnRows = kWideRegisters ? 8 : 4, kTnBlocks = kWideRegisters ? 2 : 1;

template <typename F>
constexpr void for_each_tn_tile(int64_t kl, int64_t cl, F&& tile) {
  int64_t c0 = 0;
  for (; c0 + kTnBlocks * kLanes <= cl; c0 += kTnBlocks * kLanes) {
    for (int64_t k0 = 0; k0 < kl; k0 += kTnRows) tile(k0, c0, true);
  }
  for (; c0 < cl; c0 += kLanes) {
    for (int64_t k0 = 0; k0 < kl; k0 += 8) tile(k0, c0, false);
  }
}

// DW (KL, CL) += Yv (rows, KL; rows ldy apart)^T V (rows, CL; rows ldv
// apart) on the GEMMs' register tile (Yv read transposed), tile by tile
// (for_each_tn_tile); before each tile, fetch() (a share of the fetches
// ahead).
template <typename Fetch>
void gemm_tn_block(int64_t rows, int64_t kl, int64_t cl, const float* yv, int64_t ldy,
                   const float* v, int64_t ldv, float* dw, Fetch&& fetch) {
  for_each_tn_tile(kl, cl, [&](int64_t k0, int64_t c0, bool wide) {
    fetch();
    if (wide) {
      nn_tile<kTnRows, kTnBlocks>(rows, {yv + k0, 1, ldy}, {v + c0, ldv}, dw + k0 * cl + c0, cl,
                                  nullptr, true);
    } else {
      nn_tile<8, 1>(rows, {yv + k0, 1, ldy}, {v + c0, ldv}, dw + k0 * cl + c0, cl, nullptr, true);
    }
  });
}

// The tiles gemm_tn_block runs.
constexpr int64_t gemm_tn_tiles(int64_t kl, int64_t cl) {
  int64_t tiles = 0;
  for_each_tn_tile(kl, cl, [&](int64_t, int64_t, bool) { ++tiles; });
  return tiles;
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

namespace {

// The transformed tiles of tile rows [r0, r1): V (rows, e, CL) of the input
// (transform_inputs) and Yv (rows, e, KL) of the output gradient, the
// padding rows past the tiles zero.
void transform_block(const Wino& z, const float* x, const float* dy, int64_t r0, int64_t r1,
                     float* strip, float* v, float* yv) {
  float* ostrip = strip + (4 * z.th + 2) * z.strip_w * L;
  const int64_t m_row = z.m_row();
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
                    yv + t * m_row + kb * L, z.KL);
        }
      }
    }
  }
  std::fill(yv + tiles * m_row, yv + rows * m_row, 0.0f);  // padding rows: zeros
}

// The blocks of tile rows of samples [n0, n1), in order, as both paths cut
// them (their sums' bits depend on it): fn(r0, r1, rows), tile rows
// [r0, r1), rows the block's tiles padded to a multiple of kRowGroup.
template <typename F>
void for_each_block(const Wino& z, int64_t n0, int64_t n1, F&& fn) {
  const int64_t end = n1 * z.th;
  for (int64_t r0 = n0 * z.th; r0 < end; r0 += z.rows_per_block) {
    const int64_t r1 = std::min(end, r0 + z.rows_per_block);
    fn(r0, r1, round_up((r1 - r0) * z.tw, kRowGroup));
  }
}

// The blocks of tile rows winograd_filter_sums takes, chunk by chunk: chunk
// c's are blocks[first[c]] .. blocks[first[c + 1] - 1]; block b's V and Yv
// (rows padded) at tiles + at, V first.
struct FilterBlock {
  int64_t r0, r1, rows, at;
};
struct FilterPlan {
  std::vector<FilterBlock> blocks;
  std::vector<size_t> first;
  int64_t floats = 0;  // of every block's V and Yv
};

FilterPlan filter_plan(const Wino& z, int64_t batch, int chunks) {
  FilterPlan plan;
  for (int c = 0; c < chunks; ++c) {
    plan.first.push_back(plan.blocks.size());
    for_each_block(z, ThreadPool::chunk_begin(batch, chunks, c),
                   ThreadPool::chunk_begin(batch, chunks, c + 1),
                   [&](int64_t r0, int64_t r1, int64_t rows) {
                     plan.blocks.push_back({r0, r1, rows, plan.floats});
                     plan.floats += kE * rows * (z.CL + z.KL);
                   });
  }
  plan.first.push_back(plan.blocks.size());
  return plan;
}

// Every block's transformed tiles in memory at most this large.
constexpr int64_t kAllTilesBytes = int64_t{64} << 20;

}  // namespace

// Adds to sums (36, KL, CL) the transformed weight gradient of samples
// [n0, n1): per e, DW(e) (K, C) += sum over their tiles of
// (A dY A^T)(e) (B^T d B)(e), the tiles in a fixed order.
void winograd_filter_sums(const Conv2dGeometry& g, const float* x, const float* dy, int64_t n0,
                          int64_t n1, float* sums, const ConvInputMap& map) {
  Wino z(g, 0);
  z.map = map;
  float* v = scratch(ScratchSlot::kColumns, static_cast<size_t>(z.v_size()));
  float* yv = scratch(ScratchSlot::kGather, static_cast<size_t>(z.m_size()));
  float* strip = scratch(ScratchSlot::kPadded, static_cast<size_t>(z.strip_size()));
  const int64_t end = g.batch * z.th;
  for_each_block(z, n0, n1, [&](int64_t r0, int64_t r1, int64_t rows) {
    transform_block(z, x, dy, r0, r1, strip, v, yv);
    // The next block's rows of x and dy, while this block's products run;
    // past these samples too: the thread's next chunk, unless its share
    // ends here.
    WinogradRowFetch ahead_x, ahead_dy;
    if (r1 < end) {
      const int64_t r2 = std::min(end, r1 + z.rows_per_block);
      const int64_t shares = kE * gemm_tn_tiles(z.KL, z.CL);
      ahead_x = WinogradRowFetch(x, z.C, z.H, z.W, z.pad, 2, z.th, r1, r2, shares);
      ahead_dy = WinogradRowFetch(dy, z.K, z.P, z.Q, 0, 0, z.th, r1, r2, shares);
    }
    for (int e = 0; e < kE; ++e) {
      gemm_tn_block(rows, z.KL, z.CL, yv + e * z.KL, z.m_row(), v + e * z.CL, z.v_row(),
                    sums + e * z.KL * z.CL, [&] {
                      ahead_x.next();
                      ahead_dy.next();
                    });
    }
  });
}

// Memory traffic decides: winograd_filter_sums reads and writes all the
// sums once per block, winograd_filter_total writes and reads each block's
// tiles once. Measured (AVX2, Zen 3, batch 128): 192 -> 384 channels on 4 x 4
// planes (sums 10.6 MB, 4 blocks; tiles 10.6 MB) 1.75x faster; 64 -> 192 on
// 8 x 8 (sums 1.8 MB, 4 blocks; tiles 19 MB) no faster and 64 -> 64 on 8 x 8
// 1.4x slower, where it is not taken.
int64_t winograd_filter_tiles_size(const Conv2dGeometry& g, int chunks) {
  const Wino z(g, 0);
  const int64_t sums = kE * z.KL * z.CL;
  if (sums * static_cast<int64_t>(sizeof(float)) <= kElementBytes) return 0;
  const FilterPlan plan = filter_plan(z, g.batch, chunks);
  const auto blocks = static_cast<int64_t>(plan.blocks.size());
  if (sums * blocks < 2 * plan.floats) return 0;
  return plan.floats * static_cast<int64_t>(sizeof(float)) <= kAllTilesBytes ? plan.floats : 0;
}

void winograd_filter_total(ThreadPool& pool, const Conv2dGeometry& g, int chunks, const float* x,
                           const float* dy, float* tiles, float* total, const ConvInputMap& map) {
  Wino z(g, 0);
  z.map = map;
  const FilterPlan plan = filter_plan(z, g.batch, chunks);
  const auto& blocks = plan.blocks;
  pool.parallel_for(static_cast<int64_t>(blocks.size()), 1, [&](int64_t b0, int64_t b1, int) {
    float* strip = scratch(ScratchSlot::kPadded, static_cast<size_t>(z.strip_size()));
    for (int64_t b = b0; b < b1; ++b) {
      const FilterBlock& blk = blocks[static_cast<size_t>(b)];
      Wino zb = z;  // V and Yv of this block alone: rows apart per e
      zb.tiles_cap = blk.rows;
      float* v = tiles + blk.at;
      transform_block(zb, x, dy, blk.r0, blk.r1, strip, v, v + kE * blk.rows * z.CL);
    }
  });
  const int64_t dw = z.KL * z.CL;
  pool.parallel_for(kE, 1, [&](int64_t e0, int64_t e1, int) {
    float* part = scratch(ScratchSlot::kGather, static_cast<size_t>(dw));
    for (int64_t e = e0; e < e1; ++e) {
      float* out = total + e * dw;
      for (int c = 0; c < chunks; ++c) {
        std::fill(part, part + dw, 0.0f);
        for (size_t b = plan.first[static_cast<size_t>(c)];
             b < plan.first[static_cast<size_t>(c) + 1]; ++b) {
          const FilterBlock& blk = blocks[b];
          const float* v = tiles + blk.at;
          const float* yv = v + kE * blk.rows * z.CL;
          gemm_tn_block(blk.rows, z.KL, z.CL, yv + e * z.KL, z.m_row(), v + e * z.CL, z.v_row(),
                        part, [] {});
        }
        if (c == 0) {
          std::copy(part, part + dw, out);
        } else {
          add_short(part, out, dw);
        }
      }
    }
  });
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv
