// One thread and two threads agree: bit for bit where every element is
// computed the same way whichever thread runs it, within 1e-5 of the largest
// value where reductions are summed in another order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <tuple>
#include <vector>

#include "nn/backend.h"
#include "nn/tensor.h"
#include "support/backend_checks.h"
#include "support/cpu_backend.h"

namespace lockstep::nn {
namespace {

using testing::bitwise_equal;
using testing::dropout_geometry;
using testing::random_tensor;

TEST(CpuThreads, ElementwiseOpsAreBitwiseIdenticalWithOneAndTwoThreads) {
  auto one = testing::test_cpu_backend(1);
  auto two = testing::test_cpu_backend(2);
  const int64_t n = 200000;
  const Tensor x = random_tensor({n}, 12), g = random_tensor({n}, 13);
  std::vector<Tensor> out;
  for (Backend* b : {one.get(), two.get()}) {
    Tensor w = x.clone(), m({n}), v({n}), vel({n}), y({n});
    SgdParams sp;
    sp.momentum = 0.9f, sp.weight_decay = 1e-4f, sp.first_step = true;
    b->sgd_update(n, sp, w.data(), g.data(), vel.data());
    AdamParams ap;
    ap.weight_decay = 1e-3f;
    b->adam_update(n, ap, w.data(), g.data(), m.data(), v.data());
    b->relu_forward(n, w.data(), y.data());
    b->axpy(n, 0.3f, g.data(), y.data());
    const DropoutGeometry dg = dropout_geometry(400, 50, 10, 0.5f, 2);
    std::vector<int64_t> ids(400);
    for (int64_t i = 0; i < 400; ++i) ids[i] = i * 13;
    Tensor mask({400, 50}), dropped({n});
    b->dropout_forward(dg, ids.data(), y.data(), dropped.data(), mask.data());
    Tensor lsm({n});
    b->log_softmax_forward(n / 100, 100, dropped.data(), lsm.data());
    out.push_back(std::move(w));
    out.push_back(std::move(vel));
    out.push_back(std::move(lsm));
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(bitwise_equal(out[i], out[i + 3])) << i;
}

// |a - b| <= 1e-5 * max |a| element by element: reductions summed in another
// order by two threads.
void expect_close_relative(const Tensor& a, const Tensor& b, const char* what) {
  float scale = 0.0f;
  for (float v : a.span()) scale = std::max(scale, std::abs(v));
  for (int64_t i = 0; i < a.numel(); ++i) {
    ASSERT_NEAR(a.data()[i], b.data()[i], 1e-5f * scale) << what << "[" << i << "]";
  }
}

TEST(CpuThreads, ConvolutionAgreesWithOneAndTwoThreads) {
  auto one = testing::test_cpu_backend(1);
  auto two = testing::test_cpu_backend(2);
  // The wide algorithm (MNIST conv1), im2col (MNIST conv2), im2col with
  // grouped samples, and im2col with stride 2. Columns: C, H = W, K, R = S,
  // stride, pad.
  const int64_t shapes[4][6] = {
      {1, 28, 10, 5, 1, 0}, {10, 12, 20, 5, 1, 0}, {8, 4, 16, 3, 1, 1}, {3, 32, 8, 3, 2, 1}};
  for (const auto& sh : shapes) {
    Conv2dGeometry g;
    g.batch = 64, g.in_channels = sh[0], g.in_h = g.in_w = sh[1], g.out_channels = sh[2];
    g.kernel_h = g.kernel_w = sh[3], g.stride = sh[4], g.pad = sh[5];
    const Tensor x = random_tensor({64, sh[0], sh[1], sh[1]}, 14);
    const Tensor w = random_tensor({sh[2], sh[0], sh[3], sh[3]}, 15);
    const Tensor b = random_tensor({sh[2]}, 17);
    const Tensor dy = random_tensor({64, sh[2], g.out_h(), g.out_w()}, 16);
    Tensor y1(dy.shape()), y2(dy.shape()), dx1(x.shape()), dx2(x.shape());
    Tensor dw1(w.shape()), dw2(w.shape()), db1({sh[2]}), db2({sh[2]});
    one->conv2d_forward(g, x.data(), w.data(), b.data(), y1.data());
    two->conv2d_forward(g, x.data(), w.data(), b.data(), y2.data());
    one->conv2d_backward_data(g, w.data(), dy.data(), dx1.data());
    two->conv2d_backward_data(g, w.data(), dy.data(), dx2.data());
    one->conv2d_backward_filter(g, x.data(), dy.data(), dw1.data(), db1.data());
    two->conv2d_backward_filter(g, x.data(), dy.data(), dw2.data(), db2.data());
    // Each sample's results are computed identically whichever thread runs
    // it; only the weight-gradient reduction order differs.
    SCOPED_TRACE(::testing::Message() << "C " << sh[0] << " H " << sh[1] << " K " << sh[2]);
    EXPECT_TRUE(bitwise_equal(y1, y2));
    EXPECT_TRUE(bitwise_equal(dx1, dx2));
    expect_close_relative(dw1, dw2, "dw");
    expect_close_relative(db1, db2, "db");
  }
}

TEST(CpuThreads, GemmAgreesWithOneAndTwoThreads) {
  auto one = testing::test_cpu_backend(1);
  auto two = testing::test_cpu_backend(2);
  // Large enough to be split: an Eigen-sized product and a small-kernel one.
  for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{128, 300, 200},
                                std::tuple<int64_t, int64_t, int64_t>{64, 320, 50}}) {
    const Tensor a = random_tensor({m * k}, 18), b = random_tensor({k * n}, 19);
    for (int combo = 0; combo < 4; ++combo) {
      const bool ta = combo & 1, tb = combo & 2;
      Tensor c1({m, n}), c2({m, n});
      one->gemm(ta, tb, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c1.data());
      two->gemm(ta, tb, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c2.data());
      SCOPED_TRACE(::testing::Message()
                   << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb);
      expect_close_relative(c1, c2, "c");
    }
  }
}

}  // namespace
}  // namespace lockstep::nn
