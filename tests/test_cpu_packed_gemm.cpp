// The packed GEMM of the CPU backend (nn/cpu/packed_gemm.h): C(m, n) =
// op(A)(m, k) op(B)(k, n) (+ C) against a double-precision reference, over
// shapes that cut every blocking dimension (register tile 6 x 64, 6 x 16 in
// the avx2 build these tests call; blocks of
// 96 rows, 512 columns, depth 256) with a tail (last tiles of 1 to 5 rows
// among them: m 1, 2, 3, 5, 100 = 54 + 46), each transpose, overwrite
// (C full of NaN) and accumulate, and a leading dimension wider than n. Then
// the backend's gemm on products large enough to take the packed path: the
// same bits with 1, 2 and 3 threads, and close to the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "nn/backend.h"
#include "nn/cpu/packed_gemm.h"
#include "support/backend_checks.h"
#include "support/cpu_backend.h"
#include "support/kernel_references.h"

namespace lockstep::nn {
namespace {

using cpu::StridedMatrix;
using testing::random_values;

// (i, p) of a (rows, cols) matrix stored row-major, or transposed (its
// transpose stored row-major).
StridedMatrix view(const std::vector<float>& data, int64_t rows, int64_t cols, bool transposed) {
  return transposed ? StridedMatrix{data.data(), 1, rows} : StridedMatrix{data.data(), cols, 1};
}

TEST(CpuPackedGemm, MatchesDoubleReferenceOverBlockTails) {
  const int64_t ms[] = {1, 2, 3, 5, 6, 7, 97, 100}, ns[] = {1, 64, 65, 1090}, ks[] = {1, 257, 513};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t m : ms) {
    for (int64_t n : ns) {
      for (int64_t k : ks) {
        if (m * n * k > (int64_t{1} << 25)) continue;  // the reference is slow
        const auto a = random_values(m * k, 1), b = random_values(k * n, 2);
        const int64_t ldc = n + 3;
        const auto c0 = random_values(m * ldc, 3);
        for (int combo = 0; combo < 8; ++combo) {
          const bool ta = combo & 1, tb = combo & 2, accumulate = combo & 4;
          SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " ta " << ta << " tb "
                                            << tb << " accumulate " << accumulate);
          const StridedMatrix av = view(a, m, k, ta), bv = view(b, k, n, tb);
          std::vector<float> c = accumulate ? c0 : std::vector<float>(c0.size(), nan);
          cpu::packed_gemm(m, n, k, av, bv, c.data(), ldc, accumulate);
          ASSERT_EQ(testing::gemm_mismatches(m, n, k, av, bv, c0, c, ldc, accumulate), 0);
          for (int64_t i = 0; i < m; ++i) {  // the padding columns are untouched
            for (int64_t j = n; j < ldc; ++j) {
              ASSERT_TRUE(accumulate ? c[i * ldc + j] == c0[i * ldc + j]
                                     : std::isnan(c[i * ldc + j]));
            }
          }
        }
      }
    }
  }
}

TEST(CpuPackedGemm, ZeroDepthOverwritesOrKeeps) {
  std::vector<float> c(12, std::numeric_limits<float>::quiet_NaN());
  cpu::packed_gemm(3, 4, 0, StridedMatrix{nullptr, 0, 1}, StridedMatrix{nullptr, 4, 1}, c.data(), 4,
                   false);
  for (float x : c) EXPECT_EQ(x, 0.0f);
  std::vector<float> d(12, 2.5f);
  cpu::packed_gemm(3, 4, 0, StridedMatrix{nullptr, 0, 1}, StridedMatrix{nullptr, 4, 1}, d.data(), 4,
                   true);
  for (float x : d) EXPECT_EQ(x, 2.5f);
}

// Backend::gemm on large products (the packed path), all transposes, beta 0
// over NaN and beta 1: identical bits for 1, 2 and 3 threads.
TEST(CpuPackedGemm, BackendLargeProductsIndependentOfThreads) {
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{301, 203, 97}, {70, 701, 131}, {1000, 70, 77}};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::unique_ptr<Backend> backends[] = {testing::test_cpu_backend(1), testing::test_cpu_backend(2),
                                         testing::test_cpu_backend(3)};
  for (const Shape& s : shapes) {
    const auto a = random_values(s.m * s.k, 4), b = random_values(s.k * s.n, 5);
    const auto c0 = random_values(s.m * s.n, 6);
    for (int combo = 0; combo < 8; ++combo) {
      const bool ta = combo & 1, tb = combo & 2;
      const float beta = (combo & 4) ? 1.0f : 0.0f;
      SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << " ta " << ta << " tb "
                                        << tb << " beta " << beta);
      std::vector<float> first;
      for (auto& backend : backends) {
        std::vector<float> c = beta != 0.0f ? c0 : std::vector<float>(c0.size(), nan);
        backend->gemm(ta, tb, s.m, s.n, s.k, 1.0f, a.data(), b.data(), beta, c.data());
        if (first.empty()) {
          ASSERT_EQ(testing::gemm_mismatches(s.m, s.n, s.k, view(a, s.m, s.k, ta),
                                             view(b, s.k, s.n, tb), c0, c, s.n, beta != 0.0f),
                    0);
          first = c;
        } else {
          ASSERT_EQ(c, first) << backend->name();
        }
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::nn
