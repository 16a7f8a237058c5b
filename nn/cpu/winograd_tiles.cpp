// The input side of the Winograd convolution (winograd_tiles.h): strips of
// input rows transposed to vectors of channels, and each tile's B^T d B.
#include "nn/cpu/winograd_tiles.h"

#include <algorithm>
#include <cstdint>

#include "nn/cpu/simd.h"
#include "nn/cpu/simd_native.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv::winograd {
namespace {

// B^T d for one column of 6 vectors, in two halves: rows 0-2 and rows 3-5
// of the result (each half's own terms, the same arithmetic as one pass).
[[gnu::always_inline]] inline void input_1d_low(const vn (&d)[kAlpha], vn (&o)[3]) {
  const vn a = d[4] - 4.0f * d[2], b = d[3] - 4.0f * d[1];
  o[0] = 4.0f * d[0] - 5.0f * d[2] + d[4];
  o[1] = a + b;
  o[2] = a - b;
}
[[gnu::always_inline]] inline void input_1d_high(const vn (&d)[kAlpha], vn (&o)[3]) {
  const vn c = d[4] - d[2], e = 2.0f * (d[3] - d[1]);
  o[0] = c + e;
  o[1] = c - e;
  o[2] = 4.0f * d[1] - 5.0f * d[3] + d[5];
}

// Rows [3 half, 3 half + 3) of B^T d B of the tile whose patch starts at
// strip (rows strip_w * L apart), to v + e * v_stride: 18 of the 36
// intermediate vectors, which stay in registers (all 36 at once spilled
// to the stack, which doubled the stores, the bottleneck on Zen 4).
template <int half>
[[gnu::always_inline]] inline void input_tile_half(const float* strip, int64_t strip_w, float* v,
                                                   int64_t v_stride) {
  vn t[3][kAlpha];  // t[i][j]: (B^T d)(3 half + i, j)
  for (int j = 0; j < kAlpha; ++j) {
    vn col[kAlpha], o[3];
    for (int i = 0; i < kAlpha; ++i) col[i] = loadn(strip + (i * strip_w + j) * L);
    if constexpr (half == 0) {
      input_1d_low(col, o);
    } else {
      input_1d_high(col, o);
    }
    for (int i = 0; i < 3; ++i) t[i][j] = o[i];
  }
  for (int i = 0; i < 3; ++i) {
    vn low[3], high[3];  // columns 0-2 and 3-5 of (B^T d B) row 3 half + i
    input_1d_low(t[i], low);
    input_1d_high(t[i], high);
    float* row = v + (3 * half + i) * kAlpha * v_stride;
    for (int j = 0; j < 3; ++j) storen(row + j * v_stride, low[j]);
    for (int j = 0; j < 3; ++j) storen(row + (3 + j) * v_stride, high[j]);
  }
}

// The tile whose patch starts at strip + column * L (rows strip_w * L
// apart): its 36 vectors B^T d B to v + e * v_stride.
void input_tile(const float* strip, int64_t strip_w, float* v, int64_t v_stride) {
  input_tile_half<0>(strip, strip_w, v, v_stride);
  input_tile_half<1>(strip, strip_w, v, v_stride);
}

// v < 0 ? 0 : v lane by lane, in one instruction: maxps(0, v) gives its
// second operand unless the first is greater (-0.0 and NaN kept).
[[gnu::always_inline]] inline vn max_zero(vn v) {
#if defined(__AVX512F__)
  return reinterpret_cast<vn>(
      _mm512_maskz_max_ps(__mmask16{0xffff}, _mm512_setzero_ps(), reinterpret_cast<__m512>(v)));
#else
  return reinterpret_cast<vn>(_mm256_max_ps(_mm256_setzero_ps(), reinterpret_cast<__m256>(v)));
#endif
}

// The map of a strip's channel vectors (Planes::map): v * scale + shift,
// then v < 0 ? 0 : v, lane by lane as batchnorm_apply's planes: one fused
// multiply-add, as the compiler contracts both (the kernels build with
// contraction; CpuWinograd.AMappedInputIsTheBatchNormApplyThenTheConvolution
// checks the bits on every shape and instruction set).
class ChannelMap {
 public:
  // lanes: the channels of the block present, none or negative past the
  // last (the avx2 build's second half of a padded 16-channel block).
  ChannelMap(const Planes& z, int64_t cb, int64_t lanes) : relu_(z.map.relu) {
    if (z.map.coef == nullptr) return;
    on_ = true;  // zeros past the last channel: they stay zero
    const int64_t n = std::clamp<int64_t>(lanes, 0, L);
    scale_ = loadn_part(z.map.coef + cb * L, n);
    shift_ = loadn_part(z.map.coef + z.channels + cb * L, n);
  }
  bool on() const { return on_; }
  [[gnu::always_inline]] vn operator()(vn v) const {
    v = v * scale_ + shift_;
    return relu_ ? max_zero(v) : v;
  }

 private:
  bool on_ = false, relu_;
  vn scale_{}, shift_{};
};

}  // namespace

// Input rows fetched ahead of the strip being filled: a block reads its
// rows from 16 channel planes at once, each a page or less, where the
// hardware prefetchers stop (resnet20 fp32 1.06-1.08x faster with them).
constexpr int64_t kPrefetchRows = 4;

// Plane columns filled lane by lane rather than transposed, when a row
// ends with this many or fewer (the one or two columns the tiles still
// read past the last whole vector of a 16-wide row, say).
constexpr int64_t kFewColumns = 4;

// The transposed groups start at plane column 0, so that rows of whole
// vectors are read with plain loads, the padding columns written as zeros
// apart.
void fill_strip(const Planes& z, const float* x, int64_t cb, int64_t h0, int64_t count,
                float* strip) {
  const int64_t lanes = std::min(L, z.channels - cb * L);  // channels present
  const int64_t plane = z.h * z.w;
  const int64_t left = std::min(z.pad, z.used);        // zero columns on the left
  const int64_t last = std::min(z.w, z.used - z.pad);  // plane columns read
  const ChannelMap map(z, cb, lanes);
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
          storen(dst + (p + j) * L, map.on() ? map(loadn(v)) : loadn(v));
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
      if (map.on()) {
        for (int64_t j = 0; j < columns; ++j) storen(dst + (p + j) * L, map(r[j]));
        continue;
      }
      for (int64_t j = 0; j < columns; ++j) storen(dst + (p + j) * L, r[j]);
    }
    if (z.pad + last < z.used) std::fill(dst + last * L, out + z.used * L, 0.0f);
  }
}

// Each sample's input rows are transposed once, then its tiles transformed.
void transform_inputs(const Wino& z, const float* x, int64_t r0, int64_t r1, float* strip,
                      float* v) {
  const int64_t v_row = z.v_row();
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
                     v + t * v_row + cb * L, z.CL);
        }
      }
    }
  }
  const int64_t tiles = (r1 - r0) * z.tw, rows = round_up(tiles, kRowGroup);
  std::fill(v + tiles * v_row, v + rows * v_row, 0.0f);  // padding tiles: zeros, not stale values
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv::winograd
