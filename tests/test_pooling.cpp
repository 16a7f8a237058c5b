// Pooling. Max: the CPU backend's forward and backward against naive
// reference loops written here, with 1 and with 2 threads, ties and NaN as
// PyTorch (the layer's gradient: test_layers.cpp). Average and global
// average: the layers' outputs by hand and their gradients against central
// differences. CUDA against the CPU: test_cuda_backend.cpp,
// test_cuda_resnet_ops.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "nn/backend.h"
#include "nn/layers/avg_pool2d.h"
#include "nn/tensor.h"
#include "support/backend_checks.h"
#include "support/cpu_backend.h"
#include "support/gradient_check.h"

namespace lockstep::nn {
namespace {

using testing::case_name;
using testing::expect_close;
using testing::fill_random;
using testing::random_tensor;
using testing::Reference;

// --- max pooling --------------------------------------------------------------

struct PoolCase {
  Pool2dGeometry g;
  friend void PrintTo(const PoolCase& c, std::ostream* os) { PrintTo(c.g, os); }
};

PoolCase pool_geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t kernel, int64_t stride) {
  Pool2dGeometry g;
  g.batch = n, g.channels = c, g.in_h = h, g.in_w = w, g.kernel = kernel, g.stride = stride;
  return {g};
}

class CpuMaxPool : public ::testing::TestWithParam<std::tuple<PoolCase, int>> {};

TEST_P(CpuMaxPool, ForwardAndBackwardMatchNaiveWithTies) {
  const auto& [pc, threads] = GetParam();
  const Pool2dGeometry& g = pc.g;
  auto backend = testing::test_cpu_backend(threads);
  Tensor x({g.batch, g.channels, g.in_h, g.in_w});
  fill_random(x, 5);
  for (float& v : x.span()) v = std::floor(v * 1.5f);  // values in {-2..1}: many ties
  Tensor dy({g.batch, g.channels, g.out_h(), g.out_w()});
  fill_random(dy, 6);

  std::vector<float> y_ref(dy.numel());
  std::vector<float> dx_ref(x.numel(), 0.0f);
  for (int64_t plane = 0; plane < g.batch * g.channels; ++plane) {
    for (int64_t p = 0; p < g.out_h(); ++p) {
      for (int64_t q = 0; q < g.out_w(); ++q) {
        int64_t best = -1;
        for (int64_t r = 0; r < g.kernel; ++r) {
          for (int64_t s = 0; s < g.kernel; ++s) {
            const int64_t i = (plane * g.in_h + p * g.stride + r) * g.in_w + q * g.stride + s;
            if (best < 0 || x.data()[i] > x.data()[best]) best = i;  // first maximum
          }
        }
        const int64_t o = (plane * g.out_h() + p) * g.out_w() + q;
        y_ref[o] = x.data()[best];
        dx_ref[best] += dy.data()[o];
      }
    }
  }

  Tensor y(dy.shape()), dx(x.shape());
  for (float& v : dx.span()) v = std::numeric_limits<float>::quiet_NaN();
  backend->maxpool2d_forward(g, x.data(), y.data());
  backend->maxpool2d_backward(g, x.data(), y.data(), dy.data(), dx.data());
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.data()[i], y_ref[i]) << "y[" << i << "]";
  for (int64_t i = 0; i < dx.numel(); ++i) {
    ASSERT_FLOAT_EQ(dx.data()[i], dx_ref[i]) << "dx[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(CpuGeometries, CpuMaxPool,
                         ::testing::Combine(::testing::Values(pool_geometry(2, 3, 8, 8, 2, 2),
                                                              pool_geometry(2, 3, 7, 9, 2, 2),
                                                              pool_geometry(3, 2, 9, 7, 3, 2),
                                                              pool_geometry(1, 2, 7, 7, 3, 3),
                                                              pool_geometry(64, 10, 24, 24, 2, 2),
                                                              pool_geometry(1, 2, 41, 70, 2, 2)),
                                            ::testing::Values(1, 2)),
                         case_name<PoolCase>);

TEST(CpuMaxPool, GradientGoesToFirstMaximumOfATiedWindow) {
  auto backend = testing::test_cpu_backend(1);
  const Pool2dGeometry g = pool_geometry(1, 1, 2, 2, 2, 2).g;
  const float x[4] = {3.0f, 3.0f, 3.0f, 3.0f};
  const float dy[1] = {2.5f};
  float y[1] = {0.0f}, dx[4];
  backend->maxpool2d_forward(g, x, y);
  backend->maxpool2d_backward(g, x, y, dy, dx);
  EXPECT_EQ(y[0], 3.0f);
  EXPECT_EQ(dx[0], 2.5f);
  EXPECT_EQ(dx[1], 0.0f);
  EXPECT_EQ(dx[2], 0.0f);
  EXPECT_EQ(dx[3], 0.0f);
}

TEST(CpuMaxPool, NanWinsLikePyTorch) {
  // PyTorch's scan: v takes over when v > max or v is NaN, so a window with
  // NaNs outputs NaN and routes the gradient to its last NaN.
  auto backend = testing::test_cpu_backend(1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Pool2dGeometry two = pool_geometry(1, 1, 2, 4, 2, 2).g;
  const float x[8] = {1.0f, nan, nan, 5.0f, 3.0f, nan, 2.0f, 1.0f};  // windows {1,N,3,N}, {N,5,2,1}
  const float dy[2] = {10.0f, 20.0f};
  float y[2], dx[8];
  backend->maxpool2d_forward(two, x, y);
  backend->maxpool2d_backward(two, x, y, dy, dx);
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
  const float want[8] = {0, 0, 20.0f, 0, 0, 10.0f, 0, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dx[i], want[i]) << i;

  const Pool2dGeometry three = pool_geometry(1, 1, 3, 3, 3, 3).g;  // the generic path
  const float x3[9] = {1.0f, nan, 3.0f, 7.0f, nan, 2.0f, 0.0f, 9.0f, 1.0f};
  float y3[1], dx3[9];
  const float dy3[1] = {4.0f};
  backend->maxpool2d_forward(three, x3, y3);
  backend->maxpool2d_backward(three, x3, y3, dy3, dx3);
  EXPECT_TRUE(std::isnan(y3[0]));
  for (int i = 0; i < 9; ++i) EXPECT_EQ(dx3[i], i == 4 ? 4.0f : 0.0f) << i;
}

// --- average pooling ----------------------------------------------------------

TEST(AvgPool2d, ForwardAndGradients) {
  AvgPool2d pool(2);
  pool.set_name("pool");
  Tensor x({1, 1, 2, 4}), y({1, 1, 1, 2});
  const float xs[] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::copy(xs, xs + 8, x.data());
  auto backend = testing::test_cpu_backend(1);
  pool.forward(*backend, x, y, {});
  EXPECT_FLOAT_EQ(y.data()[0], (1 + 2 + 5 + 6) / 4.0f);
  EXPECT_FLOAT_EQ(y.data()[1], (3 + 4 + 7 + 8) / 4.0f);
  AvgPool2d overlapping(3, 2);
  overlapping.set_name("pool");
  Tensor big({2, 2, 7, 5});
  fill_random(big, 9);
  testing::check_layer_gradients(overlapping, big, {});
}

TEST(GlobalAvgPool2d, ForwardShapeAndGradients) {
  GlobalAvgPool2d pool;
  pool.set_name("avgpool");
  EXPECT_EQ(pool.output_shape({4, 16, 8, 8}), (Shape{4, 16}));
  Tensor x({2, 3, 2, 2}), y({2, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(i);
  auto backend = testing::test_cpu_backend(1);
  pool.forward(*backend, x, y, {});
  for (int64_t r = 0; r < 6; ++r) EXPECT_FLOAT_EQ(y.data()[r], 4.0f * r + 1.5f);
  fill_random(x, 2);
  testing::check_layer_gradients(pool, x, {});
}

}  // namespace
}  // namespace lockstep::nn
