// Packing and blocking of the bf16 GEMM (gemm_bf16.h), and its emulated
// register tile. A is packed whole (kBf16TileRows-high panels of pairs over
// the full depth); then per block of kNc columns and kKq pairs of depth, B
// is packed into kBf16TileCols-wide panels of pairs and every register tile
// of C runs over its panels. gemm_bf16_pairs reads B's pair words in place,
// in blocks of kKqInPlace pairs of depth.
#include "nn/cpu/gemm_bf16.h"

#include <algorithm>
#include <cstring>

#include "nn/cpu/bf16_convert.h"
#include "nn/cpu/bf16_kernels.h"
#include "nn/cpu/round_up.h"
#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

constexpr int kMr = kBf16TileRows;
constexpr int kNr = kBf16TileCols;
constexpr int64_t kKq = 256;         // pairs of depth per packed block of B
constexpr int64_t kNc = 512;         // columns per packed block of B
constexpr int64_t kKqInPlace = 128;  // pairs of depth per block of B read in place

float element(StridedMatrix a, int64_t i, int64_t p) {
  return a.data[i * a.row_stride + p * a.col_stride];
}

// The emulated register tile (emulated_dot_tile: the arithmetic of
// vdpbf16ps): the panel's pair words split into floats first, once per
// tile, so that the loop over pairs broadcasts them from memory.
constexpr int64_t kMaxTileKq = std::max(kKq, kKqInPlace);

template <int R>
void tile_emulated(int64_t kq, const uint32_t* ap, PairRows b, float* c, int64_t ldc,
                   bool accumulate) {
  alignas(64) float a_odd[kMaxTileKq * kMr], a_even[kMaxTileKq * kMr];
  split_pair_words(ap, kq * kMr, a_odd, a_even);
  emulated_dot_tile<R, kNr / kNativeLanes>(
      kq, a_odd, a_even, kMr, [&](int64_t q) { return b.row(q); }, c, ldc, accumulate);
}

void run_tile(int rows, int64_t kq, const uint32_t* ap, PairRows b, float* c, int64_t ldc,
              bool accumulate, bool dot) {
#if defined(__AVX512F__)
  if (dot) return bf16_tile_dot(rows, kq, ap, b, c, ldc, accumulate);
#endif
  with_tile_rows(rows,
                 [&](auto r) { tile_emulated<decltype(r)::value>(kq, ap, b, c, ldc, accumulate); });
}

// dst(kq pairs, kNr) <- rows [2 q0, 2 q0 + 2 kq) of w <= kNr columns of b,
// pairs (even row, odd row) per column; past k and past w zero.
void pack_b_panel(StridedMatrix b, int64_t q0, int64_t kq, int64_t k, int64_t w, uint32_t* dst) {
  const bool rows_contiguous = b.col_stride == 1 && w == kNr;
  int64_t q_start = 0;
  if (b.row_stride == 1 && w == kNr) {  // columns contiguous: 16 x 16 pairs via registers
    for (; q_start + kLanes <= kq && 2 * (q0 + q_start + kLanes) <= k; q_start += kLanes) {
      const float* base = b.data + 2 * (q0 + q_start);
      for (int j0 = 0; j0 < kNr; j0 += kLanes) {
        v16u t[kLanes];
        for (int j = 0; j < kLanes; ++j) t[j] = pairs16(base + (j0 + j) * b.col_stride);
        transpose_pairs(t);
        for (int q = 0; q < kLanes; ++q)
          std::memcpy(dst + (q_start + q) * kNr + j0, &t[q], sizeof t[q]);
      }
    }
  }
  for (int64_t q = q_start; q < kq; ++q) {
    const int64_t p = 2 * (q0 + q);
    uint32_t* d = dst + q * kNr;
    if (rows_contiguous && p + 1 < k) {
      const float* r0 = b.data + p * b.row_stride;
      const float* r1 = r0 + b.row_stride;
      for (int j = 0; j < kNr; j += kLanes) {
        const v16u pair = bf16_bits16(load16(r0 + j)) | (bf16_bits16(load16(r1 + j)) << 16);
        std::memcpy(d + j, &pair, sizeof pair);
      }
      continue;
    }
    for (int64_t j = 0; j < kNr; ++j) {
      const uint32_t lo = j < w && p < k ? bf16_bits(element(b, p, j)) : 0u;
      const uint32_t hi = j < w && p + 1 < k ? bf16_bits(element(b, p + 1, j)) : 0u;
      d[j] = lo | (hi << 16);
    }
  }
}

// C tiles of one (mc, nc) block over kq pairs; column panel jr of B is
// b_panel(jr); tails of nc staged.
template <typename Panel>
void block_tiles(int64_t mc, int64_t nc, int64_t kq, const uint32_t* apack, int64_t a_stride,
                 Panel b_panel, float* c, int64_t ldc, bool accumulate, bool dot) {
  alignas(64) float staged[kMr * kNr];
  for (int64_t jr = 0; jr < nc; jr += kNr) {
    const PairRows bp = b_panel(jr);
    const int64_t cols = std::min<int64_t>(kNr, nc - jr);
    for (int64_t ir = 0; ir < mc; ir += kMr) {
      const int rows = static_cast<int>(std::min<int64_t>(kMr, mc - ir));
      const uint32_t* ap = apack + ir / kMr * a_stride;
      float* ct = c + ir * ldc + jr;
      if (cols == kNr) {
        run_tile(rows, kq, ap, bp, ct, ldc, accumulate, dot);
        continue;
      }
      for (int i = 0; i < rows && accumulate; ++i)
        std::copy(ct + i * ldc, ct + i * ldc + cols, staged + i * kNr);
      run_tile(rows, kq, ap, bp, staged, kNr, accumulate, dot);
      for (int i = 0; i < rows; ++i)
        std::copy(staged + i * kNr, staged + i * kNr + cols, ct + i * ldc);
    }
  }
}

// True when C(m, n) has no products to add (empty, or depth 0: zeroed
// unless accumulating).
bool no_products(int64_t m, int64_t n, int64_t depth, float* c, int64_t ldc, bool accumulate) {
  if (m > 0 && n > 0 && depth > 0) return false;
  for (int64_t i = 0; i < m && n > 0 && !accumulate; ++i)
    std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
  return true;
}

}  // namespace

float round_to_bf16(float x) {
  const uint32_t u = bf16_bits(x) << 16;
  float r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

int64_t packed_a_bf16_size(int64_t m, int64_t k) {
  return round_up(m, kMr) * ((k + 1) / 2);
}

// dst <- a(m, k) as panels of kMr rows, each (k/2 pairs, kMr)
void pack_a_bf16(int64_t m, int64_t k, StridedMatrix a, uint32_t* dst) {
  const int64_t kq = (k + 1) / 2;
  for (int64_t i0 = 0; i0 < m; i0 += kMr) {
    uint32_t* d = dst + i0 / kMr * kq * kMr;
    int64_t q_start = 0;
    if (a.col_stride == 1 && i0 + kMr <= m) {  // rows contiguous: 16 pairs per row at a time
      for (; 2 * (q_start + kLanes) <= k; q_start += kLanes) {
        v16u t[kLanes] = {};
        for (int r = 0; r < kMr; ++r)
          t[r] = pairs16(a.data + (i0 + r) * a.row_stride + 2 * q_start);
        transpose_pairs(t);
        for (int q = 0; q < kLanes; ++q)
          std::memcpy(d + (q_start + q) * kMr, &t[q], kMr * sizeof(uint32_t));
      }
    }
    for (int64_t q = q_start; q < kq; ++q) {
      for (int r = 0; r < kMr; ++r) {
        const int64_t i = i0 + r, p = 2 * q;
        const uint32_t lo = i < m ? bf16_bits(element(a, i, p)) : 0u;
        const uint32_t hi = i < m && p + 1 < k ? bf16_bits(element(a, i, p + 1)) : 0u;
        d[q * kMr + r] = lo | (hi << 16);
      }
    }
  }
}

// c(m, n) rows ldc (+)= A(m, k) b(k, n), A packed by pack_a_bf16
void gemm_bf16_prepacked(int64_t m, int64_t n, int64_t k, const uint32_t* a_packed, StridedMatrix b,
                         float* c, int64_t ldc, bool accumulate, bool dot) {
  if (no_products(m, n, k, c, ldc, accumulate)) return;
  const int64_t kq = (k + 1) / 2, nb = std::min(round_up(n, kNr), kNc);
  const int64_t qb = std::min(kq, kKq);
  auto* bpack =
      reinterpret_cast<uint32_t*>(scratch(ScratchSlot::kPackB, static_cast<size_t>(qb * nb)));
  for (int64_t jc = 0; jc < n; jc += nb) {
    const int64_t nc = std::min(nb, n - jc);
    for (int64_t q0 = 0; q0 < kq; q0 += qb) {
      const int64_t qc = std::min(qb, kq - q0);
      for (int64_t j = 0; j < nc; j += kNr) {
        const StridedMatrix bj{b.data + (jc + j) * b.col_stride, b.row_stride, b.col_stride};
        pack_b_panel(bj, q0, qc, k, std::min<int64_t>(kNr, nc - j), bpack + j * qc);
      }
      const auto panel = [&](int64_t jr) { return PairRows{bpack + jr * qc, kNr, nullptr}; };
      block_tiles(m, nc, qc, a_packed + q0 * kMr, kq * kMr, panel, c + jc, ldc,
                  accumulate || q0 > 0, dot);
    }
  }
}

// c(m, n) rows ldc (+)= A(m, 2 kq) b, b as pair rows read in place; the
// last, narrow panel of columns copied into a zero-padded one.
void gemm_bf16_pairs(int64_t m, int64_t n, int64_t kq, const uint32_t* a_packed, PairRows b,
                     float* c, int64_t ldc, bool accumulate, bool dot) {
  if (no_products(m, n, kq, c, ldc, accumulate)) return;
  const int64_t full = n / kNr * kNr, tail = n - full;
  const int64_t qb = std::min(kq, kKqInPlace);
  auto* padded =
      tail > 0
          ? reinterpret_cast<uint32_t*>(scratch(ScratchSlot::kPackB, static_cast<size_t>(qb * kNr)))
          : nullptr;
  for (int64_t q0 = 0; q0 < kq; q0 += qb) {
    const int64_t qc = std::min(qb, kq - q0);
    const uint32_t* ap = a_packed + q0 * kMr;
    const bool acc = accumulate || q0 > 0;
    const PairRows bq =
        b.rows ? PairRows{b.data, b.ld, b.rows + q0} : PairRows{b.data + q0 * b.ld, b.ld, nullptr};
    const auto panel = [&](int64_t jr) { return PairRows{bq.data + jr, bq.ld, bq.rows}; };
    block_tiles(m, full, qc, ap, kq * kMr, panel, c, ldc, acc, dot);
    if (tail == 0) continue;
    for (int64_t q = 0; q < qc; ++q) {
      const uint32_t* src = bq.row(q) + full;
      std::fill(std::copy(src, src + tail, padded + q * kNr), padded + (q + 1) * kNr, 0u);
    }
    block_tiles(
        m, tail, qc, ap, kq * kMr,
        [&](int64_t) {
          return PairRows{padded, kNr, nullptr};
        },
        c + full, ldc, acc, dot);
  }
}

void bf16_pair_rows(const float* lo, const float* hi, int64_t n, float* dst, bool dot) {
#if defined(__AVX512F__)
  if (dot) return bf16_pair_rows_dot(lo, hi, n, dst);
#endif
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    const v16u l = bf16_bits16(load16(lo + j));
    const v16u pair = hi ? l | (bf16_bits16(load16(hi + j)) << 16) : l;
    std::memcpy(dst + j, &pair, sizeof pair);
  }
  if (j == n) return;
  const v16u l = bf16_bits16(load16_head(lo + j, n - j));
  const v16u pair = hi ? l | (bf16_bits16(load16_head(hi + j, n - j)) << 16) : l;
  for (int t = 0; t < kLanes - 1; ++t) {  // fixed trip count: unrolled
    const uint32_t word = pair[t];
    if (j + t < n) std::memcpy(dst + j + t, &word, sizeof word);
  }
}

void bf16_row(const float* src, int64_t n, uint16_t* dst, bool dot) {
#if defined(__AVX512F__)
  if (dot) return bf16_row_dot(src, n, dst);
#endif
  bf16_row(src, n, dst);
}

void gemm_bf16(int64_t m, int64_t n, int64_t k, StridedMatrix a, StridedMatrix b, float* c,
               int64_t ldc, bool accumulate, bool dot) {
  if (m <= 0 || n <= 0 || k <= 0)
    return gemm_bf16_prepacked(m, n, k, nullptr, b, c, ldc, accumulate, dot);
  auto* a_packed = reinterpret_cast<uint32_t*>(
      scratch(ScratchSlot::kPackA, static_cast<size_t>(packed_a_bf16_size(m, k))));
  pack_a_bf16(m, k, a, a_packed);
  gemm_bf16_prepacked(m, n, k, a_packed, b, c, ldc, accumulate, dot);
}

extern const Bf16Kernels kBf16Kernels{
    [](int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col,
       const float* b, int64_t b_row, int64_t b_col, float* c, int64_t ldc, bool accumulate,
       bool dot) {
      gemm_bf16(m, n, k, StridedMatrix{a, a_row, a_col}, StridedMatrix{b, b_row, b_col}, c, ldc,
                accumulate, dot);
    },
    packed_a_bf16_size,
    [](int64_t m, int64_t k, const float* a, int64_t a_row, int64_t a_col, uint32_t* dst) {
      pack_a_bf16(m, k, StridedMatrix{a, a_row, a_col}, dst);
    },
    [](int64_t m, int64_t n, int64_t kq, const uint32_t* a_packed, const uint32_t* b, int64_t ld,
       float* c, int64_t ldc, bool accumulate, bool dot) {
      gemm_bf16_pairs(m, n, kq, a_packed, PairRows{b, ld}, c, ldc, accumulate, dot);
    },
    gemm_bf16_rows,
    bf16_pair_rows,
    [](const float* src, int64_t n, uint16_t* dst, bool dot) { bf16_row(src, n, dst, dot); }};

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
