// Packing and blocking of the bf16 GEMM (gemm_bf16.h), and its emulated
// register tile. A is packed whole (kBf16TileRows-high panels of pairs over
// the full depth); then per block of kNc columns and kKq pairs of depth, B
// is packed into kBf16TileCols-wide panels of pairs and every register tile
// of C runs over its panels.
#include "nn/cpu/gemm_bf16.h"

#include <algorithm>
#include <cstring>

#include "nn/cpu/scratch.h"
#include "nn/cpu/simd.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

constexpr int kMr = kBf16TileRows;
constexpr int kNr = kBf16TileCols;
constexpr int64_t kKq = 256;  // pairs of depth per packed block of B
constexpr int64_t kNc = 512;  // columns per packed block of B

using vu = uint32_t __attribute__((vector_size(sizeof(vn))));
using v16u = uint32_t __attribute__((vector_size(64)));

int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

// bf16 bits of x in the low half (nearest even; NaN quieted).
uint32_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if (x != x) return (u >> 16) | 0x40u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

v16u bf16_bits16(v16 x) {
  v16u u;
  std::memcpy(&u, &x, sizeof u);
  const v16u rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const v16u nan = reinterpret_cast<v16u>(x != x);
  return (rounded & ~nan) | (((u >> 16) | 0x40u) & nan);
}

// The 16 pairs of p[0..32), rounded: lane q holds p[2q] | p[2q + 1] << 16.
v16u pairs16(const float* p) {
  const v16u a = bf16_bits16(load16(p)), b = bf16_bits16(load16(p + kLanes));
  const v16u even =
      __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const v16u odd =
      __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  return even | (odd << 16);
}

// t[r] = pairs16 of the 16 vectors' rows, transposed in place: t[q] lane r
// then holds pair q of row r.
void transpose_pairs(v16u (&t)[kLanes]) {
  v16 f[kLanes];
  std::memcpy(f, t, sizeof f);
  transpose16x16(f);
  std::memcpy(t, f, sizeof f);
}

float element(StridedMatrix a, int64_t i, int64_t p) {
  return a.data[i * a.row_stride + p * a.col_stride];
}

// The emulated register tile: for each pair, the odd product then the even
// one, as vdpbf16ps adds them.
template <int R>
void tile_emulated(int64_t kq, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc,
                   bool accumulate) {
  constexpr int U = kNr / kNativeLanes;
  vn acc[R][U];
  for (int i = 0; i < R; ++i) {
    for (int u = 0; u < U; ++u)
      acc[i][u] = accumulate ? loadn(c + i * ldc + u * kNativeLanes) : vn{};
  }
  for (int64_t q = 0; q < kq; ++q) {
    vn b_even[U], b_odd[U];
    for (int u = 0; u < U; ++u) {
      vu b;
      std::memcpy(&b, bp + q * kNr + u * kNativeLanes, sizeof b);
      const vu lo = b << 16, hi = b & 0xffff0000u;
      std::memcpy(&b_even[u], &lo, sizeof lo);
      std::memcpy(&b_odd[u], &hi, sizeof hi);
    }
    for (int i = 0; i < R; ++i) {
      const uint32_t a = ap[q * kMr + i], a_lo = a << 16, a_hi = a & 0xffff0000u;
      float a_even, a_odd;
      std::memcpy(&a_even, &a_lo, sizeof a_even);
      std::memcpy(&a_odd, &a_hi, sizeof a_odd);
      for (int u = 0; u < U; ++u) {
        acc[i][u] += a_odd * b_odd[u];
        acc[i][u] += a_even * b_even[u];
      }
    }
  }
  for (int i = 0; i < R; ++i) {
    for (int u = 0; u < U; ++u) storen(c + i * ldc + u * kNativeLanes, acc[i][u]);
  }
}

void tile_emulated_rows(int rows, int64_t kq, const uint32_t* ap, const uint32_t* bp, float* c,
                        int64_t ldc, bool accumulate) {
  switch (rows) {
    case 1:
      return tile_emulated<1>(kq, ap, bp, c, ldc, accumulate);
    case 2:
      return tile_emulated<2>(kq, ap, bp, c, ldc, accumulate);
    case 3:
      return tile_emulated<3>(kq, ap, bp, c, ldc, accumulate);
    case 4:
      return tile_emulated<4>(kq, ap, bp, c, ldc, accumulate);
    case 5:
      return tile_emulated<5>(kq, ap, bp, c, ldc, accumulate);
    default:
      return tile_emulated<6>(kq, ap, bp, c, ldc, accumulate);
  }
}

void run_tile(int rows, int64_t kq, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc,
              bool accumulate, bool dot) {
#if defined(__AVX512F__)
  if (dot) return bf16_tile_dot(rows, kq, ap, bp, c, ldc, accumulate);
#endif
  tile_emulated_rows(rows, kq, ap, bp, c, ldc, accumulate);
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

// C tiles of one (mc, nc) block over packed panels of kq pairs.
void block_tiles(int64_t mc, int64_t nc, int64_t kq, const uint32_t* apack, int64_t a_stride,
                 const uint32_t* bpack, float* c, int64_t ldc, bool accumulate, bool dot) {
  alignas(64) float staged[kMr * kNr];
  for (int64_t jr = 0; jr < nc; jr += kNr) {
    const uint32_t* bp = bpack + jr * kq;
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
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    }
    return;
  }
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
      block_tiles(m, nc, qc, a_packed + q0 * kMr, kq * kMr, bpack, c + jc, ldc,
                  accumulate || q0 > 0, dot);
    }
  }
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

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
