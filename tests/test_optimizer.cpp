// The optimizers' update rules (nn/optimizer.h) through the Optimizer
// interface, against values computed by hand from PyTorch's formulas: SGD
// with momentum, Adam, AdamW's decoupled weight decay, weight decay that
// leaves out BatchNorm and bias parameters. The CPU backend's update
// kernels: test_cpu_optimizer_kernels.cpp; learning-rate schedules:
// test_lr_schedule.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "nn/optimizer.h"
#include "support/cpu_backend.h"
#include "support/hand_parameters.h"

namespace lockstep::nn {
namespace {

using testing::WeightAndBias;

struct OneParam {
  Parameter p;
  std::vector<Parameter*> list;
  OneParam(float w, float g) : p{std::string("w"), Tensor({1}), Tensor({1})} {
    p.value.data()[0] = w;
    p.grad.data()[0] = g;
    list = {&p};
  }
};

TEST(OptimizerSgd, MomentumMatchesPyTorchAndCorrection) {
  auto backend = testing::test_cpu_backend(1);
  OneParam w(1.0f, 0.5f);
  OptimizerConfig c{
      .kind = nn::OptimizerKind::kSgd, .momentum = 0.9f, .momentum_correction = false};
  auto opt = make_optimizer(c, w.list, Device::kCpu);
  opt->step(*backend, 0.1f);  // v = g = 0.5; w = 1 - 0.05
  EXPECT_FLOAT_EQ(w.p.value.data()[0], 0.95f);
  opt->step(*backend, 0.1f);  // v = 0.9 * 0.5 + 0.5 = 0.95; w = 0.95 - 0.095
  EXPECT_FLOAT_EQ(w.p.value.data()[0], 0.855f);
  ASSERT_EQ(opt->state().size(), 1u);
  EXPECT_EQ(opt->state()[0].name, "w.momentum_buffer");
  EXPECT_FLOAT_EQ(opt->state()[0].tensor->data()[0], 0.95f);

  OneParam u(1.0f, 0.5f);
  c.momentum_correction = true;
  auto corrected = make_optimizer(c, u.list, Device::kCpu);
  corrected->step(*backend, 0.1f);
  corrected->step(*backend, 0.2f);  // v = 0.9 * (0.2 / 0.1) * 0.5 + 0.5 = 1.4; w = 0.95 - 0.28
  EXPECT_FLOAT_EQ(u.p.value.data()[0], 0.67f);
}

TEST(OptimizerSgd, RefusesBadSettings) {
  OneParam w(1.0f, 0.5f);
  EXPECT_THROW(
      make_optimizer({.kind = nn::OptimizerKind::kSgd, .nesterov = true}, w.list, Device::kCpu),
      InputError);
}

TEST(OptimizerAdam, FirstStepsMatchHandComputation) {
  auto backend = testing::test_cpu_backend(1);
  OneParam w(1.0f, 0.5f);
  auto opt = make_optimizer({.kind = nn::OptimizerKind::kAdam}, w.list, Device::kCpu);
  opt->step(*backend, 0.01f);
  // Step 1: m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps).
  EXPECT_NEAR(w.p.value.data()[0], 1.0f - 0.01f, 1e-6);
  w.p.grad.data()[0] = -0.25f;
  opt->step(*backend, 0.01f);
  const double m = 0.9 * 0.1 * 0.5 + 0.1 * -0.25;
  const double v = 0.999 * 0.001 * 0.25 + 0.001 * 0.0625;
  const double expected = 0.99 - 0.01 * (m / (1 - 0.81)) / (std::sqrt(v / (1 - 0.998001)) + 1e-8);
  EXPECT_NEAR(w.p.value.data()[0], expected, 1e-6);
  EXPECT_EQ(opt->steps(), 2);
}

TEST(OptimizerAdamW, OneStepMatchesTheDecoupledFormula) {
  WeightAndBias params;
  params.set(1.0f, 0.5f);
  auto backend = make_cpu_backend(1);
  auto adamw = make_optimizer({.kind = nn::OptimizerKind::kAdamW, .weight_decay = 0.01f},
                              params.list(), Device::kCpu);
  adamw->step(*backend, 0.1f);
  // w = 1 * (1 - 0.1 * 0.01); m_hat = 0.5, v_hat = 0.25; w -= 0.1 * 0.5 / (0.5 + 1e-8)
  const double want = 1.0 * (1 - 0.1 * 0.01) - 0.1 * 0.5 / (0.5 + 1e-8);
  EXPECT_NEAR(params.weight.value.data()[0], want, 1e-6);
  EXPECT_NEAR(params.bias.value.data()[0], want, 1e-6);
  // Adam (L2) differs: the decay goes through the moments.
  WeightAndBias l2;
  l2.set(1.0f, 0.5f);
  auto adam = make_optimizer({.kind = nn::OptimizerKind::kAdam, .weight_decay = 0.01f}, l2.list(),
                             Device::kCpu);
  adam->step(*backend, 0.1f);
  EXPECT_NEAR(l2.weight.value.data()[0], 1.0 - 0.1, 1e-6);
}

TEST(OptimizerWeightDecay, CanLeaveOutBatchNormAndBiasParameters) {
  auto backend = make_cpu_backend(1);
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdamW}) {
    WeightAndBias params;
    params.set(2.0f, 0.0f);
    OptimizerConfig c{.kind = kind, .weight_decay = 0.1f};
    c.decay_bn_and_bias = false;
    auto opt = make_optimizer(c, params.list(), Device::kCpu);
    opt->step(*backend, 0.5f);
    // sgd: w -= lr * wd * w; adamw: w *= 1 - lr * wd (and a zero Adam step)
    EXPECT_NEAR(params.weight.value.data()[0], 2.0 * (1 - 0.5 * 0.1), 1e-6) << to_string(kind);
    EXPECT_EQ(params.bias.value.data()[0], 2.0f) << to_string(kind) << ": the bias must not decay";
  }
}

}  // namespace
}  // namespace lockstep::nn
