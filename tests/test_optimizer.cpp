// Optimizers through the Optimizer interface and learning-rate schedules,
// against values computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/error.h"
#include "nn/lr_schedule.h"
#include "nn/optimizer.h"
#include "support/cpu_backend.h"

namespace lockstep::nn {
namespace {

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
  OptimizerConfig c{.kind = "sgd", .momentum = 0.9f, .momentum_correction = false};
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
  EXPECT_THROW(make_optimizer({.kind = "sgd", .nesterov = true}, w.list, Device::kCpu), InputError);
  EXPECT_THROW(make_optimizer({.kind = "rmsprop"}, w.list, Device::kCpu), InputError);
}

TEST(OptimizerAdam, FirstStepsMatchHandComputation) {
  auto backend = testing::test_cpu_backend(1);
  OneParam w(1.0f, 0.5f);
  auto opt = make_optimizer({.kind = "adam"}, w.list, Device::kCpu);
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

TEST(LrSchedule, ScalingRules) {
  EXPECT_DOUBLE_EQ(LrSchedule({.lr = 0.01, .scaling = "linear"}, 8).at(0, 0, 10), 0.08);
  EXPECT_NEAR(LrSchedule({.lr = 0.01, .scaling = "sqrt"}, 4).at(0, 0, 10), 0.02, 1e-12);
  EXPECT_DOUBLE_EQ(LrSchedule({.lr = 0.01, .scaling = "none"}, 4).at(0, 0, 10), 0.01);
  EXPECT_THROW(LrSchedule({.lr = 0.01, .scaling = "cubic"}, 4), InputError);
}

// Horovod: lr = scaled / N * (e * (N - 1) / W + 1), e = epoch + (step + 1) / steps.
TEST(LrSchedule, WarmupFollowsHorovodFormula) {
  LrSchedule s({.lr = 0.01, .warmup_epochs = 2}, 4);
  EXPECT_NEAR(s.at(0, 0, 10), 0.04 / 4 * (0.1 * 3 / 2 + 1), 1e-12);  // e = 0.1
  EXPECT_NEAR(s.at(1, 4, 10), 0.04 / 4 * (1.5 * 3 / 2 + 1), 1e-12);  // e = 1.5
  EXPECT_NEAR(s.at(1, 9, 10), 0.04, 1e-12);                          // e = 2: done
  EXPECT_NEAR(s.at(5, 3, 10), 0.04, 1e-12);
  // One worker: warmup changes nothing.
  EXPECT_DOUBLE_EQ(LrSchedule({.lr = 0.01, .warmup_epochs = 2}, 1).at(0, 0, 10), 0.01);
}

TEST(LrSchedule, StepAndCosine) {
  LrSchedule step({.lr = 0.1, .schedule = "step", .milestones = {2, 4}, .gamma = 0.5}, 1);
  EXPECT_DOUBLE_EQ(step.at(1, 9, 10), 0.1);
  EXPECT_DOUBLE_EQ(step.at(2, 0, 10), 0.05);
  EXPECT_DOUBLE_EQ(step.at(4, 0, 10), 0.025);
  LrSchedule cosine({.lr = 0.1, .schedule = "cosine", .epochs = 4, .min_lr = 0.0}, 1);
  EXPECT_DOUBLE_EQ(cosine.at(0, 0, 10), 0.1);
  EXPECT_NEAR(cosine.at(2, 0, 10), 0.05, 1e-12);
  EXPECT_NEAR(cosine.at(4, 0, 10), 0.0, 1e-12);
}

}  // namespace
}  // namespace lockstep::nn
