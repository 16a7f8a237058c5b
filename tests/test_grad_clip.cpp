// Clipping by global norm (nn/grad_clip.h) against PyTorch's
// clip_grad_norm_, and the DistributedOptimizer clipping the averaged
// gradients before its step.
#include <gtest/gtest.h>

#include "distributed/distributed_optimizer.h"
#include "nn/grad_clip.h"
#include "nn/optimizer.h"
#include "support/hand_parameters.h"

namespace lockstep::nn {
namespace {

using testing::WeightAndBias;

TEST(GradClip, GlobalNormAndCoefficientFollowClipGradNorm) {
  WeightAndBias params;
  params.weight.grad.data()[0] = 3.0f;
  params.weight.grad.data()[1] = 0.0f;
  params.bias.grad.data()[0] = 4.0f;
  EXPECT_NEAR(global_grad_norm(params.list(), 1.0f), 5.0, 1e-12);
  EXPECT_NEAR(global_grad_norm(params.list(), 0.5f), 2.5, 1e-12);
  EXPECT_FLOAT_EQ(clip_coefficient(5.0, 1.0), static_cast<float>(1.0 / (5.0 + 1e-6)));
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0f) << "never scales up";
  EXPECT_EQ(clip_coefficient(5.0, 0.0), 1.0f) << "0: off";
}

TEST(GradClip, DistributedStepClipsTheAveragedGradients) {
  auto comm = distributed::make_single_communicator();
  auto backend = make_cpu_backend(1);
  WeightAndBias params;
  params.set(0.0f, 0.0f);
  auto sgd = make_optimizer({}, params.list(), Device::kCpu);
  distributed::DistributedOptimizerConfig config;
  config.grad_clip_norm = 1.0;
  distributed::DistributedOptimizer dopt(*comm, *backend, params.list(), *sgd, config);
  params.weight.grad.data()[0] = 3.0f;
  params.bias.grad.data()[0] = 4.0f;
  for (size_t i = params.list().size(); i-- > 0;) dopt.on_grad_ready(i);
  dopt.step(0.1f);
  EXPECT_NEAR(params.weight.value.data()[0], -0.1 * 3.0 / 5.0, 1e-6);
  EXPECT_NEAR(params.bias.value.data()[0], -0.1 * 4.0 / 5.0, 1e-6);
}

}  // namespace
}  // namespace lockstep::nn
