// The CPU backend's GEMM, all four transpose combinations with alpha and
// beta, against a naive reference loop (double accumulation), with 1 and
// with 2 threads; the shapes cover each of its kernels (small and large
// products, Eigen for other alpha and beta).
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <tuple>

#include "nn/backend.h"
#include "nn/tensor.h"
#include "support/backend_checks.h"
#include "support/cpu_backend.h"

namespace lockstep::nn {
namespace {

using testing::expect_close;
using testing::random_tensor;
using testing::Reference;

// --- GEMM --------------------------------------------------------------------

struct GemmCase {
  int64_t m, n, k;
  float alpha, beta;
  friend void PrintTo(const GemmCase& c, std::ostream* os) {
    *os << c.m << "x" << c.n << "x" << c.k << " alpha " << c.alpha << " beta " << c.beta;
  }
};

// 0.7f -> "0p7", -0.5f -> "m0p5": a number in a test name.
std::string scalar_name(float v) {
  std::ostringstream text;
  text << v;
  std::string name;
  for (char ch : text.str()) name += ch == '.' ? 'p' : ch == '-' ? 'm' : ch;
  return name;
}

class CpuGemm : public ::testing::TestWithParam<std::tuple<GemmCase, int>> {};

// "5x7x3_alpha0p7_beta0p3_threads1": m x n x k, alpha, beta, threads.
std::string gemm_case_name(const ::testing::TestParamInfo<CpuGemm::ParamType>& case_info) {
  const auto& [gc, threads] = case_info.param;
  std::ostringstream name;
  name << gc.m << "x" << gc.n << "x" << gc.k << "_alpha" << scalar_name(gc.alpha) << "_beta"
       << scalar_name(gc.beta) << "_threads" << threads;
  return name.str();
}

TEST_P(CpuGemm, AllTransposeCombinationsMatchNaive) {
  const auto& [gc, threads] = GetParam();
  auto backend = testing::test_cpu_backend(threads);
  const Tensor a = random_tensor({gc.m * gc.k}, 7), b = random_tensor({gc.k * gc.n}, 8);
  const Tensor c0 = random_tensor({gc.m * gc.n}, 9);
  for (int combo = 0; combo < 4; ++combo) {
    const bool ta = combo & 1, tb = combo & 2;
    Reference ref(gc.m * gc.n);
    for (int64_t i = 0; i < gc.m; ++i) {
      for (int64_t j = 0; j < gc.n; ++j) {
        if (gc.beta != 0.0f) ref.add(i * gc.n + j, double{gc.beta} * c0.data()[i * gc.n + j]);
        for (int64_t p = 0; p < gc.k; ++p) {
          const double av = a.data()[ta ? p * gc.m + i : i * gc.k + p];
          const double bv = b.data()[tb ? j * gc.k + p : p * gc.n + j];
          ref.add(i * gc.n + j, gc.alpha * av * bv);
        }
      }
    }
    Tensor c = c0.clone();
    if (gc.beta == 0.0f) {  // beta = 0 must ignore C's contents, NaN included
      for (float& v : c.span()) v = std::numeric_limits<float>::quiet_NaN();
    }
    backend->gemm(ta, tb, gc.m, gc.n, gc.k, gc.alpha, a.data(), b.data(), gc.beta, c.data());
    SCOPED_TRACE(::testing::Message() << "trans_a " << ta << " trans_b " << tb);
    expect_close(ref, c.data(), "c");
  }
}

INSTANTIATE_TEST_SUITE_P(
    CpuShapes, CpuGemm,
    ::testing::Combine(
        ::testing::Values(GemmCase{5, 7, 3, 0.7f, 0.3f}, GemmCase{5, 7, 3, 1.0f, 0.0f},
                          GemmCase{64, 50, 320, 1.0f, 0.0f}, GemmCase{33, 70, 45, 1.0f, 1.0f},
                          GemmCase{20, 300, 100, 1.0f, 0.0f}, GemmCase{30, 40, 600, 1.0f, 1.0f},
                          GemmCase{130, 170, 200, 1.0f, 1.0f}, GemmCase{128, 300, 120, 1.0f, 0.0f},
                          GemmCase{37, 129, 65, -0.5f, 1.0f}, GemmCase{160, 96, 160, 1.0f, 0.5f},
                          GemmCase{24, 400, 300, 2.0f, 0.0f}),
        ::testing::Values(1, 2)),
    gemm_case_name);

TEST(CpuGemm, ZeroInnerDimensionScalesC) {
  auto backend = testing::test_cpu_backend(2);
  float c[2] = {2.0f, 4.0f};
  backend->gemm(false, false, 1, 2, 0, 1.0f, nullptr, nullptr, 0.5f, c);
  EXPECT_EQ(c[0], 1.0f);
  EXPECT_EQ(c[1], 2.0f);
}

}  // namespace
}  // namespace lockstep::nn
