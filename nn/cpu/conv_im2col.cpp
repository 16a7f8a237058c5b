// Convolution by im2col + GEMM, for any stride and padding. Per sample, with
// CRS = C*R*S and PQ = P*Q:
//   forward:         y(K, PQ)      = w(K, CRS) * col(CRS, PQ) + b
//   backward data:   dcol(CRS, PQ) = w(K, CRS)^T * dy(K, PQ), dx = col2im(dcol)
//   backward filter: dw(K, CRS)   += dy(K, PQ) * col(CRS, PQ)^T
// When PQ is small, a group of samples shares one wider GEMM (their columns
// side by side), so register tiles stay full. Large weights go through the
// packed GEMM (packed_gemm.h), w or w^T packed once per call.
#include <algorithm>

#include "nn/cpu/conv_common.h"
#include "nn/cpu/im2col.h"
#include "nn/cpu/packed_gemm.h"
#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"
#include "nn/cpu/small_gemm.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv {
namespace {

// Column buffers of a group stay below this many floats (4 MiB).
constexpr int64_t kColumnBudget = int64_t{1} << 20;

// Samples per GEMM: at least min_columns output columns, within the budget.
int64_t group_size(const Dims& d, int64_t min_columns, int64_t budget = kColumnBudget) {
  const int64_t want = (min_columns + d.pq - 1) / d.pq;
  const int64_t cap = std::max<int64_t>(1, budget / std::max<int64_t>(1, d.crs * d.pq));
  return std::clamp<int64_t>(want, 1, cap);
}

// Output columns per GEMM in forward and backward-data: a full register
// tile's width, or with large weights several, so that each block of w is
// used by several column blocks while it is in cache.
int64_t gemm_columns(const Conv2dGeometry& g, const Dims& d) {
  return g.out_channels * d.crs <= kSmallWeights ? 64 : 256;
}

// a(m, k) packed for packed_gemm_prepacked across the pool, into the
// calling thread's kPackedWeights scratch.
const float* pack_weights(ThreadPool& pool, int64_t m, int64_t k, StridedMatrix a) {
  float* packed = scratch(ScratchSlot::kPackedWeights, static_cast<size_t>(packed_a_size(m, k)));
  const int64_t panels = (m + kPackedTileRows - 1) / kPackedTileRows;
  pool.parallel_for(panels, 16, [&](int64_t p0, int64_t p1, int) {
    const int64_t r0 = p0 * kPackedTileRows, r1 = std::min(m, p1 * kPackedTileRows);
    pack_a(r1 - r0, k, StridedMatrix{a.data + r0 * a.row_stride, a.row_stride, a.col_stride},
           packed + r0 * k);
  });
  return packed;
}

// y(K, ld) rows ldy = w(K, CRS) col(CRS, ld) + b, w packed by pack_weights.
void packed_forward(int64_t K, int64_t crs, int64_t ld, const float* w_packed, const float* col,
                    const float* b, float* y, int64_t ldy) {
  if (b) {  // bias first, then the products: the order gemm_nn sums in
    for (int64_t k = 0; k < K; ++k) std::fill(y + k * ldy, y + k * ldy + ld, b[k]);
  }
  packed_gemm_prepacked(K, ld, crs, w_packed, StridedMatrix{col, ld, 1}, y, ldy, b != nullptr);
}

}  // namespace

// dst(K, gs*PQ) <- the gs samples' (K, PQ) blocks of src side by side.
void gather_samples(const float* src, int64_t gs, int64_t k, const Dims& d, float* dst) {
  const int64_t ld = gs * d.pq;
  for (int64_t i = 0; i < gs; ++i) {
    for (int64_t r = 0; r < k; ++r) {
      copy_short(src + i * d.kpq + r * d.pq, dst + r * ld + i * d.pq, d.pq);
    }
  }
}

// The inverse of gather_samples.
void scatter_samples(const float* src, int64_t gs, int64_t k, const Dims& d, float* dst) {
  const int64_t ld = gs * d.pq;
  for (int64_t i = 0; i < gs; ++i) {
    for (int64_t r = 0; r < k; ++r) {
      copy_short(src + r * ld + i * d.pq, dst + i * d.kpq + r * d.pq, d.pq);
    }
  }
}

// x: (N, C, H, W), w: (K, C, R, S), b: (K) or null -> y: (N, K, P, Q)
void im2col_forward(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const float* w,
                    const float* b, float* y) {
  const Dims d(g);
  const int64_t K = g.out_channels, G = group_size(d, gemm_columns(g, d));
  const StridedMatrix weights{w, d.crs, 1};
  const float* w_packed =
      K * d.crs > kSmallWeights ? pack_weights(pool, K, d.crs, weights) : nullptr;
  pool.parallel_for(g.batch, 1, [&](int64_t n0, int64_t n1, int) {
    float* col = scratch(ScratchSlot::kColumns, static_cast<size_t>(d.crs * G * d.pq));
    float* out = G > 1 ? scratch(ScratchSlot::kGather, static_cast<size_t>(K * G * d.pq)) : nullptr;
    for (int64_t n = n0; n < n1; n += G) {
      const int64_t gs = std::min(G, n1 - n), ld = gs * d.pq;
      im2col(g, x + n * d.chw, gs, col, ld);
      if (w_packed) {
        packed_forward(K, d.crs, ld, w_packed, col, b, gs == 1 ? y + n * d.kpq : out, ld);
        if (gs > 1) scatter_samples(out, gs, K, d, y + n * d.kpq);
      } else if (gs == 1) {
        gemm_nn(K, d.pq, d.crs, weights, RowMatrix{col, d.pq}, y + n * d.kpq, d.pq, b, false);
      } else {
        gemm_nn(K, ld, d.crs, weights, RowMatrix{col, ld}, out, ld, b, false);
        scatter_samples(out, gs, K, d, y + n * d.kpq);
      }
    }
  });
}

// w: (K, C, R, S), dy: (N, K, P, Q) -> dx: (N, C, H, W)
void im2col_backward_data(ThreadPool& pool, const Conv2dGeometry& g, const float* w,
                          const float* dy, float* dx) {
  const Dims d(g);
  const int64_t K = g.out_channels, G = group_size(d, gemm_columns(g, d));
  const StridedMatrix weights_t{w, 1, d.crs};  // (CRS, K) view of w
  // Large weights: w^T packed once, read by every group of every thread.
  const bool packed = K * d.crs > kSmallWeights;
  const float* w_packed = packed ? pack_weights(pool, d.crs, K, weights_t) : nullptr;
  pool.parallel_for(g.batch, 1, [&](int64_t n0, int64_t n1, int) {
    float* col = scratch(ScratchSlot::kColumns, static_cast<size_t>(d.crs * G * d.pq));
    float* in = G > 1 ? scratch(ScratchSlot::kGather, static_cast<size_t>(K * G * d.pq)) : nullptr;
    for (int64_t n = n0; n < n1; n += G) {
      const int64_t gs = std::min(G, n1 - n), ld = gs * d.pq;
      const float* dyg = dy + n * d.kpq;
      if (gs > 1) {
        gather_samples(dyg, gs, K, d, in);
        dyg = in;
      }
      if (packed) {
        packed_gemm_prepacked(d.crs, ld, K, w_packed, StridedMatrix{dyg, ld, 1}, col, ld, false);
      } else {
        gemm_nn(d.crs, ld, K, weights_t, RowMatrix{dyg, ld}, col, ld, nullptr, false);
      }
      col2im(g, col, ld, gs, dx + n * d.chw);
    }
  });
}

// Adds samples [n0, n1) to dw (K, CRS) and db (K; null: no bias).
void im2col_filter_chunk(const Conv2dGeometry& g, const float* x, const float* dy, int64_t n0,
                         int64_t n1, float* dw, float* db) {
  const Dims d(g);
  const int64_t K = g.out_channels;
  const bool small = K * d.crs <= kSmallWeights;
  // Large weights: groups of one packed depth block (a pass over dw each).
  const int64_t G = group_size(d, small ? 256 : kPackedDepth);
  float* col = scratch(ScratchSlot::kColumns, static_cast<size_t>(d.crs * G * d.pq));
  float* in = small ? nullptr : scratch(ScratchSlot::kGather, static_cast<size_t>(K * G * d.pq));
  for (int64_t n = n0; n < n1; n += G) {
    const int64_t gs = std::min(G, n1 - n), ld = gs * d.pq;
    im2col(g, x + n * d.chw, gs, col, ld);
    const float* dyg = dy + n * d.kpq;
    if (small) {
      gemm_nt_acc(K, d.crs, dyg, d.pq, RowMatrix{col, ld}, Segments{gs, d.pq, d.kpq, d.pq}, dw,
                  d.crs);
    } else {
      gather_samples(dyg, gs, K, d, in);
      packed_gemm(K, d.crs, ld, StridedMatrix{in, ld, 1}, StridedMatrix{col, 1, ld}, dw, d.crs,
                  true);
      if (db) {
        for (int64_t k = 0; k < K; ++k) db[k] += sum_floats(in + k * ld, ld);
      }
    }
  }
  if (small && db) accumulate_bias_grad(g, dy, n0, n1, db);
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA::conv
