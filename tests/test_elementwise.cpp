// The CPU backend's element-wise ops (relu, fill, scale, axpy, copy, row
// bias, column sums) against references written here, and its name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "nn/backend.h"
#include "nn/cpu_isa.h"
#include "nn/tensor.h"
#include "support/backend_checks.h"
#include "support/cpu_backend.h"

namespace lockstep::nn {
namespace {

using testing::bitwise_equal;
using testing::random_tensor;

// --- relu and small vector helpers -----------------------------------------

TEST(CpuElementwise, ReluForwardBackwardAndInPlace) {
  auto backend = testing::test_cpu_backend(2);
  const int64_t n = 100003;  // several chunks and a ragged end
  const Tensor x = random_tensor({n}, 1);
  const Tensor dy = random_tensor({n}, 2);
  Tensor y({n}), dx({n});
  backend->relu_forward(n, x.data(), y.data());
  backend->relu_backward(n, y.data(), dy.data(), dx.data());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y.data()[i], x.data()[i] > 0 ? x.data()[i] : 0.0f) << i;
    ASSERT_EQ(dx.data()[i], x.data()[i] > 0 ? dy.data()[i] : 0.0f) << i;
  }
  Tensor inplace = x.clone();
  backend->relu_forward(n, inplace.data(), inplace.data());
  EXPECT_TRUE(bitwise_equal(inplace, y));
  Tensor grad = dy.clone();
  backend->relu_backward(n, y.data(), grad.data(), grad.data());
  EXPECT_TRUE(bitwise_equal(grad, dx));
}

TEST(CpuElementwise, FillScaleAxpyCopy) {
  auto backend = testing::test_cpu_backend(2);
  const int64_t n = 70001;
  const Tensor x = random_tensor({n}, 3);
  Tensor y = random_tensor({n}, 4);
  const Tensor y0 = y.clone();
  backend->axpy(n, 0.5f, x.data(), y.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(y.data()[i], y0.data()[i] + 0.5f * x.data()[i]);
  backend->scale(n, -2.0f, y.data());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_FLOAT_EQ(y.data()[i], -2.0f * (y0.data()[i] + 0.5f * x.data()[i]));
  }
  backend->copy(n, x.data(), y.data());
  EXPECT_TRUE(bitwise_equal(x, y));
  backend->fill(n, 1.25f, y.data());
  for (float v : y.span()) ASSERT_EQ(v, 1.25f);
}

TEST(CpuElementwise, RowBiasAndColumnSums) {
  auto backend = testing::test_cpu_backend(2);
  const int64_t rows = 300, cols = 130;
  const Tensor bias = random_tensor({cols}, 5);
  const Tensor dy = random_tensor({rows, cols}, 6);
  Tensor y = dy.clone();
  backend->add_row_bias(rows, cols, bias.data(), y.data());
  Tensor db({cols});
  backend->sum_rows(rows, cols, dy.data(), db.data());
  for (int64_t j = 0; j < cols; ++j) {
    double sum = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(y.data()[r * cols + j], dy.data()[r * cols + j] + bias.data()[j]);
      sum += dy.data()[r * cols + j];
    }
    EXPECT_NEAR(db.data()[j], sum, 1e-4) << "column " << j;
  }
}

TEST(CpuBackend, NameSaysCpuThreadCountAndInstructionSet) {
  EXPECT_EQ(make_cpu_backend(CpuBackendOptions{.threads = 2, .isa_cap = CpuIsa::kAvx2})->name(),
            "cpu (2 threads, avx2)");
  EXPECT_EQ(make_cpu_backend(1)->name(), "cpu (1 thread, " + to_string(detect_cpu_isa()) + ")");
  EXPECT_EQ(testing::test_cpu_backend(1)->device(), Device::kCpu);
  EXPECT_EQ(testing::test_cpu_backend(0)->name().rfind("cpu (", 0), 0u);
}

}  // namespace
}  // namespace lockstep::nn
