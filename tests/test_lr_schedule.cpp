// Learning-rate schedules (nn/lr_schedule.h) against values computed by
// hand: scaling with the number of workers, Horovod's gradual warmup, step
// and cosine decay.
#include <gtest/gtest.h>

#include "common/error.h"
#include "nn/lr_schedule.h"

namespace lockstep::nn {
namespace {

TEST(LrSchedule, ScalingRules) {
  EXPECT_DOUBLE_EQ(LrSchedule({.lr = 0.01, .scaling = LrScaling::kLinear}, 8).at(0, 0, 10), 0.08);
  EXPECT_NEAR(LrSchedule({.lr = 0.01, .scaling = LrScaling::kSqrt}, 4).at(0, 0, 10), 0.02, 1e-12);
  EXPECT_DOUBLE_EQ(LrSchedule({.lr = 0.01, .scaling = LrScaling::kNone}, 4).at(0, 0, 10), 0.01);
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
  LrSchedule step(
      {.lr = 0.1, .schedule = LrScheduleKind::kStep, .milestones = {2, 4}, .gamma = 0.5}, 1);
  EXPECT_DOUBLE_EQ(step.at(1, 9, 10), 0.1);
  EXPECT_DOUBLE_EQ(step.at(2, 0, 10), 0.05);
  EXPECT_DOUBLE_EQ(step.at(4, 0, 10), 0.025);
  LrSchedule cosine({.lr = 0.1, .schedule = LrScheduleKind::kCosine, .epochs = 4, .min_lr = 0.0},
                    1);
  EXPECT_DOUBLE_EQ(cosine.at(0, 0, 10), 0.1);
  EXPECT_NEAR(cosine.at(2, 0, 10), 0.05, 1e-12);
  EXPECT_NEAR(cosine.at(4, 0, 10), 0.0, 1e-12);
}

}  // namespace
}  // namespace lockstep::nn
