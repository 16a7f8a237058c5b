// Double-precision references for the CPU kernel tests. They live here, with
// the test helpers, so that they are compiled with the build type's
// optimisation even where the test files are not (LOCKSTEP_TEST_OPT,
// tests/CMakeLists.txt): at -O0 under ASan they took minutes.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/backend.h"
#include "nn/cpu/small_gemm.h"
#include "nn/tensor.h"
#include "support/backend_checks.h"

namespace lockstep::testing {

// 3 x 3 convolutions at stride 1 (NCHW, filters KCRS): the output (plus the
// bias when `b` is given), the data gradient, and the filter gradient
// followed by the bias gradient (out_channels * in_channels * 9 +
// out_channels values).
Reference conv3x3_forward_reference(const nn::Conv2dGeometry& g, const nn::Tensor& x,
                                    const nn::Tensor& w, const float* b);
Reference conv3x3_data_reference(const nn::Conv2dGeometry& g, const nn::Tensor& w,
                                 const nn::Tensor& dy);
Reference conv3x3_filter_reference(const nn::Conv2dGeometry& g, const nn::Tensor& x,
                                   const nn::Tensor& dy);

// Expects c(m, n) rows ldc == a b + (accumulate ? c0 : 0) within float
// rounding of the sum of |terms|; reports the first three mismatches and
// returns how many there are.
int gemm_mismatches(int64_t m, int64_t n, int64_t k, nn::cpu::StridedMatrix a,
                    nn::cpu::StridedMatrix b, const std::vector<float>& c0,
                    const std::vector<float>& c, int64_t ldc, bool accumulate);

}  // namespace lockstep::testing
