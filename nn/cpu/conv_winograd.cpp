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
//      go to V(e, tile, c), e = 0..35;
//   2. forward: 36 GEMMs M(e) (tiles, K) = V(e) (tiles, C) U(e) (C, K), the
//      filters transformed once per call, U(e, c, k) = (G g_kc G^T)(e);
//      weight gradient: DW(e) (K, C) += (A dY A^T)(e)^T (K, tiles) V(e);
//   3. forward: each tile's 36 vectors of M, kNativeLanes output channels at
//      a time, give its 4 x 4 outputs, transposed back into the output's
//      rows (bias added); weight gradient, once per chunk of samples:
//      dw += G^T DW G.
// A block's V and M stay in the L2 cache. Channels are padded with zeros
// to whole 16-float blocks. The filter transforms are compiled once for both
// builds (winograd_filters.cpp).
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
#include <cstring>

#include "nn/cpu/conv_common.h"
#include "nn/cpu/gemm_tile.h"
#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"
#include "nn/cpu/simd_native.h"
#include "nn/cpu/winograd_filters.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv {
namespace {

constexpr int64_t L = kNativeLanes;
constexpr int kAlpha = 6;                     // input patch and transformed tile: 6 x 6
constexpr int kE = kAlpha * kAlpha;           // transformed elements per tile
constexpr int64_t kRowGroup = 12;             // GEMM rows are padded to a multiple of this
constexpr int64_t kBlockBytes = 384 << 10;    // V and M of a block, at most (L2)
constexpr int64_t kElementBytes = 512 << 10;  // V(e), M(e) and U(e) of a block (L2)
constexpr int64_t kFilterGrain = 8;           // channels a thread transforms, at least
// Input rows fetched ahead of the strip being filled: a block reads its
// rows from 16 channel planes at once, each a page or less, where the
// hardware prefetchers stop (resnet20 fp32 1.06-1.08x faster with them).
constexpr int64_t kPrefetchRows = 4;

int64_t round_up(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

// Channels are padded with zeros to whole 16-float blocks, the GEMM tile's
// column unit (gemm_tile.h), in both builds.
int64_t padded_channels(int64_t c) {
  return round_up(c, kLanes);
}

// Planes (channels, h, w) read into strips of `columns` columns, column s
// holding plane column s - pad; the tiles read the first `used` of them.
struct Planes {
  int64_t channels, h, w, pad, columns, used;
};

struct Wino {
  int64_t C, K, H, W, P, Q, pad;
  int64_t CL, KL;                     // channels padded to whole 16-float blocks
  int64_t th, tw;                     // tiles per column and per row of one sample
  int64_t strip_w;                    // input columns of a strip, whole vectors: >= 4 tw + 2
  int64_t out_w;                      // output columns of an output strip, whole vectors: >= 4 tw
  int64_t rows_per_block, tiles_cap;  // tile rows per block; V/M rows (padded)

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
    // from memory once for many tiles.
    constexpr int64_t f = sizeof(float);
    const int64_t tiles = kE * CL * KL * f <= kElementBytes * 2
                              ? kBlockBytes / (kE * f * (CL + KL))
                              : (kElementBytes / f - CL * KL) / (CL + KL);
    rows_per_block = std::max<int64_t>(1, std::max(tiles, tw) / tw);
    if (threads > 1) {
      const int64_t rows = g.batch * th;
      rows_per_block = std::max<int64_t>(1, std::min(rows_per_block, rows / (2 * threads)));
    }
    tiles_cap = round_up(rows_per_block * tw, kRowGroup);
  }
  int64_t v_size() const { return kE * tiles_cap * CL; }
  int64_t m_size() const { return kE * tiles_cap * KL; }
  // input strip (4 th + 2, strip_w, L) + output strip (4 th, out_w, L)
  int64_t strip_size() const { return (4 * th + 2) * strip_w * L + 4 * th * out_w * L; }
  Planes input() const { return {C, H, W, pad, strip_w, 4 * tw + 2}; }
  Planes output() const { return {K, P, Q, 0, out_w, 4 * tw}; }
};

// --- transforms ---------------------------------------------------------------

// B^T d for one column of 6 vectors (in place).
[[gnu::always_inline]] inline void input_1d(vn (&d)[kAlpha]) {
  const vn a = d[4] - 4.0f * d[2], b = d[3] - 4.0f * d[1];
  const vn c = d[4] - d[2], e = 2.0f * (d[3] - d[1]);
  const vn t0 = 4.0f * d[0] - 5.0f * d[2] + d[4];
  const vn t5 = 4.0f * d[1] - 5.0f * d[3] + d[5];
  d[0] = t0;
  d[1] = a + b;
  d[2] = a - b;
  d[3] = c + e;
  d[4] = c - e;
  d[5] = t5;
}

// A^T m: 6 vectors to 4.
[[gnu::always_inline]] inline void output_1d(const vn (&m)[kAlpha], vn (&o)[4]) {
  const vn s = m[1] + m[2], d = m[1] - m[2];
  const vn s2 = m[3] + m[4], d2 = m[3] - m[4];
  o[0] = m[0] + s + s2;
  o[1] = d + 2.0f * d2;
  o[2] = s + 4.0f * s2;
  o[3] = d + 8.0f * d2 + m[5];
}

// The tile whose patch starts at strip + column * L (rows strip_w * L
// apart): its 36 vectors B^T d B to v + e * v_stride.
void input_tile(const float* strip, int64_t strip_w, float* v, int64_t v_stride) {
  vn t[kAlpha][kAlpha];  // t[i][j]: (B^T d)(i, j)
  for (int j = 0; j < kAlpha; ++j) {
    vn col[kAlpha];
    for (int i = 0; i < kAlpha; ++i) col[i] = loadn(strip + (i * strip_w + j) * L);
    input_1d(col);
    for (int i = 0; i < kAlpha; ++i) t[i][j] = col[i];
  }
  for (int i = 0; i < kAlpha; ++i) {
    input_1d(t[i]);
    for (int j = 0; j < kAlpha; ++j) storen(v + (i * kAlpha + j) * v_stride, t[i][j]);
  }
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

// --- the strips ------------------------------------------------------------------

// Plane columns filled lane by lane rather than transposed, when a row
// ends with this many or fewer (the one or two columns the tiles still
// read past the last whole vector of a 16-wide row, say).
constexpr int64_t kFewColumns = 4;

// strip (count, columns, L) <- rows h0 .. h0 + count - 1 of channels
// [cb L, cb L + L) of x (channels, h, w); zeros outside the planes and past
// their channels. Columns from z.used on are not written. The transposed
// groups start at plane column 0, so that rows of whole vectors are read
// with plain loads, the padding columns written as zeros apart.
void fill_strip(const Planes& z, const float* x, int64_t cb, int64_t h0, int64_t count,
                float* strip) {
  const int64_t lanes = std::min(L, z.channels - cb * L);  // channels present
  const int64_t plane = z.h * z.w;
  const int64_t left = std::min(z.pad, z.used);        // zero columns on the left
  const int64_t last = std::min(z.w, z.used - z.pad);  // plane columns read
  for (int64_t i = 0; i < count; ++i) {
    const int64_t h = h0 + i;
    float* out = strip + i * z.columns * L;
    if (h < 0 || h >= z.h) {
      std::fill(out, out + z.used * L, 0.0f);
      continue;
    }
    std::fill(out, out + left * L, 0.0f);
    float* dst = out + z.pad * L;                     // plane column 0
    const float* row = x + (cb * L * z.h + h) * z.w;  // channel cb L
    if (h + kPrefetchRows < std::min(z.h, h0 + count)) {
      for (int64_t l = 0; l < lanes; ++l) {
        const float* ahead = row + l * plane + kPrefetchRows * z.w;
        for (int64_t j = 0; j < z.w; j += 16) __builtin_prefetch(ahead + j, 0, 3);
      }
    }
    for (int64_t p = 0; p < last; p += L) {
      const int64_t columns = std::min(L, last - p);
      if (columns <= kFewColumns) {
        for (int64_t j = 0; j < columns; ++j) {
          alignas(64) float v[L] = {};
          for (int64_t l = 0; l < lanes; ++l) v[l] = row[l * plane + p + j];
          storen(dst + (p + j) * L, loadn(v));
        }
        continue;
      }
      vn r[L];
      if (lanes == L && p + L <= z.w) {
#pragma GCC unroll 16
        for (int64_t l = 0; l < L; ++l) r[l] = loadn(row + l * plane + p);
      } else {  // channels past the last, or a row's last, partial vector
        for (int64_t l = 0; l < L; ++l) {
          if (l >= lanes) {
            r[l] = vn{};
            continue;
          }
          r[l] = loadn_part(row + l * plane + p, std::min(L, z.w - p));
        }
      }
      transpose_square(r);
      for (int64_t j = 0; j < columns; ++j) storen(dst + (p + j) * L, r[j]);
    }
    if (z.pad + last < z.used) std::fill(dst + last * L, out + z.used * L, 0.0f);
  }
}

// Output rows 4 ty .. + 3 (those < P) of channels [kb L, kb L + L) (those
// < K) of sample y (K, P, Q) <- the output strip (4, out_w, L).
void store_strip(const Wino& z, const float* strip, int64_t kb, int64_t ty, float* y) {
  for (int i = 0; i < 4 && 4 * ty + i < z.P; ++i) {
    const int64_t h = 4 * ty + i;
    for (int64_t q = 0; q < z.Q; q += L) {
      vn r[L];
      for (int64_t j = 0; j < L; ++j) r[j] = loadn(strip + (i * z.out_w + q + j) * L);
      transpose_square(r);
      const int64_t n = std::min(L, z.Q - q);
      for (int64_t l = 0; l < L && kb * L + l < z.K; ++l) {
        float* dst = y + ((kb * L + l) * z.P + h) * z.Q + q;
        if (n == L) {
          storen(dst, r[l]);
        } else {
          storen_head(dst, r[l], n);
        }
      }
    }
  }
}

// --- the products ----------------------------------------------------------------

// M (rows, KL) = V (rows, CL) U (CL, KL) on the GEMMs' register tile
// (gemm_tile.h), rows a multiple of kRowGroup: at most 24 accumulators (12
// on avx2), rows x 16-float column blocks of 6 x 4 or 12 x 2 or 12 x 1
// (avx512), 6 x 1 (avx2).
void gemm_block(int64_t rows, int64_t cl, int64_t kl, const float* v, const float* u, float* m) {
  constexpr int kWide = kMaxTileVectors;
  int64_t k0 = 0;
  for (; k0 + kWide * kLanes <= kl; k0 += kWide * kLanes) {
    for (int64_t r = 0; r < rows; r += 6) {
      nn_tile<6, kWide>(cl, {v + r * cl, cl, 1}, {u + k0, kl}, m + r * kl + k0, kl, nullptr, false);
    }
  }
  if constexpr (kWideRegisters) {
    for (; k0 + 2 * kLanes <= kl; k0 += 2 * kLanes) {
      for (int64_t r = 0; r < rows; r += 12) {
        nn_tile<12, 2>(cl, {v + r * cl, cl, 1}, {u + k0, kl}, m + r * kl + k0, kl, nullptr, false);
      }
    }
    for (; k0 < kl; k0 += kLanes) {
      for (int64_t r = 0; r < rows; r += 12) {
        nn_tile<12, 1>(cl, {v + r * cl, cl, 1}, {u + k0, kl}, m + r * kl + k0, kl, nullptr, false);
      }
    }
  }
}

}  // namespace

bool winograd_applies(const Conv2dGeometry& g) {
  return g.kernel_h == 3 && g.kernel_w == 3 && g.stride == 1 && g.pad <= 2 && g.in_channels >= 8 &&
         g.out_channels >= 8 && g.out_h() >= 4 && g.out_w() >= 4;
}

namespace {

// V (e, t, CL) <- the input transforms of the tiles of tile rows [r0, r1)
// (tile t = (r - r0) tw + tx), rows past them up to a multiple of
// kRowGroup zeroed. strip: (4 th + 2, strip_w, L).
void transform_inputs(const Wino& z, const float* x, int64_t r0, int64_t r1, float* strip,
                      float* v) {
  const int64_t v_stride = z.tiles_cap * z.CL;
  // The tile rows [ra, rb) of each sample n: their input rows, each
  // transposed once, then their tiles.
  for (int64_t ra = r0, rb; ra < r1; ra = rb) {
    const int64_t n = ra / z.th, ty0 = ra % z.th;
    rb = std::min(r1, (n + 1) * z.th);
    for (int64_t cb = 0; cb < z.CL / L; ++cb) {
      fill_strip(z.input(), x + n * z.C * z.H * z.W, cb, 4 * ty0 - z.pad, 4 * (rb - ra) + 2, strip);
      for (int64_t r = ra; r < rb; ++r) {
        for (int64_t tx = 0; tx < z.tw; ++tx) {
          const int64_t t = (r - r0) * z.tw + tx;
          input_tile(strip + (4 * (r - ra) * z.strip_w + 4 * tx) * L, z.strip_w,
                     v + t * z.CL + cb * L, v_stride);
        }
      }
    }
  }
  const int64_t tiles = (r1 - r0) * z.tw, rows = round_up(tiles, kRowGroup);
  for (int e = 0; e < kE; ++e) {  // the padding rows: zeros, not stale values
    std::fill(v + e * v_stride + tiles * z.CL, v + e * v_stride + rows * z.CL, 0.0f);
  }
}

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

// x: (N, C, H, W), w: (K, C, 3, 3), b: (K) or null -> y: (N, K, P, Q)
void winograd_forward(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const float* w,
                      const float* b, float* y) {
  const Wino z(g, pool.threads());
  float* u = scratch(ScratchSlot::kPackedWeights, static_cast<size_t>(kE * z.CL * z.KL));
  pool.parallel_for(z.CL, kFilterGrain, [&](int64_t c0, int64_t c1, int) {
    winograd_filters(g.out_channels, g.in_channels, w, z.KL, z.CL, c0, c1, u);
  });
  const int64_t tile_rows = g.batch * z.th;
  const int64_t blocks = (tile_rows + z.rows_per_block - 1) / z.rows_per_block;
  pool.parallel_for(blocks, 1, [&](int64_t b0, int64_t b1, int) {
    float* v = scratch(ScratchSlot::kColumns, static_cast<size_t>(z.v_size()));
    float* m = scratch(ScratchSlot::kGather, static_cast<size_t>(z.m_size()));
    float* strip = scratch(ScratchSlot::kPadded, static_cast<size_t>(z.strip_size()));
    float* ostrip = strip + (4 * z.th + 2) * z.strip_w * L;
    const int64_t v_stride = z.tiles_cap * z.CL, m_stride = z.tiles_cap * z.KL;
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t r0 = blk * z.rows_per_block;
      const int64_t r1 = std::min(tile_rows, r0 + z.rows_per_block);
      const int64_t rows = round_up((r1 - r0) * z.tw, kRowGroup);
      transform_inputs(z, x, r0, r1, strip, v);
      for (int e = 0; e < kE; ++e) {
        gemm_block(rows, z.CL, z.KL, v + e * v_stride, u + e * z.CL * z.KL, m + e * m_stride);
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
            output_tile(m + t * z.KL + kb * L, m_stride, b ? &bias : nullptr, ostrip + 4 * tx * L,
                        z.out_w);
          }
          store_strip(z, ostrip, kb, ty, y + n * z.K * z.P * z.Q);
        }
      }
    }
  });
}

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
