// Integer rounding shared by the CPU kernels (both instruction-set builds
// and the code outside them).
#pragma once

#include <cstdint>

namespace lockstep::nn::cpu {

// n rounded up to a multiple of m (n >= 0, m > 0).
constexpr int64_t round_up(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

}  // namespace lockstep::nn::cpu
