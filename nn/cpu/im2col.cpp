#include "nn/cpu/im2col.h"

#include <algorithm>

#include "nn/cpu/simd.h"

namespace lockstep::nn::cpu {
namespace {

// Output columns q whose input column q*stride + offset lies in [0, width).
struct ValidRange {
  int64_t begin = 0, end = 0;
};

ValidRange valid_range(int64_t offset, int64_t stride, int64_t width, int64_t count) {
  // smallest q with q*stride + offset >= 0, and one past the largest with < width
  int64_t begin = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t end = width - offset <= 0 ? 0 : (width - offset - 1) / stride + 1;
  begin = std::min(begin, count);
  end = std::clamp(end, begin, count);
  return {begin, end};
}

}  // namespace

void im2col(const Conv2dGeometry& g, const float* x, float* col, int64_t ld) {
  const int64_t P = g.out_h(), Q = g.out_w(), st = g.stride;
  for (int64_t c = 0; c < g.in_channels; ++c) {
    const float* plane = x + c * g.in_h * g.in_w;
    for (int64_t r = 0; r < g.kernel_h; ++r) {
      const ValidRange rows = valid_range(r - g.pad, st, g.in_h, P);
      for (int64_t s = 0; s < g.kernel_w; ++s) {
        float* dst = col + ((c * g.kernel_h + r) * g.kernel_w + s) * ld;
        const ValidRange cols = valid_range(s - g.pad, st, g.in_w, Q);
        zero_short(dst, rows.begin * Q);
        for (int64_t p = rows.begin; p < rows.end; ++p) {
          float* d = dst + p * Q;
          const float* src = plane + (p * st + r - g.pad) * g.in_w;  // input row
          const int64_t w0 = cols.begin * st + s - g.pad;  // input column of q = cols.begin
          zero_short(d, cols.begin);
          if (st == 1) {
            copy_short(src + w0, d + cols.begin, cols.end - cols.begin);
          } else {
            for (int64_t q = cols.begin; q < cols.end; ++q) d[q] = src[w0 + (q - cols.begin) * st];
          }
          zero_short(d + cols.end, Q - cols.end);
        }
        zero_short(dst + rows.end * Q, (P - rows.end) * Q);
      }
    }
  }
}

void col2im(const Conv2dGeometry& g, const float* col, int64_t ld, float* dx) {
  const int64_t P = g.out_h(), Q = g.out_w(), st = g.stride;
  std::fill(dx, dx + g.in_channels * g.in_h * g.in_w, 0.0f);
  for (int64_t c = 0; c < g.in_channels; ++c) {
    float* plane = dx + c * g.in_h * g.in_w;
    for (int64_t r = 0; r < g.kernel_h; ++r) {
      const ValidRange rows = valid_range(r - g.pad, st, g.in_h, P);
      for (int64_t s = 0; s < g.kernel_w; ++s) {
        const float* src = col + ((c * g.kernel_h + r) * g.kernel_w + s) * ld;
        const ValidRange cols = valid_range(s - g.pad, st, g.in_w, Q);
        for (int64_t p = rows.begin; p < rows.end; ++p) {
          const float* sp = src + p * Q;
          float* d = plane + (p * st + r - g.pad) * g.in_w;  // input row
          const int64_t w0 = cols.begin * st + s - g.pad;
          if (st == 1) {
            add_short(sp + cols.begin, d + w0, cols.end - cols.begin);
          } else {
            for (int64_t q = cols.begin; q < cols.end; ++q) d[w0 + (q - cols.begin) * st] += sp[q];
          }
        }
      }
    }
  }
}

}  // namespace lockstep::nn::cpu
