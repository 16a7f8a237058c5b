// 2x2, stride-2 max pooling, vectorised over windows.
//
// Row pair r of a range of planes is input rows 2p, 2p+1 of plane r / P
// (p = r % P); its Q windows produce outputs r*Q .. r*Q + Q - 1, so the
// outputs of consecutive row pairs, across planes too, are contiguous. A
// strip of row pairs is laid out flat: the top rows, cut to their 2Q used
// columns, one after another in `top`, the bottom rows in `bottom`. Window w
// of the strip then has candidates a = top[2w], b = top[2w+1], c =
// bottom[2w], d = bottom[2w+1]: a register of windows (16, or 8 in the avx2
// build) is two vector loads per row, deinterleaved, whatever Q is.
#include "nn/cpu/pool_2x2.h"

#include <algorithm>

#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

// Windows per step: one register of each candidate (8 or 16 windows).
constexpr int kW = kNativeLanes;
using vni = int32_t __attribute__((vector_size(sizeof(vn))));

// Windows per strip: the strip's rows stay in L1.
constexpr int64_t kStripWindows = 512;

inline vni takes_over(vn v, vn best) {
  return (v > best) | (v != v);
}

// The even and odd lanes of lo:hi, and the lanes of a and b interleaved
// (the low and the high half of the result); each build uses one width.
[[maybe_unused]] inline v16 even(v16 lo, v16 hi) {
  return __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}
[[maybe_unused]] inline v16 odd(v16 lo, v16 hi) {
  return __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}
[[maybe_unused]] inline v16 interleave_low(v16 a, v16 b) {
  return __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
}
[[maybe_unused]] inline v16 interleave_high(v16 a, v16 b) {
  return __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15,
                                 31);
}
[[maybe_unused]] inline v8 even(v8 lo, v8 hi) {
  return __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14);
}
[[maybe_unused]] inline v8 odd(v8 lo, v8 hi) {
  return __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15);
}
[[maybe_unused]] inline v8 interleave_low(v8 a, v8 b) {
  return __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
}
[[maybe_unused]] inline v8 interleave_high(v8 a, v8 b) {
  return __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
}

// Row pairs [r0, r0 + rows) of the planes, flattened.
struct Strip {
  const Pool2dGeometry& g;
  int64_t r0, rows, width;  // width: the 2Q used columns of a row
  float *top, *bottom;      // (rows * width) each, zero-padded to whole vector groups
  int64_t* offsets;         // (rows): offset of the top input row of each pair

  int64_t windows() const { return rows * width / 2; }
  int64_t padded() const { return (windows() + 15) / 16 * 32; }
  void load(const float* x) {
    const int64_t P = g.out_h(), hw = g.in_h * g.in_w;
    int64_t plane = r0 / P, p = r0 % P;  // stepped below without dividing
    for (int64_t i = 0; i < rows; ++i) {
      offsets[i] = plane * hw + 2 * p * g.in_w;
      if (++p == P) p = 0, ++plane;
      const float* r = x + offsets[i];
      copy_short(r, top + i * width, width);
      copy_short(r + g.in_w, bottom + i * width, width);
    }
    zero_short(top + rows * width, padded() - rows * width);
    zero_short(bottom + rows * width, padded() - rows * width);
  }
};

// Row pairs per strip: a whole plane when it has enough windows to fill the
// vectors (measured faster), else as many planes as fit kStripWindows.
int64_t strip_rows(const Pool2dGeometry& g) {
  const int64_t P = g.out_h(), Q = g.out_w();
  if (P * Q >= 128) return std::min(P, std::max<int64_t>(1, kStripWindows / Q));
  return std::max<int64_t>(1, kStripWindows / Q / P * P);
}

// Calls f(strip) for the row pairs of planes [first, last), strip by strip.
template <typename F>
void for_each_strip(const Pool2dGeometry& g, const float* x, int64_t first, int64_t last, F&& f) {
  const int64_t per_strip = strip_rows(g), end = last * g.out_h();
  // Four row buffers; the extra 32 floats keep them from sitting a multiple
  // of 4 KiB apart, where loads from one and stores to another would alias.
  const int64_t capacity = (per_strip * g.out_w() + 15) / 16 * 32 + 32;
  float* buffer = scratch(ScratchSlot::kGather, static_cast<size_t>(4 * capacity));
  int64_t offsets[kStripWindows];  // per_strip <= kStripWindows
  for (int64_t r = first * g.out_h(); r < end; r += per_strip) {
    Strip s{g, r, std::min(per_strip, end - r), 2 * g.out_w(), buffer, buffer + capacity, offsets};
    s.load(x);
    f(s, buffer + 2 * capacity, capacity);  // two gradient row buffers
  }
}

}  // namespace

void maxpool2x2_forward(const Pool2dGeometry& g, const float* x, float* y, int64_t first,
                        int64_t last) {
  for_each_strip(g, x, first, last, [&](const Strip& s, float*, int64_t) {
    float* out = y + s.r0 * g.out_w();
    for (int64_t w = 0; w < s.windows(); w += kW) {
      const vn t0 = loadn(s.top + 2 * w), t1 = loadn(s.top + 2 * w + kW);
      const vn b0 = loadn(s.bottom + 2 * w), b1 = loadn(s.bottom + 2 * w + kW);
      vn best = even(t0, t1);
      const vn b = odd(t0, t1), c = even(b0, b1), d = odd(b0, b1);
      best = takes_over(b, best) ? b : best;
      best = takes_over(c, best) ? c : best;
      best = takes_over(d, best) ? d : best;
      if (w + kW <= s.windows()) {
        storen(out + w, best);
      } else {
        float tmp[kLanes];  // copy_short may move 16 at a time
        storen(tmp, best);
        copy_short(tmp, out + w, s.windows() - w);
      }
    }
  });
}

void maxpool2x2_backward(const Pool2dGeometry& g, const float* x, const float* dy, float* dx,
                         int64_t first, int64_t last) {
  const int64_t W = g.in_w;
  for_each_strip(g, x, first, last, [&](const Strip& s, float* grads, int64_t capacity) {
    float* dtop = grads;
    float* dbottom = grads + capacity;
    const float* grad = dy + s.r0 * g.out_w();
    for (int64_t w = 0; w < s.windows(); w += kW) {
      const vn t0 = loadn(s.top + 2 * w), t1 = loadn(s.top + 2 * w + kW);
      const vn b0 = loadn(s.bottom + 2 * w), b1 = loadn(s.bottom + 2 * w + kW);
      const vn a = even(t0, t1), b = odd(t0, t1), c = even(b0, b1), d = odd(b0, b1);
      // the winner is d if it takes over, else c if it does, else b, else a
      const vni tb = takes_over(b, a);
      const vn ab = tb ? b : a;
      const vni tc = takes_over(c, ab);
      const vni td = takes_over(d, tc ? c : ab);
      float gtmp[kLanes] = {};
      copy_short(grad + w, gtmp, std::min<int64_t>(kW, s.windows() - w));
      const vn gv = loadn(gtmp), zero = {};
      const vn ga = (tb | tc | td) ? zero : gv, gb = (tb & ~(tc | td)) ? gv : zero;
      const vn gc = (tc & ~td) ? gv : zero, gd = td ? gv : zero;
      storen(dtop + 2 * w, interleave_low(ga, gb));
      storen(dtop + 2 * w + kW, interleave_high(ga, gb));
      storen(dbottom + 2 * w, interleave_low(gc, gd));
      storen(dbottom + 2 * w + kW, interleave_high(gc, gd));
    }
    for (int64_t i = 0; i < s.rows; ++i) {
      float* d0 = dx + s.offsets[i];
      copy_short(dtop + i * s.width, d0, s.width);
      copy_short(dbottom + i * s.width, d0 + W, s.width);
      if (W > s.width) d0[W - 1] = d0[2 * W - 1] = 0.0f;  // odd width: column in no window
    }
  });
  const int64_t P = g.out_h();
  if (g.in_h > 2 * P) {  // odd height: the last row of each plane is in no window
    for (int64_t i = first; i < last; ++i) zero_short(dx + (i * g.in_h + 2 * P) * W, W);
  }
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
