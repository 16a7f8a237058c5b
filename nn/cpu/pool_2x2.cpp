// 2x2, stride-2 max pooling, vectorised over windows.
//
// The windows of a strip of row pairs are laid out flat: the top rows of the
// pairs, cut to their 2Q used columns, are copied one after another into
// `top`, the bottom rows into `bottom`. Window w of the strip (row-major)
// then has candidates a = top[2w], b = top[2w+1], c = bottom[2w],
// d = bottom[2w+1]: sixteen windows are two vector loads per row,
// deinterleaved, whatever Q is. Outputs y and dy are flat in the same order.
#include "nn/cpu/pool_2x2.h"

#include <algorithm>

#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"

namespace lockstep::nn::cpu {
namespace {

using v16i = int32_t __attribute__((vector_size(64)));

// Windows per strip: the strip's rows stay in L1.
constexpr int64_t kStripWindows = 256;

inline v16i takes_over16(v16 v, v16 best) {
  return (v > best) | (v != v);
}

inline v16 even(v16 lo, v16 hi) {
  return __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}
inline v16 odd(v16 lo, v16 hi) {
  return __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

struct Strip {
  int64_t rows = 0, width = 0;  // row pairs; 2Q used columns per row
  float *top = nullptr, *bottom = nullptr;
  int64_t windows() const { return rows * width / 2; }
};

// Copies row pairs [p0, p0 + rows) of x into the strip, zero-padded to whole
// groups of 16 windows.
void load_strip(const Pool2dGeometry& g, const float* x, int64_t p0, Strip& s) {
  for (int64_t i = 0; i < s.rows; ++i) {
    const float* r0 = x + 2 * (p0 + i) * g.in_w;
    copy_short(r0, s.top + i * s.width, s.width);
    copy_short(r0 + g.in_w, s.bottom + i * s.width, s.width);
  }
  const int64_t used = s.rows * s.width, padded = (s.windows() + 15) / 16 * 32;
  zero_short(s.top + used, padded - used);
  zero_short(s.bottom + used, padded - used);
}

Strip make_strip(const Pool2dGeometry& g, int64_t rows, float* buffer) {
  Strip s;
  s.rows = rows;
  s.width = 2 * g.out_w();
  const int64_t padded = (s.rows * s.width / 2 + 15) / 16 * 32;
  s.top = buffer;
  s.bottom = buffer + padded;
  return s;
}

int64_t strip_rows(const Pool2dGeometry& g) {
  return std::clamp<int64_t>(kStripWindows / std::max<int64_t>(1, g.out_w()), 1, g.out_h());
}

// Scratch for a strip and its gradient rows.
float* strip_buffer(const Pool2dGeometry& g) {
  const int64_t padded = (strip_rows(g) * g.out_w() + 15) / 16 * 32;
  return scratch(ScratchSlot::kGather, static_cast<size_t>(4 * padded));
}

}  // namespace

void maxpool2x2_forward_plane(const Pool2dGeometry& g, const float* x, float* y) {
  const int64_t P = g.out_h(), Q = g.out_w(), rows = strip_rows(g);
  float* buffer = strip_buffer(g);
  for (int64_t p0 = 0; p0 < P; p0 += rows) {
    Strip s = make_strip(g, std::min(rows, P - p0), buffer);
    load_strip(g, x, p0, s);
    float* out = y + p0 * Q;
    for (int64_t w = 0; w < s.windows(); w += 16) {
      const v16 t0 = load16(s.top + 2 * w), t1 = load16(s.top + 2 * w + 16);
      const v16 b0 = load16(s.bottom + 2 * w), b1 = load16(s.bottom + 2 * w + 16);
      v16 best = even(t0, t1);
      const v16 b = odd(t0, t1), c = even(b0, b1), d = odd(b0, b1);
      best = takes_over16(b, best) ? b : best;
      best = takes_over16(c, best) ? c : best;
      best = takes_over16(d, best) ? d : best;
      if (w + 16 <= s.windows()) {
        store16(out + w, best);
      } else {
        float tmp[16];
        store16(tmp, best);
        copy_short(tmp, out + w, s.windows() - w);
      }
    }
  }
}

void maxpool2x2_backward_plane(const Pool2dGeometry& g, const float* x, const float* dy,
                               float* dx) {
  const int64_t P = g.out_h(), Q = g.out_w(), W = g.in_w, rows = strip_rows(g);
  float* buffer = strip_buffer(g);
  for (int64_t p0 = 0; p0 < P; p0 += rows) {
    Strip s = make_strip(g, std::min(rows, P - p0), buffer);
    load_strip(g, x, p0, s);
    const int64_t padded = (s.windows() + 15) / 16 * 32;
    float* dtop = s.bottom + padded;
    float* dbottom = dtop + padded;
    const float* grad = dy + p0 * Q;
    for (int64_t w = 0; w < s.windows(); w += 16) {
      const v16 t0 = load16(s.top + 2 * w), t1 = load16(s.top + 2 * w + 16);
      const v16 b0 = load16(s.bottom + 2 * w), b1 = load16(s.bottom + 2 * w + 16);
      const v16 a = even(t0, t1), b = odd(t0, t1), c = even(b0, b1), d = odd(b0, b1);
      // the winner is d if it takes over, else c if it does, else b, else a
      const v16i tb = takes_over16(b, a);
      const v16 ab = tb ? b : a;
      const v16i tc = takes_over16(c, ab);
      const v16i td = takes_over16(d, tc ? c : ab);
      float gtmp[16] = {};
      copy_short(grad + w, gtmp, std::min<int64_t>(16, s.windows() - w));
      const v16 gv = load16(gtmp), zero = {};
      const v16 ga = (tb | tc | td) ? zero : gv, gb = (tb & ~(tc | td)) ? gv : zero;
      const v16 gc = (tc & ~td) ? gv : zero, gd = td ? gv : zero;
      store16(dtop + 2 * w, __builtin_shufflevector(ga, gb, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5,
                                                    21, 6, 22, 7, 23));
      store16(dtop + 2 * w + 16, __builtin_shufflevector(ga, gb, 8, 24, 9, 25, 10, 26, 11, 27, 12,
                                                         28, 13, 29, 14, 30, 15, 31));
      store16(dbottom + 2 * w, __builtin_shufflevector(gc, gd, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5,
                                                       21, 6, 22, 7, 23));
      store16(dbottom + 2 * w + 16, __builtin_shufflevector(gc, gd, 8, 24, 9, 25, 10, 26, 11, 27,
                                                            12, 28, 13, 29, 14, 30, 15, 31));
    }
    for (int64_t i = 0; i < s.rows; ++i) {
      float* d0 = dx + 2 * (p0 + i) * W;
      copy_short(dtop + i * s.width, d0, s.width);
      copy_short(dbottom + i * s.width, d0 + W, s.width);
      if (W > s.width) d0[W - 1] = d0[2 * W - 1] = 0.0f;  // odd width: column in no window
    }
  }
  zero_short(dx + 2 * P * W, (g.in_h - 2 * P) * W);  // odd height: row in no window
}

}  // namespace lockstep::nn::cpu
