// How the Winograd convolution (conv_winograd.cpp) uses the caches: how
// many tile rows it takes per block, and which outputs it writes past the
// caches. Outside the per-instruction-set builds, so that both choose alike
// and the tests can look at the choices themselves.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "nn/cpu/round_up.h"

namespace lockstep::nn::cpu {

// This CPU's L2 cache per core, as the C library reads it from CPUID;
// 1 MiB where it says nothing.
inline int64_t l2_cache_bytes() {
  static const int64_t bytes = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? int64_t{l2} : int64_t{1} << 20;
  }();
  return bytes;
}

// The bytes of V and M a block may take: half of the L2 (512 KiB where
// the C library says nothing), within 256 KiB .. 1 MiB. Measured on a Zen 4
// with 1 MiB of L2: 512 KiB beat 384, 640, 768 and 1,024 KiB. The blocks do
// not change a result's bits, so the choice may follow the machine.
inline int64_t winograd_block_bytes() {
  return std::clamp<int64_t>(l2_cache_bytes() / 2, 256 << 10, 1 << 20);
}

// Outputs of at least this many bytes are written past the caches: twice
// the L2 (2 MiB where the C library says nothing), within 1 MiB .. 4 MiB.
// The next op (a BatchNorm's statistics or gradient sums) reads such an
// output after the caches have lost it anyway; stored normally, each line
// was first read from memory. Side by side on a Zen 4 (1 MiB L2), lockstep
// bench: resnet20 (outputs of 8, 4 and 2 MiB) +3-4% on 1 thread in five
// rounds, +0-1% in three more; on 2 threads resnet20 and alexnet_cifar +4%
// (median of 12 pairs).
inline int64_t winograd_stream_bytes() {
  return std::clamp<int64_t>(2 * l2_cache_bytes(), 1 << 20, 4 << 20);
}

// Tile rows per block, each row `tw` tiles: the most whose tiles fit in
// `tiles` (at least one row); with threads > 1, no more than a batch of
// `rows` tile rows allows for two blocks per thread. Then, from that count
// down to half of it, the count whose tiles leave the smallest share of
// padding once the GEMMs round them up to a multiple of `group` rows (the
// register tile's rows); the most rows among equals. Padding rows are
// multiplied like tiles: resnet20's 8 x 8 planes (2 tiles a row) took 10
// rows, 20 tiles in 24 GEMM rows; 12 rows fill 24 exactly.
constexpr int64_t winograd_block_rows(int64_t tiles, int64_t tw, int64_t rows, int threads,
                                      int64_t group) {
  int64_t most = std::max<int64_t>(1, std::max(tiles, tw) / tw);
  if (threads > 1) most = std::max<int64_t>(1, std::min(most, rows / (2 * threads)));
  const auto padded = [&](int64_t r) { return round_up(r * tw, group); };
  int64_t best = most;
  for (int64_t r = most - 1; r >= std::max<int64_t>(1, (most + 1) / 2); --r) {
    // padded(r) / (r tw) < padded(best) / (best tw), in integers
    if (padded(r) * best < padded(best) * r) best = r;
  }
  return best;
}

}  // namespace lockstep::nn::cpu
