// The filter transform of Winograd's F(4x4, 3x3) (conv_winograd.cpp) and
// its transpose for the weight gradient, compiled once outside the per-instruction-set builds, so
// that the avx2 and avx512 kernels multiply by the same transformed filters (a compiler free to
// vectorise and contract this arithmetic differently per build would round some of them
// differently); likewise for the weight gradients.
#pragma once

#include <cstdint>

namespace lockstep::nn::cpu {

// u(e, c, k) for e < 36, c < c_pad, k < k_pad, rows k_pad floats long:
// (G g G^T)(e) of the 3x3 filter g = w(k, c) of w (K, C, 3, 3), computed in
// double and rounded once; zeros for c >= C or k >= K. Writes the rows of
// c in [c0, c1) only, so that threads may share the work by ranges of c.
void winograd_filters(int64_t K, int64_t C, const float* w, int64_t k_pad, int64_t c_pad,
                      int64_t c0, int64_t c1, float* u);

// dw(k, c, 3, 3) += G^T DW(k, c) G, DW(k, c) the 6 x 6 values dwt(e, k, c)
// (rows c_pad long, k_pad rows per e), for c < C: the weight
// gradient of F(4x4, 3x3) from its transformed sums, in double, each
// result rounded once. For k in [k0, k1) only, so that threads may share
// the work by ranges of k.
void winograd_filter_grads(int64_t C, const float* dwt, int64_t k_pad, int64_t c_pad, int64_t k0,
                           int64_t k1, float* dw);

}  // namespace lockstep::nn::cpu
