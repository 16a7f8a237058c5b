// How many tile rows the Winograd convolution (conv_winograd.cpp) takes per
// block: outside the per-instruction-set builds, so that both cut alike and
// the tests can look at the choice itself.
#pragma once

#include <algorithm>
#include <cstdint>

namespace lockstep::nn::cpu {

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
  const auto padded = [&](int64_t r) { return (r * tw + group - 1) / group * group; };
  int64_t best = most;
  for (int64_t r = most - 1; r >= std::max<int64_t>(1, (most + 1) / 2); --r) {
    // padded(r) / (r tw) < padded(best) / (best tw), in integers
    if (padded(r) * best < padded(best) * r) best = r;
  }
  return best;
}

}  // namespace lockstep::nn::cpu
