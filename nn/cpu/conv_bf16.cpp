// Convolutions and the dense GEMM in bf16 precision: im2col + the bf16 GEMM
// (gemm_bf16.h) for any stride and padding, per group of samples as
// conv_im2col.cpp does; inputs of every product rounded to bf16, sums,
// outputs, bias and col2im in fp32. With CRS = C*R*S, PQ = P*Q:
//   forward:       y(K, PQ) = w(K, CRS) * col(CRS, PQ) + b
//   backward data: stride 1: the forward pass of the transposed convolution
//                  (dy padded by R-1-pad, w flipped and transposed);
//                  else dcol(CRS, PQ) = w^T(CRS, K) * dy(K, PQ), dx = col2im(dcol)
// (the weight gradient: conv_bf16_filter.cpp). Inputs are rounded once,
// into bf16 pairs of channels (32-bit words), and multiplied in place: the
// forward pass runs im2col on the pairs of x (depth pairs ordered (c/2, r,
// s), channels 2c' and 2c'+1 in one word), or for stride 1 and wide
// outputs reads the padded pairs in place as conv_wide.cpp does (the same
// words, the same sums); backward data reads the pairs of dy.
#include <algorithm>
#include <vector>

#include "nn/cpu/conv_common.h"
#include "nn/cpu/gemm_bf16.h"
#include "nn/cpu/im2col.h"
#include "nn/cpu/kernels.h"
#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

// Output columns per GEMM (several register tiles), within a column budget.
int64_t group_size(const conv::Dims& d, int64_t min_columns) {
  const int64_t want = (min_columns + d.pq - 1) / d.pq;
  const int64_t cap = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, d.crs * d.pq));
  return std::clamp<int64_t>(want, 1, cap);
}

int64_t pairs_of(int64_t n) {
  return (n + 1) / 2;
}

// The gs samples' (channels, plane) blocks of src as bf16 pairs of
// channels: pair c' of sample i (channels 2c', 2c'+1; the high half zero
// past the last) at dst + i * sample_step + c' * pair_step.
void pair_channels(const float* src, int64_t gs, int64_t channels, int64_t plane, float* dst,
                   int64_t sample_step, int64_t pair_step, bool dot) {
  for (int64_t i = 0; i < gs; ++i) {
    for (int64_t c = 0; c < pairs_of(channels); ++c) {
      const float* lo = src + (i * channels + 2 * c) * plane;
      bf16_pair_rows(lo, 2 * c + 1 < channels ? lo + plane : nullptr, plane,
                     dst + i * sample_step + c * pair_step, dot);
    }
  }
}

// a(m, k) packed as bf16 pairs, panels across the pool, into the calling
// thread's kPackedWeights.
const uint32_t* pack_weights(ThreadPool& pool, int64_t m, int64_t k, StridedMatrix a) {
  auto* packed = reinterpret_cast<uint32_t*>(
      scratch(ScratchSlot::kPackedWeights, static_cast<size_t>(packed_a_bf16_size(m, k))));
  const int64_t panels = (m + kBf16TileRows - 1) / kBf16TileRows, kq = pairs_of(k);
  pool.parallel_for(panels, 16, [&](int64_t p0, int64_t p1, int) {
    const int64_t r0 = p0 * kBf16TileRows, r1 = std::min(m, p1 * kBf16TileRows);
    pack_a_bf16(r1 - r0, k, StridedMatrix{a.data + r0 * a.row_stride, a.row_stride, a.col_stride},
                packed + r0 * kq);
  });
  return packed;
}

// The weights of a convolution with `out` output and `in` input channels,
// packed with their depth in the order of the paired im2col: pair
// (c', r, s) = (v(o, 2c', r, s), v(o, 2c'+1, r, s)), zero past `in`. v is w
// (out, in, R, S) itself, or with `flipped` the weights of the transposed
// convolution of w (in, out, R, S): v(o, i, r, s) = w(i, o, R-1-r, S-1-s).
// Panels of rows across the pool, each reordered in the thread's kGather.
const uint32_t* pack_paired_weights(ThreadPool& pool, int64_t out, int64_t in, int64_t rs,
                                    const float* w, bool flipped) {
  const int64_t depth = 2 * pairs_of(in) * rs, rows = kBf16TileRows;
  auto* packed = reinterpret_cast<uint32_t*>(
      scratch(ScratchSlot::kPackedWeights, static_cast<size_t>(packed_a_bf16_size(out, depth))));
  pool.parallel_for((out + rows - 1) / rows, 4, [&](int64_t p0, int64_t p1, int) {
    const int64_t o0 = p0 * rows, o1 = std::min(out, p1 * rows);
    float* wr = scratch(ScratchSlot::kGather, static_cast<size_t>((o1 - o0) * depth));
    for (int64_t o = o0; o < o1; ++o) {
      for (int64_t i = 0; i < 2 * pairs_of(in); ++i) {
        for (int64_t t = 0; t < rs; ++t) {
          const float v = i >= in   ? 0.0f
                          : flipped ? w[(i * out + o) * rs + rs - 1 - t]
                                    : w[(o * in + i) * rs + t];
          wr[(o - o0) * depth + ((i / 2) * rs + t) * 2 + i % 2] = v;
        }
      }
    }
    pack_a_bf16(o1 - o0, depth, StridedMatrix{wr, depth, 1}, packed + o0 * (depth / 2));
  });
  return packed;
}

// The pairs of channels of one sample, zero padded, in one plane xw (Cp,
// Hp, Wp) + slack, as conv_wide.cpp reads its input: depth pair (c', r, s)
// is the plane from offset c' Hp Wp + r Wp + s on, read in place for the
// wide columns j = p Wp + q < Lr (stride 1); y is yw(K, Lr) less the gaps.
struct WidePairs {
  int64_t wp, area, lr, plane;
  std::vector<int64_t> offsets;  // (Cp R S)

  explicit WidePairs(const Conv2dGeometry& g)
      : wp(g.in_w + 2 * g.pad),
        area((g.in_h + 2 * g.pad) * wp),
        lr(((g.out_h() - 1) * wp + g.out_w() + 63) / 64 * 64) {
    for (int64_t c = 0; c < pairs_of(g.in_channels); ++c) {
      for (int64_t r = 0; r < g.kernel_h; ++r) {
        for (int64_t s = 0; s < g.kernel_w; ++s) offsets.push_back(c * area + r * wp + s);
      }
    }
    plane = std::max(pairs_of(g.in_channels) * area, offsets.back() + lr) + kLanes;
  }
};

// Stride 1 with outputs wider than 16 columns and at most 25% of the wide
// columns wasted.
bool wide_pairs_apply(const Conv2dGeometry& g) {
  if (g.stride != 1 || g.out_w() <= 16) return false;
  const int64_t wp = g.in_w + 2 * g.pad;
  const int64_t lr = ((g.out_h() - 1) * wp + g.out_w() + 63) / 64 * 64;
  return 4 * lr <= 5 * g.out_h() * g.out_w();
}

void forward_wide(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const uint32_t* wp,
                  const float* b, float* y, bool dot) {
  const conv::Dims d(g);
  const WidePairs wd(g);
  const int64_t K = g.out_channels, C = g.in_channels, P = g.out_h(), Q = g.out_w();
  const int64_t H = g.in_h, W = g.in_w, kq = static_cast<int64_t>(wd.offsets.size());
  pool.parallel_for(g.batch, 1, [&](int64_t n0, int64_t n1, int) {
    float* xw = scratch(ScratchSlot::kBf16Input, static_cast<size_t>(wd.plane));
    float* yw = scratch(ScratchSlot::kGather, static_cast<size_t>(K * wd.lr));
    const PairRows rows{reinterpret_cast<const uint32_t*>(xw), 0, wd.offsets.data()};
    for (int64_t n = n0; n < n1; ++n) {
      zero_short(xw, wd.plane);
      for (int64_t c = 0; c < pairs_of(C); ++c) {
        for (int64_t h = 0; h < H; ++h) {
          const float* lo = x + ((n * C + 2 * c) * H + h) * W;
          bf16_pair_rows(lo, 2 * c + 1 < C ? lo + H * W : nullptr, W,
                         xw + c * wd.area + (h + g.pad) * wd.wp + g.pad, dot);
        }
      }
      if (b) {
        for (int64_t k = 0; k < K; ++k) std::fill(yw + k * wd.lr, yw + (k + 1) * wd.lr, b[k]);
      }
      gemm_bf16_pairs(K, wd.lr, kq, wp, rows, yw, wd.lr, b != nullptr, dot);
      for (int64_t k = 0; k < K; ++k) {
        for (int64_t p = 0; p < P; ++p)
          copy_short(yw + k * wd.lr + p * wd.wp, y + n * d.kpq + (k * P + p) * Q, Q);
      }
    }
  });
}

// y = the convolution of x with the weights wp (pack_paired_weights) + b.
void forward_paired(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const uint32_t* wp,
                    const float* b, float* y, bool dot) {
  if (wide_pairs_apply(g)) return forward_wide(pool, g, x, wp, b, y, dot);
  const conv::Dims d(g);
  const int64_t K = g.out_channels, G = group_size(d, 256), hw = g.in_h * g.in_w;
  Conv2dGeometry paired = g;  // im2col over pairs of channels
  paired.in_channels = pairs_of(g.in_channels);
  const int64_t kq = paired.in_channels * g.kernel_h * g.kernel_w;
  pool.parallel_for(g.batch, 1, [&](int64_t n0, int64_t n1, int) {
    float* xb = scratch(ScratchSlot::kBf16Input, static_cast<size_t>(G * paired.in_channels * hw));
    float* col = scratch(ScratchSlot::kColumns, static_cast<size_t>(kq * G * d.pq));
    float* out = scratch(ScratchSlot::kGather, static_cast<size_t>(K * G * d.pq));
    for (int64_t n = n0; n < n1; n += G) {
      const int64_t gs = std::min(G, n1 - n), ld = gs * d.pq;
      pair_channels(x + n * d.chw, gs, g.in_channels, hw, xb, paired.in_channels * hw, hw, dot);
      im2col(paired, xb, gs, col, ld);
      float* target = gs == 1 ? y + n * d.kpq : out;
      if (b) {
        for (int64_t k = 0; k < K; ++k) std::fill(target + k * ld, target + (k + 1) * ld, b[k]);
      }
      gemm_bf16_pairs(K, ld, kq, wp, PairRows{reinterpret_cast<const uint32_t*>(col), ld}, target,
                      ld, b != nullptr, dot);
      if (gs > 1) conv::scatter_samples(out, gs, K, d, y + n * d.kpq);
    }
  });
}

}  // namespace

// x: (N, C, H, W), w: (K, C, R, S), b: (K) or null -> y: (N, K, P, Q)
void conv2d_forward_bf16(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const float* w,
                         const float* b, float* y, bool dot) {
  const uint32_t* wp =
      pack_paired_weights(pool, g.out_channels, g.in_channels, g.kernel_h * g.kernel_w, w, false);
  forward_paired(pool, g, x, wp, b, y, dot);
}

// w: (K, C, R, S), dy: (N, K, P, Q) -> dx: (N, C, H, W). With stride 1 and
// a square kernel (pad < R), dx is the convolution of dy, padded by
// R-1-pad, with the flipped, transposed w: the forward pass, no col2im.
void conv2d_backward_data_bf16(ThreadPool& pool, const Conv2dGeometry& g, const float* w,
                               const float* dy, float* dx, bool dot) {
  const conv::Dims d(g);
  const int64_t K = g.out_channels, R = g.kernel_h;
  if (g.stride == 1 && g.kernel_w == R && g.pad < R) {
    const Conv2dGeometry t{g.batch, K, g.out_h(), g.out_w(), g.in_channels, R, R, 1, R - 1 - g.pad};
    const uint32_t* wp = pack_paired_weights(pool, g.in_channels, K, R * R, w, true);
    return forward_paired(pool, t, dy, wp, nullptr, dx, dot);
  }
  const int64_t G = group_size(d, 256);
  const uint32_t* wtp = pack_weights(pool, d.crs, K, StridedMatrix{w, 1, d.crs});
  pool.parallel_for(g.batch, 1, [&](int64_t n0, int64_t n1, int) {
    float* col = scratch(ScratchSlot::kColumns, static_cast<size_t>(d.crs * G * d.pq));
    float* in = scratch(ScratchSlot::kGather, static_cast<size_t>(pairs_of(K) * G * d.pq));
    for (int64_t n = n0; n < n1; n += G) {
      const int64_t gs = std::min(G, n1 - n), ld = gs * d.pq;
      pair_channels(dy + n * d.kpq, gs, K, d.pq, in, d.pq, ld, dot);
      gemm_bf16_pairs(d.crs, ld, pairs_of(K), wtp,
                      PairRows{reinterpret_cast<const uint32_t*>(in), ld}, col, ld, false, dot);
      col2im(g, col, ld, gs, dx + n * d.chw);
    }
  });
}

// C(m, n) = alpha op(A) op(B) + beta C with A and B rounded to bf16: A
// packed once across the pool, then blocks of columns of C across the pool
// (each packs its columns of B).
void gemm_bf16_op(ThreadPool& pool, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, const float* b, float beta, float* c, bool dot) {
  if (m <= 0 || n <= 0) return;
  const StridedMatrix av = ta ? StridedMatrix{a, 1, m} : StridedMatrix{a, k, 1};
  const StridedMatrix bv = tb ? StridedMatrix{b, 1, k} : StridedMatrix{b, n, 1};
  const bool simple = alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
  const uint32_t* ap = pack_weights(pool, m, k, av);
  const int64_t panels = (n + kBf16TileCols - 1) / kBf16TileCols;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(1, m * k));
  pool.parallel_for(panels, grain, [&](int64_t p0, int64_t p1, int) {
    const int64_t j0 = p0 * kBf16TileCols, cols = std::min(n, p1 * kBf16TileCols) - j0;
    const StridedMatrix bj{bv.data + j0 * bv.col_stride, bv.row_stride, bv.col_stride};
    if (simple) return gemm_bf16_prepacked(m, cols, k, ap, bj, c + j0, n, beta != 0.0f, dot);
    float* t = scratch(ScratchSlot::kGather, static_cast<size_t>(m * cols));
    gemm_bf16_prepacked(m, cols, k, ap, bj, t, cols, false, dot);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        float& cij = c[i * n + j0 + j];
        cij = alpha * t[i * cols + j] + (beta == 0.0f ? 0.0f : beta * cij);
      }
    }
  });
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
