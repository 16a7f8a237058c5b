// The CPU backend's optimizer update kernels (sgd_update, adam_update)
// against values computed by hand from torch.optim.SGD's and
// torch.optim.Adam's formulas. The rules through the Optimizer interface:
// test_optimizer.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "nn/backend.h"
#include "support/cpu_backend.h"

namespace lockstep::nn {
namespace {

const float kGrads[3] = {0.5f, -0.25f, 1.0f};

// w = 1; lr 0.1, momentum 0.9, dampening 0.1, weight decay 0.01. Expected
// (w, velocity) after each step, computed by hand from torch.optim.SGD's
// formulas.
TEST(CpuOptimizer, SgdMomentumDampeningWeightDecayMatchHandComputed) {
  const double plain[3][2] = {{0.949, 0.51}, {0.9247459, 0.242541}, {0.8120849387, 1.1266096131}};
  const double nesterov[3][2] = {
      {0.9031, 0.51}, {0.905405389, 0.2421279}, {0.7031542453, 1.1260637585}};
  for (bool use_nesterov : {false, true}) {
    auto backend = testing::test_cpu_backend(1);
    float w = 1.0f, v = 123.0f;  // the first step must ignore the stale buffer
    for (int t = 0; t < 3; ++t) {
      SgdParams p;
      p.lr = 0.1f, p.momentum = 0.9f, p.dampening = 0.1f, p.weight_decay = 0.01f;
      p.nesterov = use_nesterov, p.first_step = t == 0;
      backend->sgd_update(1, p, &w, &kGrads[t], &v);
      const auto& want = use_nesterov ? nesterov[t] : plain[t];
      EXPECT_NEAR(w, want[0], 1e-6) << "nesterov " << use_nesterov << " step " << t;
      EXPECT_NEAR(v, want[1], 1e-6) << "nesterov " << use_nesterov << " step " << t;
    }
  }
}

TEST(CpuOptimizer, SgdWithoutMomentumLeavesVelocityAlone) {
  auto backend = testing::test_cpu_backend(1);
  float w = 2.0f, g = 0.5f, v = 7.0f;
  SgdParams p;
  p.lr = 0.1f;
  backend->sgd_update(1, p, &w, &g, &v);
  EXPECT_FLOAT_EQ(w, 1.95f);
  EXPECT_EQ(v, 7.0f);
}

// grad_scale multiplies the gradient before anything else: the same weights
// and state as gradients scaled beforehand (0.25: exact, so bit for bit),
// over a length with a vector tail.
TEST(CpuOptimizer, GradScaleEqualsScalingTheGradientFirst) {
  auto backend = testing::test_cpu_backend(2);
  const int64_t n = 1000003;
  std::vector<float> grad(n), scaled(n);
  for (int64_t i = 0; i < n; ++i) {
    grad[i] = std::sin(0.001f * static_cast<float>(i));
    scaled[i] = grad[i] * 0.25f;
  }
  for (bool adam : {false, true}) {
    std::vector<float> w1(n, 0.5f), w2(n, 0.5f), a1(n, 0.1f), a2(n, 0.1f), b1(n, 0.2f), b2(n, 0.2f);
    for (int t = 0; t < 2; ++t) {
      if (adam) {
        AdamParams p;
        p.weight_decay = 0.01f, p.step = t + 1;
        backend->adam_update(n, p, w1.data(), scaled.data(), a1.data(), b1.data());
        p.grad_scale = 0.25f;
        backend->adam_update(n, p, w2.data(), grad.data(), a2.data(), b2.data());
      } else {
        SgdParams p;
        p.lr = 0.1f, p.momentum = 0.9f, p.weight_decay = 0.01f, p.first_step = t == 0;
        backend->sgd_update(n, p, w1.data(), scaled.data(), a1.data());
        p.grad_scale = 0.25f;
        backend->sgd_update(n, p, w2.data(), grad.data(), a2.data());
      }
    }
    EXPECT_EQ(w1, w2) << (adam ? "adam" : "sgd");
    EXPECT_EQ(a1, a2) << (adam ? "adam" : "sgd");
    EXPECT_EQ(b1, b2) << (adam ? "adam" : "sgd");
    EXPECT_NE(w1[n - 1], 0.5f);
  }
}

// w = 1; lr 0.01, betas (0.9, 0.999), eps 1e-8. Expected (w, m, v) per step,
// computed by hand from torch.optim.Adam's formulas.
TEST(CpuOptimizer, AdamMatchesHandComputed) {
  const double no_decay[3][3] = {{0.9900000002, 0.05, 0.00025},
                                 {0.9873366299, 0.02, 0.00031225},
                                 {0.980755514, 0.118, 0.0013119378}};
  const double decay[3][3] = {{0.9900000002, 0.06, 0.00036},
                              {0.9853191993, 0.0389, 0.000382441},
                              {0.9779775548, 0.144863192, 0.0015888309}};
  for (float wd : {0.0f, 0.1f}) {
    auto backend = testing::test_cpu_backend(1);
    float w = 1.0f, m = 0.0f, v = 0.0f;
    for (int t = 0; t < 3; ++t) {
      AdamParams p;
      p.lr = 0.01f, p.weight_decay = wd, p.step = t + 1;
      backend->adam_update(1, p, &w, &kGrads[t], &m, &v);
      const auto& want = wd == 0.0f ? no_decay[t] : decay[t];
      EXPECT_NEAR(w, want[0], 1e-6) << "wd " << wd << " step " << t;
      EXPECT_NEAR(m, want[1], 1e-6) << "wd " << wd << " step " << t;
      // 1 - beta2 reaches the kernel as float(0.001) (computed in double),
      // not float(1 - float(0.999)), which was off by 1.3e-5 relative.
      EXPECT_NEAR(v, want[2], 1e-6 * want[2]) << "wd " << wd << " step " << t;
    }
  }
}

// Step 10 from m = 0.2, v = 0.04, w = 0 with g = 0.1, lr 0.01, betas (0.9,
// 0.999), eps 1e-8, by hand in double:
//   m = 0.9 * 0.2 + 0.1 * 0.1 = 0.19;  v = 0.999 * 0.04 + 0.001 * 0.01 = 0.03997
//   1 - 0.9^10 = 0.6513215599;  1 - 0.999^10 = 0.009955119790251765
//   w = -0.01 / 0.6513215599 * 0.19 / (sqrt(0.03997 / 0.009955119790251765) + 1e-8)
//     = -0.00145584223851513
// With beta2 rounded to float, 1 - beta2^10 is off by 1.3e-5 relative and w
// by 6.6e-6, so a 1e-6 relative tolerance tells the two apart.
TEST(CpuOptimizer, AdamBiasCorrectionMatchesDoubleHandComputation) {
  auto backend = testing::test_cpu_backend(1);
  float w = 0.0f, m = 0.2f, v = 0.04f;
  const float g = 0.1f;
  AdamParams p;
  p.lr = 0.01, p.step = 10;
  backend->adam_update(1, p, &w, &g, &m, &v);
  EXPECT_NEAR(m, 0.19, 1e-7);
  EXPECT_NEAR(v, 0.03997, 1e-6 * 0.03997);
  const double want = -0.00145584223851513;
  EXPECT_NEAR(w, want, 1e-6 * std::abs(want));
}

}  // namespace
}  // namespace lockstep::nn
