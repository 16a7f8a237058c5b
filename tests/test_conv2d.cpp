// Convolution: the CPU backend's forward and both backwards against naive
// reference loops written here (double accumulation), with 1 and with 2
// threads, and the Conv2d layer's backward against central differences. The
// CUDA backend against the CPU: test_cuda_backend.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "nn/backend.h"
#include "nn/layers/conv2d.h"
#include "nn/tensor.h"
#include "support/backend_checks.h"
#include "support/cpu_backend.h"
#include "support/gradient_check.h"

namespace lockstep::nn {
namespace {

using testing::case_name;
using testing::check_layer_gradients;
using testing::expect_close;
using testing::fill_random;
using testing::random_tensor;
using testing::Reference;

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
  // Without db no bias sums are taken, and dw keeps its bits.
  const std::vector<float> dw_with_db(dw_got.span().begin(), dw_got.span().end());
  dw_got.span()[0] = std::numeric_limits<float>::quiet_NaN();
  backend->conv2d_backward_filter(g, s.x.data(), s.dy.data(), dw_got.data(), nullptr);
  expect_close(dw, dw_got.data(), "dw without db");
  for (int64_t i = 0; i < dw_got.numel(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(dw_with_db[i]), std::bit_cast<uint32_t>(dw_got.data()[i]))
        << "dw[" << i << "] without db";
  }
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

// --- im2col and col2im of strided convolutions, bit for bit --------------------
// Small integers in x, w and dy make every sum exact whatever its order, so
// the forward (im2col), the data gradient (col2im) and the weight gradient
// (im2col) must equal the naive loops exactly: a float read from or added
// to the wrong place, or added twice, shows. Strides 2 (the vector path)
// and 3 (the scalar one), output widths below, at and above the vector
// widths, with and without padding; CTest runs it on every instruction set.

std::vector<ConvCase> strided_geometries() {
  std::vector<ConvCase> cases;
  for (int64_t stride : {2, 3}) {
    for (int64_t q : {5, 8, 16, 17}) {
      for (int64_t pad : {0, 1}) {
        const int64_t w = (q - 1) * stride + 3 - 2 * pad, h = 2 * stride + 3 - 2 * pad;
        cases.push_back(geometry(3, 2, h, w, 3, 3, 3, stride, pad));  // P = 3
      }
    }
  }
  return cases;
}

class CpuIm2col : public ::testing::TestWithParam<ConvCase> {};

TEST_P(CpuIm2col, StridedConvolutionsExact) {
  ConvSetup s(GetParam().g);
  for (Tensor* t : {&s.x, &s.w, &s.dy}) {
    for (float& v : t->span()) v = std::round(4.0f * v);
  }
  const Conv2dGeometry& g = s.g;
  const Tensor &x = s.x, &w = s.w, &dy = s.dy;
  std::vector<double> y(dy.numel()), dx(x.numel()), dw(w.numel());
  s.for_each_term([&](int64_t xi, int64_t yi, int64_t wi, int64_t) {
    y[yi] += double{x.data()[xi]} * w.data()[wi];
    dx[xi] += double{dy.data()[yi]} * w.data()[wi];
    dw[wi] += double{dy.data()[yi]} * x.data()[xi];
  });
  Tensor y_got(dy.shape()), dx_got(x.shape()), dw_got(w.shape());
  auto backend = testing::test_cpu_backend(1);
  backend->conv2d_forward(g, x.data(), w.data(), nullptr, y_got.data());
  backend->conv2d_backward_data(g, w.data(), dy.data(), dx_got.data());
  backend->conv2d_backward_filter(g, x.data(), dy.data(), dw_got.data(), nullptr);
  const auto expect_exact = [](const std::vector<double>& want, const Tensor& got,
                               const char* what) {
    int64_t wrong = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      if (static_cast<float>(want[i]) != got.data()[i] && wrong++ < 5) {
        ADD_FAILURE() << what << "[" << i << "] = " << got.data()[i] << ", want " << want[i];
      }
    }
    EXPECT_EQ(wrong, 0) << what;
  };
  expect_exact(y, y_got, "y");
  expect_exact(dx, dx_got, "dx");
  expect_exact(dw, dw_got, "dw");
}

INSTANTIATE_TEST_SUITE_P(Strides, CpuIm2col, ::testing::ValuesIn(strided_geometries()),
                         [](const auto& case_info) {
                           return testing::geometry_name(case_info.param.g);
                         });

// --- the layer ------------------------------------------------------------------

struct LayerConvCase {
  int64_t n, c, h, w, k, kernel, stride, pad;
  Conv2dGeometry geometry() const { return {n, c, h, w, k, kernel, kernel, stride, pad}; }
  friend void PrintTo(const LayerConvCase& p, std::ostream* os) { PrintTo(p.geometry(), os); }
};

class LayerConvGradient : public ::testing::TestWithParam<LayerConvCase> {};

TEST_P(LayerConvGradient, MatchesCentralDifferences) {
  const LayerConvCase p = GetParam();
  Conv2d conv(p.c, p.k, p.kernel, p.stride, p.pad);
  conv.set_name("conv");
  conv.reset_parameters(3, Device::kCpu);
  Tensor x({p.n, p.c, p.h, p.w});
  fill_random(x, 11);
  check_layer_gradients(conv, x, {});
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, LayerConvGradient,
    ::testing::Values(LayerConvCase{2, 1, 6, 6, 2, 3, 1, 0}, LayerConvCase{1, 3, 7, 5, 4, 3, 2, 1},
                      LayerConvCase{3, 2, 5, 5, 3, 5, 1, 2}, LayerConvCase{2, 2, 8, 9, 2, 3, 2, 0}),
    [](const auto& case_info) { return testing::geometry_name(case_info.param.geometry()); });

}  // namespace
}  // namespace lockstep::nn
