// The CPU backend's convolution and max pooling against naive reference
// loops written here (double accumulation), with 1 and with 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "nn/backend.h"
#include "nn/tensor.h"
#include "support/backend_checks.h"
#include "support/cpu_backend.h"
#include "support/gradient_check.h"

namespace lockstep::nn {
namespace {

using testing::expect_close;
using testing::fill_random;
using testing::random_tensor;
using testing::Reference;

// A (geometry case, threads) parameter's test name:
// "n3_c2_7x5_out3_k3x3_s1_p1_threads2", "n2_c3_8x8_k2_s2_threads1".
template <typename Case>
std::string case_name(const ::testing::TestParamInfo<std::tuple<Case, int>>& case_info) {
  return testing::geometry_name(std::get<0>(case_info.param).g) + "_threads" +
         std::to_string(std::get<1>(case_info.param));
}

// --- convolution --------------------------------------------------------------

struct ConvSetup {
  Conv2dGeometry g;
  Tensor x, w, b, dy;
  explicit ConvSetup(const Conv2dGeometry& geo)
      : g(geo),
        x(random_tensor({g.batch, g.in_channels, g.in_h, g.in_w}, 1)),
        w(random_tensor({g.out_channels, g.in_channels, g.kernel_h, g.kernel_w}, 2)),
        b(random_tensor({g.out_channels}, 3)),
        dy(random_tensor({g.batch, g.out_channels, g.out_h(), g.out_w()}, 4)) {}

  // Calls f(n, k, c, p, q, r, s, x index, y index, w index) for every term
  // of the convolution that reads a pixel inside the image.
  template <typename F>
  void for_each_term(F f) const {
    const int64_t P = g.out_h(), Q = g.out_w();
    for (int64_t n = 0; n < g.batch; ++n)
      for (int64_t k = 0; k < g.out_channels; ++k)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t q = 0; q < Q; ++q)
            for (int64_t c = 0; c < g.in_channels; ++c)
              for (int64_t r = 0; r < g.kernel_h; ++r)
                for (int64_t s = 0; s < g.kernel_w; ++s) {
                  const int64_t h = p * g.stride + r - g.pad, v = q * g.stride + s - g.pad;
                  if (h < 0 || h >= g.in_h || v < 0 || v >= g.in_w) continue;
                  f(((n * g.in_channels + c) * g.in_h + h) * g.in_w + v,
                    ((n * g.out_channels + k) * P + p) * Q + q,
                    ((k * g.in_channels + c) * g.kernel_h + r) * g.kernel_w + s, k);
                }
  }
};

struct ConvCase {
  Conv2dGeometry g;
  friend void PrintTo(const ConvCase& c, std::ostream* os) { PrintTo(c.g, os); }
};

ConvCase geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t kh, int64_t kw,
                  int64_t stride, int64_t pad) {
  Conv2dGeometry g;
  g.batch = n, g.in_channels = c, g.in_h = h, g.in_w = w, g.out_channels = k;
  g.kernel_h = kh, g.kernel_w = kw, g.stride = stride, g.pad = pad;
  return {g};
}

class CpuConv : public ::testing::TestWithParam<std::tuple<ConvCase, int>> {};

TEST_P(CpuConv, ForwardAndBothBackwardsMatchNaive) {
  const auto& [cc, threads] = GetParam();
  const ConvSetup s(cc.g);
  const Conv2dGeometry& g = s.g;
  auto backend = testing::test_cpu_backend(threads);

  Reference y(s.dy.numel()), dx(s.x.numel()), dw(s.w.numel()), db(g.out_channels);
  for (int64_t i = 0; i < s.dy.numel(); ++i) {
    y.add(i, s.b.data()[i / (g.out_h() * g.out_w()) % g.out_channels]);
    db.add(i / (g.out_h() * g.out_w()) % g.out_channels, s.dy.data()[i]);
  }
  s.for_each_term([&](int64_t xi, int64_t yi, int64_t wi, int64_t) {
    y.add(yi, double{s.x.data()[xi]} * s.w.data()[wi]);
    dx.add(xi, double{s.dy.data()[yi]} * s.w.data()[wi]);
    dw.add(wi, double{s.dy.data()[yi]} * s.x.data()[xi]);
  });

  Tensor out(s.dy.shape()), dx_got(s.x.shape()), dw_got(s.w.shape()), db_got({g.out_channels});
  out.span()[0] = std::numeric_limits<float>::quiet_NaN();  // outputs are overwritten
  dx_got.span()[0] = std::numeric_limits<float>::quiet_NaN();
  dw_got.span()[0] = std::numeric_limits<float>::quiet_NaN();
  backend->conv2d_forward(g, s.x.data(), s.w.data(), s.b.data(), out.data());
  backend->conv2d_backward_data(g, s.w.data(), s.dy.data(), dx_got.data());
  backend->conv2d_backward_filter(g, s.x.data(), s.dy.data(), dw_got.data(), db_got.data());
  expect_close(y, out.data(), "y");
  expect_close(dx, dx_got.data(), "dx");
  expect_close(dw, dw_got.data(), "dw");
  expect_close(db, db_got.data(), "db");

  // Without bias: y is the plain correlation; db may be null.
  backend->conv2d_forward(g, s.x.data(), s.w.data(), nullptr, out.data());
  for (int64_t i = 0; i < out.numel(); ++i) {
    y.value[i] -= s.b.data()[i / (g.out_h() * g.out_w()) % g.out_channels];
  }
  expect_close(y, out.data(), "y without bias");
  backend->conv2d_backward_filter(g, s.x.data(), s.dy.data(), dw_got.data(), nullptr);
  expect_close(dw, dw_got.data(), "dw without db");
}

INSTANTIATE_TEST_SUITE_P(
    CpuGeometries, CpuConv,
    ::testing::Combine(
        ::testing::Values(geometry(1, 1, 5, 5, 1, 3, 3, 1, 0),      // smallest
                          geometry(3, 2, 7, 5, 3, 3, 3, 1, 1),      // odd sizes, padding
                          geometry(3, 3, 8, 8, 4, 3, 3, 2, 1),      // stride 2
                          geometry(2, 3, 9, 7, 5, 2, 3, 2, 0),      // non-square kernel
                          geometry(3, 2, 4, 4, 3, 3, 3, 1, 2),      // padding > kernel / 2
                          geometry(2, 4, 6, 6, 3, 1, 1, 1, 0),      // 1x1
                          geometry(3, 1, 28, 28, 10, 5, 5, 1, 0),   // MNIST conv1 (wide)
                          geometry(2, 3, 20, 19, 4, 3, 3, 1, 1),    // wide, odd width, pad 1
                          geometry(2, 2, 18, 22, 3, 3, 5, 1, 2),    // wide, non-square, pad 2
                          geometry(2, 48, 18, 18, 64, 3, 3, 1, 1),  // wide, large weights
                          geometry(5, 10, 12, 12, 20, 5, 5, 1, 0),  // MNIST conv2
                          geometry(7, 8, 4, 4, 16, 3, 3, 1, 1),     // small P*Q: grouped samples
                          geometry(3, 64, 6, 6, 64, 3, 3, 1, 1),    // large weights, stride 1
                          geometry(2, 32, 9, 9, 64, 3, 3, 2, 1),    // large weights, stride 2
                          geometry(3, 64, 5, 5, 128, 3, 3, 1, 1),   // weights > 64K floats
                          geometry(2, 48, 5, 5, 300, 3, 3, 1, 1),   // blocked GEMMs (K, CRS > 256)
                          geometry(2, 3, 32, 32, 8, 3, 3, 2, 1)),   // AlexNet-CIFAR conv1 shape
        ::testing::Values(1, 2)),
    case_name<ConvCase>);

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

}  // namespace
}  // namespace lockstep::nn
