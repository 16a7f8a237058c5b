// Helpers of the backend tests (test_cpu_*.cpp; the CUDA helpers reuse
// random_tensor): random host tensors, comparisons against references
// written in the tests, dropout geometries, and names of parameterized
// cases.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "nn/backend.h"
#include "nn/tensor.h"

namespace lockstep::testing {

// A tensor of `shape` filled with U(lo, hi) from a fixed seed (fill_random).
nn::Tensor random_tensor(const nn::Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// n values U(-1, 1) from std::mt19937(seed), for the GEMM kernels' matrices.
std::vector<float> random_values(int64_t n, uint32_t seed);

// Same element count and the same bytes.
bool bitwise_equal(const nn::Tensor& a, const nn::Tensor& b);
// The values whose bits differ between two lists of float arrays (a
// failure where the lists or arrays differ in size).
size_t differing_bits(const std::vector<std::vector<float>>& a,
                      const std::vector<std::vector<float>>& b);

// A reference result: values and, per element, the sum of |terms|, which
// bounds the rounding error of any summation order.
struct Reference {
  std::vector<double> value, magnitude;
  explicit Reference(int64_t n) : value(n, 0.0), magnitude(n, 0.0) {}
  void add(int64_t i, double term) {
    value[i] += term;
    magnitude[i] += std::abs(term);
  }
};

// got[i] within 2e-5 * magnitude[i] + 1e-6 of value[i] for every i; reports
// the first five failures, naming `what` and the index.
void expect_close(const Reference& ref, const float* got, const char* what);

// Dropout over (n, c, s) with drop probability p, seed 42 and `stream`.
nn::DropoutGeometry dropout_geometry(int64_t n, int64_t c, int64_t s, float p, uint64_t stream);

// Names of parameterized cases (letters, digits and '_' only), e.g.
// "n2_c3_7x9_out5_k3x3_s2_p1" (batch, channels, image, output channels,
// kernel, stride, pad) and "n2_c3_7x9_k3_s2" (pooling).
std::string geometry_name(const nn::Conv2dGeometry& g);
std::string geometry_name(const nn::Pool2dGeometry& g);

// A (geometry case, threads) parameter's test name:
// "n3_c2_7x5_out3_k3x3_s1_p1_threads2", "n2_c3_8x8_k2_s2_threads1".
template <typename Case>
std::string case_name(const ::testing::TestParamInfo<std::tuple<Case, int>>& case_info) {
  return geometry_name(std::get<0>(case_info.param).g) + "_threads" +
         std::to_string(std::get<1>(case_info.param));
}

}  // namespace lockstep::testing

namespace lockstep::nn {

// gtest prints parameters with these (found by argument-dependent lookup),
// as their geometry_name.
void PrintTo(const Conv2dGeometry& g, std::ostream* os);
void PrintTo(const Pool2dGeometry& g, std::ostream* os);

}  // namespace lockstep::nn
