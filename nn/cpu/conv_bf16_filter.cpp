// The weight gradient of a convolution in bf16 precision (kernels.h), with
// CRS = C*R*S and T the output positions of a group of samples:
//   dw^T(CRS, K) += col(CRS, T) * dy^T(T, K)
// in bf16 pairs of consecutive positions: an im2col that writes bf16 (16
// bits) makes each pair a 32-bit word of a row of col, read in place as A;
// dy is rounded and transposed into rows of pairs (B). Per chunk of samples
// into private partials (dw^T, then db), reduced in chunk order; the chunks
// depend on the batch alone, so the sums do not depend on the thread count.
#include <algorithm>
#include <cstring>

#include "nn/cpu/bf16_convert.h"
#include "nn/cpu/conv_common.h"
#include "nn/cpu/gemm_bf16.h"
#include "nn/cpu/kernels.h"
#include "nn/cpu/round_up.h"
#include "nn/cpu/scratch.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

constexpr int64_t kSlack = 64;  // 16-bit elements past the end of copies that overshoot

struct Sizes {
  conv::Dims d;
  // kpad: K rounded up to whole panels of B, panel (width) columns each;
  // ld: 16-bit elements per row of col
  int64_t hp, wp, area, group, rows, kpad, panel, ld;
  explicit Sizes(const Conv2dGeometry& g)
      : d(g),
        hp(g.in_h + 2 * g.pad),
        wp(g.in_w + 2 * g.pad),
        area(hp * wp),
        group(std::clamp<int64_t>((512 + d.pq - 1) / d.pq, 1,
                                  std::max<int64_t>(1, (int64_t{1} << 21) / (d.crs * d.pq)))),
        rows(round_up(d.crs, kBf16RowsAlign)),
        kpad(round_up(g.out_channels, g.out_channels > 64 ? 64 : kLanes)),
        panel(std::min<int64_t>(kpad, 64)),
        ld(round_up(group * d.pq, 2)) {}
};

// u16 scratch of n elements (plus slack).
uint16_t* scratch16(ScratchSlot slot, int64_t n) {
  return reinterpret_cast<uint16_t*>(scratch(slot, static_cast<size_t>((n + kSlack) / 2 + 1)));
}

// xp (count, C, Hp, Wp) <- bf16 of x (count, C, H, W), zero padding.
void pad_bf16(const Conv2dGeometry& g, const Sizes& z, const float* x, int64_t count, uint16_t* xp,
              bool dot) {
  std::memset(xp, 0, sizeof(uint16_t) * static_cast<size_t>(count * g.in_channels * z.area));
  for (int64_t p = 0; p < count * g.in_channels; ++p) {
    for (int64_t h = 0; h < g.in_h; ++h) {
      bf16_row(x + (p * g.in_h + h) * g.in_w, g.in_w, xp + p * z.area + (h + g.pad) * z.wp + g.pad,
               dot);
    }
  }
}

// dst[p*Q + q] = src[p*step + q] for p < rows, q < Q, in moves of B bytes
// (each row may write and read up to B bytes past its end).
template <int B>
void copy_rows_u16(const uint16_t* src, int64_t step, uint16_t* dst, int64_t rows, int64_t Q) {
  for (int64_t p = 0; p < rows; ++p) {
    for (int64_t j = 0; j < Q; j += B / 2) std::memcpy(dst + p * Q + j, src + p * step + j, B);
  }
}

// col (CRS rows, ld apart) <- im2col of the count samples of xp; columns
// from count*PQ to ld zero.
void im2col_bf16(const Conv2dGeometry& g, const Sizes& z, const uint16_t* xp, int64_t count,
                 uint16_t* col, int64_t ld) {
  const int64_t P = g.out_h(), Q = g.out_w(), step = g.stride * z.wp;
  auto copy = Q <= 8 ? copy_rows_u16<16> : Q <= 16 ? copy_rows_u16<32> : copy_rows_u16<64>;
  for (int64_t c = 0; c < g.in_channels; ++c) {
    for (int64_t r = 0; r < g.kernel_h; ++r) {
      for (int64_t s = 0; s < g.kernel_w; ++s) {
        uint16_t* dst = col + ((c * g.kernel_h + r) * g.kernel_w + s) * ld;
        for (int64_t i = 0; i < count; ++i) {
          const uint16_t* src = xp + (i * g.in_channels + c) * z.area + r * z.wp + s;
          uint16_t* d = dst + i * P * Q;
          if (g.stride == 1) {
            copy(src, step, d, P, Q);
            continue;
          }
          for (int64_t p = 0; p < P; ++p) {
            for (int64_t q = 0; q < Q; ++q) d[p * Q + q] = src[p * step + q * g.stride];
          }
        }
        std::fill(dst + count * P * Q, dst + ld, uint16_t{0});
      }
    }
  }
}

// dst <- word (u, k) = the pair of src(k, 2u) and src(k, 2u+1) (K rows of
// n floats, ld apart; zero past them), u < (n+1)/2, k < kpad, in panels of
// `panel` columns: at dst + (k / panel) * (n+1)/2 * panel + u * panel + k % panel
// (contiguous rows: a power-of-two row stride would crowd the L1 sets).
void pair_transpose(const float* src, int64_t K, int64_t n, int64_t ld, int64_t kpad, int64_t panel,
                    uint32_t* dst) {
  const int64_t nu = (n + 1) / 2;
  auto at = [&](int64_t u, int64_t k) {
    return dst + k / panel * nu * panel + u * panel + k % panel;
  };
  for (int64_t u0 = 0; u0 < nu; u0 += kLanes) {
    const int64_t un = std::min<int64_t>(kLanes, nu - u0);
    int64_t k0 = 0;
    for (; 2 * (u0 + kLanes) <= n && k0 + kLanes <= K; k0 += kLanes) {
      v16u t[kLanes];
      for (int j = 0; j < kLanes; ++j) t[j] = pairs16(src + (k0 + j) * ld + 2 * u0);
      transpose_pairs(t);
      for (int q = 0; q < kLanes; ++q) std::memcpy(at(u0 + q, k0), &t[q], sizeof t[q]);
    }
    for (int64_t u = u0; u < u0 + un; ++u) {
      for (int64_t k = k0; k < kpad; ++k) {
        const float* s = src + k * ld + 2 * u;
        const uint32_t lo = k < K ? bf16_bits(s[0]) : 0u;
        const uint32_t hi = k < K && 2 * u + 1 < n ? bf16_bits(s[1]) : 0u;
        *at(u, k) = lo | (hi << 16);
      }
    }
  }
}

// Adds samples [n0, n1) to dwt (rows x kpad: dw^T) and db (K; null: no bias).
void filter_chunk(const Conv2dGeometry& g, const Sizes& z, const float* x, const float* dy,
                  int64_t n0, int64_t n1, float* dwt, float* db, bool dot) {
  const conv::Dims& d = z.d;
  const int64_t K = g.out_channels;
  uint16_t* xp = scratch16(ScratchSlot::kPadded, z.group * g.in_channels * z.area);
  uint16_t* col = scratch16(ScratchSlot::kColumns, z.rows * z.ld);
  float* in = scratch(ScratchSlot::kGather, static_cast<size_t>(K * z.group * d.pq));
  auto* dyp = reinterpret_cast<uint32_t*>(
      scratch(ScratchSlot::kBf16Input, static_cast<size_t>(z.ld / 2 * z.kpad)));
  for (int64_t n = n0; n < n1; n += z.group) {
    const int64_t gs = std::min(z.group, n1 - n), ld = gs * d.pq, ldp = round_up(ld, 2);
    pad_bf16(g, z, x + n * d.chw, gs, xp, dot);
    im2col_bf16(g, z, xp, gs, col, ldp);
    std::fill(col + d.crs * ldp, col + z.rows * ldp, uint16_t{0});
    const float* dyg = dy + n * d.kpq;  // (K, ld): one sample as it is
    if (gs > 1) {
      conv::gather_samples(dyg, gs, K, d, in);
      dyg = in;
    }
    pair_transpose(dyg, K, ld, ld, z.kpad, z.panel, dyp);
    gemm_bf16_rows(z.rows, z.kpad, ldp / 2, reinterpret_cast<const uint32_t*>(col), ldp / 2, dyp,
                   z.panel, ldp / 2 * z.panel, dwt, z.kpad, true, dot);
    if (db) {
      for (int64_t k = 0; k < K; ++k) db[k] += sum_floats(dyg + k * ld, ld);
    }
  }
}

}  // namespace

// x: (N, C, H, W), dy: (N, K, P, Q) -> dw: (K, C, R, S), db: (K) or null.
void conv2d_backward_filter_bf16(ThreadPool& pool, const Conv2dGeometry& g, const float* x,
                                 const float* dy, float* dw, float* db, bool dot) {
  const Sizes z(g);
  const int64_t K = g.out_channels, crs = z.d.crs, wt = z.rows * z.kpad, stride = wt + K;
  const int chunks = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(g.batch, K * crs > (int64_t{1} << 16) ? 4 : 16)));
  float* partials = scratch(ScratchSlot::kPartials, static_cast<size_t>(chunks * stride));
  conv::for_each_chunk(pool, g.batch, chunks, partials, stride,
                       [&](int64_t n0, int64_t n1, float* part) {
                         filter_chunk(g, z, x, dy, n0, n1, part, db ? part + wt : nullptr, dot);
                       });
  // dw(k, e) = sum over chunks (in order) of dw^T(e, k): blocks of 16 x 16
  // summed as rows of dw^T, then transposed.
  pool.parallel_for((crs + kLanes - 1) / kLanes, 4, [&](int64_t b0, int64_t b1, int) {
    for (int64_t e0 = b0 * kLanes; e0 < std::min(crs, b1 * kLanes); e0 += kLanes) {
      const int64_t en = std::min<int64_t>(kLanes, crs - e0);
      for (int64_t k0 = 0; k0 < K; k0 += kLanes) {
        v16 sums[kLanes] = {};
        for (int64_t e = 0; e < en; ++e) {
          const float* p = partials + (e0 + e) * z.kpad + k0;
          sums[e] = load16(p);
          for (int t = 1; t < chunks; ++t) sums[e] += load16(p + t * stride);
        }
        transpose16x16(sums);
        for (int64_t k = 0; k < std::min<int64_t>(kLanes, K - k0); ++k) {
          for (int64_t e = 0; e < en; ++e) dw[(k0 + k) * crs + e0 + e] = sums[k][e];
        }
      }
    }
  });
  if (db) {
    for (int64_t k = 0; k < K; ++k) {
      float sum = 0.0f;
      for (int t = 0; t < chunks; ++t) sum += partials[t * stride + wt + k];
      db[k] = sum;
    }
  }
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
