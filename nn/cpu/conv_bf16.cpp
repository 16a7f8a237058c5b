// Convolutions and the dense GEMM in bf16 precision: im2col + the bf16 GEMM
// (gemm_bf16.h) for any stride and padding, per group of samples as
// conv_im2col.cpp does; inputs of every product rounded to bf16, sums,
// outputs, bias and col2im in fp32. With CRS = C*R*S, PQ = P*Q:
//   forward:         y(K, PQ)      = w(K, CRS) * col(CRS, PQ) + b
//   backward data:   dcol(CRS, PQ) = w^T(CRS, K) * dy(K, PQ), dx = col2im(dcol)
//   backward filter: dw(K, CRS)   += dy(K, PQ) * col(CRS, PQ)^T, per chunk of
//                    samples into private partials reduced in chunk order.
#include <algorithm>

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

// dst(k, gs*PQ) <- the gs samples' (k, PQ) blocks of src side by side, or back.
void gather(const float* src, int64_t gs, int64_t k, const conv::Dims& d, float* dst) {
  for (int64_t i = 0; i < gs; ++i) {
    for (int64_t r = 0; r < k; ++r)
      copy_short(src + i * d.kpq + r * d.pq, dst + r * gs * d.pq + i * d.pq, d.pq);
  }
}
void scatter(const float* src, int64_t gs, int64_t k, const conv::Dims& d, float* dst) {
  for (int64_t i = 0; i < gs; ++i) {
    for (int64_t r = 0; r < k; ++r)
      copy_short(src + r * gs * d.pq + i * d.pq, dst + i * d.kpq + r * d.pq, d.pq);
  }
}

// a(m, k) packed as bf16 pairs into the calling thread's kPackedWeights.
const uint32_t* pack_weights(int64_t m, int64_t k, StridedMatrix a) {
  auto* packed = reinterpret_cast<uint32_t*>(
      scratch(ScratchSlot::kPackedWeights, static_cast<size_t>(packed_a_bf16_size(m, k))));
  pack_a_bf16(m, k, a, packed);
  return packed;
}

// Adds samples [n0, n1) to dw (K, CRS) and db (K).
void filter_chunk(const Conv2dGeometry& g, const float* x, const float* dy, int64_t n0, int64_t n1,
                  float* dw, float* db, bool dot) {
  const conv::Dims d(g);
  const int64_t K = g.out_channels, G = group_size(d, 512);
  float* col = scratch(ScratchSlot::kColumns, static_cast<size_t>(d.crs * G * d.pq));
  float* in = scratch(ScratchSlot::kGather, static_cast<size_t>(K * G * d.pq));
  for (int64_t n = n0; n < n1; n += G) {
    const int64_t gs = std::min(G, n1 - n), ld = gs * d.pq;
    im2col(g, x + n * d.chw, gs, col, ld);
    gather(dy + n * d.kpq, gs, K, d, in);
    gemm_bf16(K, d.crs, ld, StridedMatrix{in, ld, 1}, StridedMatrix{col, 1, ld}, dw, d.crs, true,
              dot);
    for (int64_t k = 0; k < K; ++k) db[k] += sum_floats(in + k * ld, ld);
  }
}

}  // namespace

// x: (N, C, H, W), w: (K, C, R, S), b: (K) or null -> y: (N, K, P, Q)
void conv2d_forward_bf16(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const float* w,
                         const float* b, float* y, bool dot) {
  const conv::Dims d(g);
  const int64_t K = g.out_channels, G = group_size(d, 256);
  const uint32_t* wp = pack_weights(K, d.crs, StridedMatrix{w, d.crs, 1});
  pool.parallel_for(g.batch, 1, [&](int64_t n0, int64_t n1, int) {
    float* col = scratch(ScratchSlot::kColumns, static_cast<size_t>(d.crs * G * d.pq));
    float* out = scratch(ScratchSlot::kGather, static_cast<size_t>(K * G * d.pq));
    for (int64_t n = n0; n < n1; n += G) {
      const int64_t gs = std::min(G, n1 - n), ld = gs * d.pq;
      im2col(g, x + n * d.chw, gs, col, ld);
      float* target = gs == 1 ? y + n * d.kpq : out;
      if (b) {
        for (int64_t k = 0; k < K; ++k) std::fill(target + k * ld, target + (k + 1) * ld, b[k]);
      }
      gemm_bf16_prepacked(K, ld, d.crs, wp, StridedMatrix{col, ld, 1}, target, ld, b != nullptr,
                          dot);
      if (gs > 1) scatter(out, gs, K, d, y + n * d.kpq);
    }
  });
}

// w: (K, C, R, S), dy: (N, K, P, Q) -> dx: (N, C, H, W)
void conv2d_backward_data_bf16(ThreadPool& pool, const Conv2dGeometry& g, const float* w,
                               const float* dy, float* dx, bool dot) {
  const conv::Dims d(g);
  const int64_t K = g.out_channels, G = group_size(d, 256);
  const uint32_t* wtp = pack_weights(d.crs, K, StridedMatrix{w, 1, d.crs});
  pool.parallel_for(g.batch, 1, [&](int64_t n0, int64_t n1, int) {
    float* col = scratch(ScratchSlot::kColumns, static_cast<size_t>(d.crs * G * d.pq));
    float* in = scratch(ScratchSlot::kGather, static_cast<size_t>(K * G * d.pq));
    for (int64_t n = n0; n < n1; n += G) {
      const int64_t gs = std::min(G, n1 - n), ld = gs * d.pq;
      const float* dyg = dy + n * d.kpq;
      if (gs > 1) {
        gather(dyg, gs, K, d, in);
        dyg = in;
      }
      gemm_bf16_prepacked(d.crs, ld, K, wtp, StridedMatrix{dyg, ld, 1}, col, ld, false, dot);
      col2im(g, col, ld, gs, dx + n * d.chw);
    }
  });
}

// x: (N, C, H, W), dy: (N, K, P, Q) -> dw: (K, C, R, S), db: (K) or null.
// Chunks of samples fixed by the batch alone (kFilterChunk samples), so the
// sums do not depend on the thread count.
void conv2d_backward_filter_bf16(ThreadPool& pool, const Conv2dGeometry& g, const float* x,
                                 const float* dy, float* dw, float* db, bool dot) {
  constexpr int64_t kFilterChunk = 16;
  const int64_t K = g.out_channels, wsize = K * conv::Dims(g).crs, stride = wsize + K;
  const int64_t chunks = (g.batch + kFilterChunk - 1) / kFilterChunk;
  float* partials =
      scratch(ScratchSlot::kPartials, static_cast<size_t>(std::max<int64_t>(1, chunks) * stride));
  pool.parallel_for(chunks, 1, [&](int64_t c0, int64_t c1, int) {
    for (int64_t c = c0; c < c1; ++c) {
      float* dwt = partials + c * stride;
      std::fill(dwt, dwt + stride, 0.0f);
      filter_chunk(g, x, dy, c * kFilterChunk, std::min(g.batch, (c + 1) * kFilterChunk), dwt,
                   dwt + wsize, dot);
    }
  });
  pool.parallel_for(stride, 1 << 14, [&](int64_t e0, int64_t e1, int) {
    for (int64_t e = e0; e < e1; ++e) {
      float sum = 0.0f;
      for (int64_t c = 0; c < chunks; ++c) sum += partials[c * stride + e];
      if (e < wsize)
        dw[e] = sum;
      else if (db)
        db[e - wsize] = sum;
    }
  });
}

// C(m, n) = alpha op(A) op(B) + beta C with A and B rounded to bf16: blocks
// of rows of C across the pool (each packs its rows of A; B packed per block).
void gemm_bf16_op(ThreadPool& pool, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, const float* b, float beta, float* c, bool dot) {
  if (m <= 0 || n <= 0) return;
  const StridedMatrix av = ta ? StridedMatrix{a, 1, m} : StridedMatrix{a, k, 1};
  const StridedMatrix bv = tb ? StridedMatrix{b, 1, k} : StridedMatrix{b, n, 1};
  const bool simple = alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(1, n * k));
  pool.parallel_for(
      (m + kBf16TileRows - 1) / kBf16TileRows, grain, [&](int64_t p0, int64_t p1, int) {
        const int64_t r0 = p0 * kBf16TileRows, r1 = std::min(m, p1 * kBf16TileRows);
        float* cb = c + r0 * n;
        const StridedMatrix ab{av.data + r0 * av.row_stride, av.row_stride, av.col_stride};
        if (simple) return gemm_bf16(r1 - r0, n, k, ab, bv, cb, n, beta != 0.0f, dot);
        float* t = scratch(ScratchSlot::kGather, static_cast<size_t>((r1 - r0) * n));
        gemm_bf16(r1 - r0, n, k, ab, bv, t, n, false, dot);
        for (int64_t i = 0; i < (r1 - r0) * n; ++i)
          cb[i] = alpha * t[i] + (beta == 0.0f ? 0.0f : beta * cb[i]);
      });
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
