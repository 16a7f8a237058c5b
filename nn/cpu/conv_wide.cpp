// Convolution with stride 1 as "wide" GEMMs that read the input in place.
//
// A sample is copied, zero-padded, into a (C, Hp, Wp) plane followed by a
// few zeros (Hp = H + 2 pad, Wp = W + 2 pad). Output position (p, q) becomes
// wide column j = p*Wp + q, and row (c, r, s) of the column matrix is just
// the padded plane from offset off(c, r, s) = c*Hp*Wp + r*Wp + s on:
//   col(crs, j) = xp[off(crs) + j],   j < L = (P-1)*Wp + Q,
// so no im2col copy is made. Columns with q >= Q, and those up to Lr (L
// rounded up to whole vectors), are wasted work: the forward pass drops
// them and the backward passes give them zero gradient. Per sample:
//   forward:         yw(K, Lr)     = w(K, CRS) * col(CRS, Lr) + b;  y = yw less the gaps
//   backward data:   dcol(CRS, Lr) = w(K, CRS)^T * dyw(K, Lr)  (dy with zero gaps, one
//                    channel's R*S rows at a time);
//                    dxp[c*Hp*Wp + t] = sum over (r, s) of dcol((c, r, s), t - r*Wp - s);
//                    dx = dxp less the padding
//   backward filter: dw(K, CRS)   += dyw(K, Lr) * col(CRS, Lr)^T
#include <algorithm>
#include <vector>

#include "nn/cpu/conv_common.h"
#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"
#include "nn/cpu/small_gemm.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv {
namespace {

// Zeros after the padded planes, so that rows read up to Lr stay in bounds.
constexpr int64_t kSlack = kLanes;
// Scratch of a weight-gradient group stays below this many floats.
constexpr int64_t kGroupBudget = int64_t{1} << 18;

struct Wide {
  int64_t hp, wp, area, plane, L, Lr;
  std::vector<int64_t> offsets;  // (CRS): off(c, r, s)

  explicit Wide(const Conv2dGeometry& g)
      : hp(g.in_h + 2 * g.pad),
        wp(g.in_w + 2 * g.pad),
        area(hp * wp),
        plane(g.in_channels * area + kSlack),
        L((g.out_h() - 1) * wp + g.out_w()),
        Lr((L + kLanes - 1) / kLanes * kLanes) {
    offsets.reserve(static_cast<size_t>(g.in_channels * g.kernel_h * g.kernel_w));
    for (int64_t c = 0; c < g.in_channels; ++c) {
      for (int64_t r = 0; r < g.kernel_h; ++r) {
        for (int64_t s = 0; s < g.kernel_w; ++s) offsets.push_back(c * area + r * wp + s);
      }
    }
  }
  RowMatrix columns(const float* xp) const { return {xp, 0, offsets.data()}; }
};

// xp: (C, Hp, Wp) + slack <- x: (C, H, W) with zero padding
void pad_sample(const Conv2dGeometry& g, const Wide& wd, const float* x, float* xp) {
  zero_short(xp, wd.plane);
  for (int64_t c = 0; c < g.in_channels; ++c) {
    for (int64_t h = 0; h < g.in_h; ++h) {
      copy_short(x + (c * g.in_h + h) * g.in_w, xp + c * wd.area + (h + g.pad) * wd.wp + g.pad,
                 g.in_w);
    }
  }
}

// The padded plane of sample n: x itself when there is no padding and the
// reads up to Lr stay inside the batch (they run into the next sample, in
// wasted columns), else a padded copy in xp.
const float* padded_input(const Conv2dGeometry& g, const Wide& wd, const float* x, int64_t n,
                          float* xp) {
  const int64_t chw = g.in_channels * g.in_h * g.in_w;
  if (g.pad == 0 && n + 1 < g.batch) return x + n * chw;
  pad_sample(g, wd, x + n * chw, xp);
  return xp;
}

// dyw: (K, Lr) <- dy: (K, P, Q). Only the data positions are written: the
// caller zeroes dyw once, and the gaps stay zero across samples.
void widen(const Conv2dGeometry& g, const Wide& wd, const float* dy, float* dyw) {
  const int64_t P = g.out_h(), Q = g.out_w();
  for (int64_t k = 0; k < g.out_channels; ++k) {
    for (int64_t p = 0; p < P; ++p)
      copy_short(dy + (k * P + p) * Q, dyw + k * wd.Lr + p * wd.wp, Q);
  }
}

// y: (K, P, Q) <- yw: (K, Lr) less the gaps
void narrow(const Conv2dGeometry& g, const Wide& wd, const float* yw, float* y) {
  const int64_t P = g.out_h(), Q = g.out_w();
  for (int64_t k = 0; k < g.out_channels; ++k) {
    for (int64_t p = 0; p < P; ++p) copy_short(yw + k * wd.Lr + p * wd.wp, y + (k * P + p) * Q, Q);
  }
}

// dx: (C, H, W) <- xp: (C, Hp, Wp) less the padding
void crop(const Conv2dGeometry& g, const Wide& wd, const float* xp, float* dx) {
  for (int64_t c = 0; c < g.in_channels; ++c) {
    for (int64_t h = 0; h < g.in_h; ++h) {
      copy_short(xp + c * wd.area + (h + g.pad) * wd.wp + g.pad, dx + (c * g.in_h + h) * g.in_w,
                 g.in_w);
    }
  }
}

// out[t] = sum over i < count of rows[shifts[i] + t], for t < 16 * blocks:
// the adjoint of reading shifted rows. Four accumulators keep the additions
// independent; each output is written once. Native registers (vn): a v16
// accumulator array lives on the stack in the avx2 build (4x slower there);
// each lane's additions are the same in both builds.
void gather_shifted(const float* rows, const int64_t* shifts, int64_t count, int64_t blocks,
                    float* out) {
  for (int64_t t = 0; t < blocks * kLanes; t += kNativeLanes) {
    vn acc[4] = {};
    int64_t i = 0;
    for (; i + 4 <= count; i += 4) {
      for (int a = 0; a < 4; ++a) acc[a] += loadn(rows + shifts[i + a] + t);
    }
    for (; i < count; ++i) acc[0] += loadn(rows + shifts[i] + t);
    storen(out + t, (acc[0] + acc[1]) + (acc[2] + acc[3]));
  }
}

}  // namespace

bool wide_applies(const Conv2dGeometry& g) {
  // Narrow outputs go to im2col, whose fixed-width row copies are cheaper
  // than the wasted columns here.
  if (g.stride != 1 || g.out_w() <= 16) return false;
  const int64_t wp = g.in_w + 2 * g.pad, pq = g.out_h() * g.out_w();
  const int64_t lr = ((g.out_h() - 1) * wp + g.out_w() + kLanes - 1) / kLanes * kLanes;
  return 2 * lr <= 3 * pq;  // at most 50% wasted columns
}

// x: (N, C, H, W), w: (K, C, R, S), b: (K) or null -> y: (N, K, P, Q)
void wide_forward(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const float* w,
                  const float* b, float* y) {
  const Dims d(g);
  const Wide wd(g);
  const int64_t K = g.out_channels;
  pool.parallel_for(g.batch, 1, [&](int64_t n0, int64_t n1, int) {
    float* xp = scratch(ScratchSlot::kPadded, static_cast<size_t>(wd.plane));
    float* yw = scratch(ScratchSlot::kGather, static_cast<size_t>(K * wd.Lr));
    for (int64_t n = n0; n < n1; ++n) {
      const float* in = padded_input(g, wd, x, n, xp);
      gemm_nn(K, wd.Lr, d.crs, StridedMatrix{w, d.crs, 1}, wd.columns(in), yw, wd.Lr, b, false);
      narrow(g, wd, yw, y + n * d.kpq);
    }
  });
}

// w: (K, C, R, S), dy: (N, K, P, Q) -> dx: (N, C, H, W)
void wide_backward_data(ThreadPool& pool, const Conv2dGeometry& g, const float* w, const float* dy,
                        float* dx) {
  const Dims d(g);
  const Wide wd(g);
  const int64_t K = g.out_channels, R = g.kernel_h, S = g.kernel_w;
  // dcol rows carry zero margins, so that every shifted read of
  // gather_shifted is in bounds: `left` before the Lr data columns, `right`
  // after them.
  const int64_t blocks = (wd.area + kLanes - 1) / kLanes;
  const int64_t left = ((R - 1) * wd.wp + S - 1 + kLanes - 1) / kLanes * kLanes;
  const int64_t right = std::max<int64_t>(0, blocks * kLanes - wd.Lr);
  const int64_t ld = left + wd.Lr + right;
  std::vector<int64_t> shifts;  // (R*S): where row (r, s) of a channel reads, relative to t
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t s = 0; s < S; ++s) shifts.push_back((r * S + s) * ld - r * wd.wp - s);
  }
  pool.parallel_for(g.batch, 1, [&](int64_t n0, int64_t n1, int) {
    float* dyw = scratch(ScratchSlot::kGather, static_cast<size_t>(K * wd.Lr));
    float* dcol = scratch(ScratchSlot::kColumns, static_cast<size_t>(R * S * ld));
    float* dxp =
        scratch(ScratchSlot::kPadded, static_cast<size_t>(blocks * kLanes * g.in_channels));
    zero_short(dyw, K * wd.Lr);
    zero_short(dcol, R * S * ld);
    for (int64_t n = n0; n < n1; ++n) {
      widen(g, wd, dy + n * d.kpq, dyw);
      // One channel at a time, so that its R*S rows of dcol stay in L1.
      for (int64_t c = 0; c < g.in_channels; ++c) {
        gemm_nn(R * S, wd.Lr, K, StridedMatrix{w + c * R * S, 1, d.crs}, RowMatrix{dyw, wd.Lr},
                dcol + left, ld, nullptr, false);
        gather_shifted(dcol + left, shifts.data(), R * S, blocks, dxp + c * wd.area);
      }
      crop(g, wd, dxp, dx + n * d.chw);
    }
  });
}

// Adds samples [n0, n1) to dw (K, CRS) and db (K; null: no bias), a group
// of samples per GEMM so that the dot products are long.
void wide_filter_chunk(const Conv2dGeometry& g, const float* x, const float* dy, int64_t n0,
                       int64_t n1, float* dw, float* db) {
  const Dims d(g);
  const Wide wd(g);
  const int64_t K = g.out_channels, per_sample = wd.plane + K * wd.Lr;
  const int64_t G = std::clamp<int64_t>((256 + wd.Lr - 1) / wd.Lr, 1,
                                        std::max<int64_t>(1, kGroupBudget / per_sample));
  float* xg = scratch(ScratchSlot::kPadded, static_cast<size_t>(G * wd.plane));
  float* dyw = scratch(ScratchSlot::kGather, static_cast<size_t>(G * K * wd.Lr));
  zero_short(dyw, G * K * wd.Lr);
  for (int64_t n = n0; n < n1; n += G) {
    const int64_t gs = std::min(G, n1 - n);
    for (int64_t i = 0; i < gs; ++i) {
      float* dyi = dyw + i * K * wd.Lr;
      pad_sample(g, wd, x + (n + i) * d.chw, xg + i * wd.plane);
      widen(g, wd, dy + (n + i) * d.kpq, dyi);
      if (db) {
        for (int64_t k = 0; k < K; ++k) db[k] += sum_floats(dyi + k * wd.Lr, wd.Lr);
      }
    }
    gemm_nt_acc(K, d.crs, dyw, wd.Lr, wd.columns(xg), Segments{gs, wd.Lr, K * wd.Lr, wd.plane}, dw,
                d.crs);
  }
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv
