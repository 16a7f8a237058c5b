// The CUDA ops of residual networks against the CPU backend, as
// test_cuda_backend.cpp does for the others: batch normalisation (the GPU's
// sums, in double, against a double reference to 1e-12 of the sum of
// magnitudes, the CPU's float chains to 1e-6 of it; apply and backward rel
// 1e-5), average pooling, row means, the padding shortcut and the residual add
// (exact or 1e-6).
//
// Without a visible GPU every test skips and says why; a build without CUDA
// compiles one test that skips.
#include <gtest/gtest.h>

#include "support/gpu_skip.h"

#include "nn/backend.h"

#if LOCKSTEP_HAVE_CUDA

#include <cmath>
#include <vector>

#include "support/cuda_test_util.h"

namespace lockstep::nn {
namespace {

using namespace cuda_test;  // support/cuda_test_util.h

constexpr Tolerance kSmall{1e-6, 1e-5, 0.0};

// Per-channel sums of x and x^2 over (N, C, S) in double, in order, and the
// sum of |x| (the scale of any summation's rounding of sum x; sum x^2 is its
// own).
struct ExactSums {
  std::vector<double> sum, sumsq, magnitude;
};
ExactSums exact_sums(const Tensor& x, int64_t C, int64_t S) {
  const auto n = static_cast<size_t>(C);
  ExactSums e{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
  for (int64_t i = 0; i < x.numel(); ++i) {
    const auto c = static_cast<size_t>((i / S) % C);
    const double v = x.data()[i];
    e.sum[c] += v, e.sumsq[c] += v * v, e.magnitude[c] += std::fabs(v);
  }
  return e;
}

// got[i] within rel * scale[i] of want[i]
void expect_sums_near(const std::vector<double>& got, const std::vector<double>& want,
                      const std::vector<double>& scale, double rel, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rel * scale[i]) << what << "[" << i << "]";
}

// The GPU's per-channel sums, reduced in chunks of 4096 elements of a
// channel (nn/cuda/batchnorm.cu): one chunk, two with a partial second, and
// seven, against a double reference.
TEST_F(CudaBackendTest, BatchNormSumsOverSeveralChunksAreExact) {
  for (const Shape& shape : {Shape{5, 3, 7, 9}, Shape{9, 4, 29, 31}, Shape{128, 2, 14, 14}}) {
    const BatchNormGeometry g{shape[0], shape[1], shape[2] * shape[3]};
    const Tensor x = random_tensor(shape, 35);
    const Tensor xd = to_device(x);
    const auto C = static_cast<size_t>(g.channels);
    std::vector<double> sd(C), qd(C);
    gpu().batchnorm_stats(g, xd.data(), sd.data(), qd.data());
    const ExactSums e = exact_sums(x, g.channels, g.spatial);
    expect_sums_near(sd, e.sum, e.magnitude, 1e-12, "gpu sum");
    expect_sums_near(qd, e.sumsq, e.sumsq, 1e-12, "gpu sum of squares");
    // The gradient sums: g' = dy where y > 0; sum g' and sum g' (x - mean) invstd.
    const Tensor dy = random_tensor(shape, 36), y = random_tensor(shape, 37);
    const Tensor dyd = to_device(dy), yd = to_device(y);
    Tensor coef({5, g.channels});
    for (int64_t c = 0; c < g.channels; ++c) {
      coef.data()[c] = 0.1f * static_cast<float>(c);
      coef.data()[g.channels + c] = 1.0f + 0.5f * static_cast<float>(c);
    }
    const Tensor coefd = to_device(coef);
    gpu().batchnorm_backward_sums(g, xd.data(), yd.data(), dyd.data(), coefd.data(), sd.data(),
                                  qd.data());
    std::vector<double> want_s(C), want_q(C), scale_s(C), scale_q(C);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const auto c = static_cast<size_t>((i / g.spatial) % g.channels);
      const double gp = y.data()[i] > 0.0f ? dy.data()[i] : 0.0;
      const double xhat = (double{x.data()[i]} - coef.data()[c]) * coef.data()[C + c];
      want_s[c] += gp, scale_s[c] += std::fabs(gp);
      want_q[c] += gp * xhat, scale_q[c] += std::fabs(gp * xhat);
    }
    // (the kernel forms x - mean in float: a float rounding of each term)
    expect_sums_near(sd, want_s, scale_s, 1e-12, "gpu sum of g'");
    expect_sums_near(qd, want_q, scale_q, 1e-6, "gpu sum of g' xhat");
  }
}

TEST_F(CudaBackendTest, BatchNormMatchesCpu) {
  const BatchNormGeometry g{5, 3, 7 * 9};
  const Shape shape{5, 3, 7, 9};
  const Tensor x = random_tensor(shape, 31), dy = random_tensor(shape, 32);
  const Tensor xd = to_device(x), dyd = to_device(dy);
  std::vector<double> s(3), q(3), sd(3), qd(3);
  cpu().batchnorm_stats(g, x.data(), s.data(), q.data());
  gpu().batchnorm_stats(g, xd.data(), sd.data(), qd.data());
  // The GPU reduces in double: all but exact. The CPU adds in float chains
  // flushed into double every 4096 elements (nn/cpu/batchnorm.cpp): within a
  // few float roundings of the magnitudes (seen: 3e-7 of 13.55, 4e-9 of it).
  const ExactSums e = exact_sums(x, 3, 7 * 9);
  expect_sums_near(sd, e.sum, e.magnitude, 1e-12, "gpu sum");
  expect_sums_near(qd, e.sumsq, e.sumsq, 1e-12, "gpu sum of squares");
  expect_sums_near(s, e.sum, e.magnitude, 1e-6, "cpu sum");
  expect_sums_near(q, e.sumsq, e.sumsq, 1e-6, "cpu sum of squares");

  Tensor coef = random_tensor({5, 3}, 33);
  for (int64_t c = 0; c < 3; ++c) coef.data()[3 + c] = 0.5f + std::fabs(coef.data()[3 + c]);
  const Tensor coefd = to_device(coef);
  for (const bool relu : {false, true}) {
    Tensor y(shape), yd(shape, Device::kCuda);
    cpu().batchnorm_apply(g, x.data(), coef.data(), relu, y.data());
    gpu().batchnorm_apply(g, xd.data(), coefd.data(), relu, yd.data());
    expect_close(y, yd, kSmall, relu ? "apply + relu" : "apply");
    const float* mask = relu ? y.data() : nullptr;
    const float* maskd = relu ? yd.data() : nullptr;
    cpu().batchnorm_backward_sums(g, x.data(), mask, dy.data(), coef.data(), s.data(), q.data());
    gpu().batchnorm_backward_sums(g, xd.data(), maskd, dyd.data(), coefd.data(), sd.data(),
                                  qd.data());
    for (size_t c = 0; c < 3; ++c) {
      EXPECT_NEAR(sd[c], s[c], 1e-5 * (1.0 + std::fabs(s[c])));
      EXPECT_NEAR(qd[c], q[c], 1e-5 * (1.0 + std::fabs(q[c])));
    }
    Tensor dx(shape), dxd(shape, Device::kCuda);
    cpu().batchnorm_backward_apply(g, x.data(), mask, dy.data(), coef.data(), dx.data());
    gpu().batchnorm_backward_apply(g, xd.data(), maskd, dyd.data(), coefd.data(), dxd.data());
    expect_close(dx, dxd, kSmall, "backward apply");
  }
}

// Evaluation's coefficients from the running statistics: the same double
// arithmetic (nn/batchnorm_math.h) on both sides, so the same bits.
TEST_F(CudaBackendTest, BatchNormEvalCoefficientsAreTheCpusBits) {
  const int64_t C = 5;
  const Tensor weight = random_tensor({C}, 51), bias = random_tensor({C}, 52),
               mean = random_tensor({C}, 53);
  Tensor var = random_tensor({C}, 54);
  for (float& v : var.span()) v = std::fabs(v) + 0.1f;
  const Tensor weightd = to_device(weight), biasd = to_device(bias), meand = to_device(mean),
               vard = to_device(var);
  Tensor coef({2, C}), stats({4 * C}), coefd({2, C}, Device::kCuda), statsd({4 * C}, Device::kCuda);
  const auto state = [](const Tensor& w, const Tensor& b, const Tensor& m, const Tensor& v,
                        Tensor& st, Tensor& k) {
    return BatchNormTrainState{.weight = w.data(),
                               .bias = b.data(),
                               .running_mean = const_cast<float*>(m.data()),
                               .running_var = const_cast<float*>(v.data()),
                               .stats = reinterpret_cast<double*>(st.data()),
                               .coef = k.data(),
                               .eps = 1e-3f};
  };
  cpu().batchnorm_eval_coef(C, state(weight, bias, mean, var, stats, coef));
  gpu().batchnorm_eval_coef(C, state(weightd, biasd, meand, vard, statsd, coefd));
  expect_close(coef, coefd, kExact, "eval coefficients");
  const Tensor got = to_host(statsd);
  const auto* want = reinterpret_cast<const double*>(stats.data());
  const auto* have = reinterpret_cast<const double*>(got.data());
  for (int64_t i = 0; i < 2 * C; ++i)
    EXPECT_EQ(have[i], want[i]) << (i < C ? "mean " : "invstd ") << i % C;
}

TEST_F(CudaBackendTest, PoolingPaddingAndAddMatchCpu) {
  const Tensor x = random_tensor({3, 4, 9, 7}, 41);
  const Tensor xd = to_device(x);
  Pool2dGeometry p;
  p.batch = 3, p.channels = 4, p.in_h = 9, p.in_w = 7, p.kernel = 3, p.stride = 2;
  const Shape out{3, 4, p.out_h(), p.out_w()};
  Tensor y(out), yd(out, Device::kCuda);
  cpu().avgpool2d_forward(p, x.data(), y.data());
  gpu().avgpool2d_forward(p, xd.data(), yd.data());
  expect_close(y, yd, kSmall, "avgpool forward");
  const Tensor dy = random_tensor(out, 42), dyd = to_device(dy);
  Tensor dx(x.shape()), dxd(x.shape(), Device::kCuda);
  cpu().avgpool2d_backward(p, dy.data(), dx.data());
  gpu().avgpool2d_backward(p, dyd.data(), dxd.data());
  expect_close(dx, dxd, kSmall, "avgpool backward");

  Tensor m({12}), md({12}, Device::kCuda);
  cpu().row_mean_forward(12, 63, x.data(), m.data());
  gpu().row_mean_forward(12, 63, xd.data(), md.data());
  expect_close(m, md, kSmall, "row mean");
  cpu().row_mean_backward(12, 63, m.data(), dx.data());
  gpu().row_mean_backward(12, 63, md.data(), dxd.data());
  expect_close(dx, dxd, kSmall, "row mean backward");

  const ChannelPadGeometry c{3, 4, 9, 7, 8, 2, 2};
  const Shape padded{3, 8, c.out_h(), c.out_w()};
  Tensor s(padded), sd(padded, Device::kCuda);
  cpu().channel_pad_forward(c, x.data(), s.data());
  gpu().channel_pad_forward(c, xd.data(), sd.data());
  expect_close(s, sd, kExact, "channel pad");
  cpu().channel_pad_backward(c, s.data(), dx.data());
  gpu().channel_pad_backward(c, sd.data(), dxd.data());
  expect_close(dx, dxd, kExact, "channel pad backward");

  for (const bool relu : {false, true}) {
    Tensor sum(x.shape()), sumd(x.shape(), Device::kCuda);
    cpu().add_forward(x.numel(), x.data(), dx.data(), relu, sum.data());
    gpu().add_forward(x.numel(), xd.data(), dxd.data(), relu, sumd.data());
    expect_close(sum, sumd, kExact, relu ? "add + relu" : "add");
  }
}

}  // namespace
}  // namespace lockstep::nn

#else  // !LOCKSTEP_HAVE_CUDA

TEST(CudaResnetOps, NotBuilt) {
  LOCKSTEP_SKIP_NOT_BUILT("toolkit, cuDNN or NCCL not found, or LOCKSTEP_CUDA=OFF");
}

#endif
