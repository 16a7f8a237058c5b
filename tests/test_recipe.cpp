// The training-recipe pieces against hand-computed values from PyTorch's
// documented formulas: label smoothing (CrossEntropyLoss), AdamW's
// decoupled weight decay, weight decay that leaves out BatchNorm and bias
// parameters, and clipping by global norm (clip_grad_norm_) after the
// gradient reduction.
#include <gtest/gtest.h>

#include <cmath>

#include "distributed/distributed_optimizer.h"
#include "nn/error.h"
#include "nn/grad_clip.h"
#include "nn/model_zoo.h"
#include "nn/optimizer.h"

namespace lockstep::nn {
namespace {

TEST(LabelSmoothing, LossAndGradientFollowPyTorch) {
  auto backend = make_cpu_backend(1);
  const float logits[] = {1.0f, 2.0f, 3.0f};
  const int32_t label[] = {0};
  float d[3];
  const LossStats s = backend->softmax_cross_entropy(1, 3, logits, label, 2.0f, d, 0.1f);
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  // (1 - e) * (-logp[0]) + e * mean_j(-logp[j])
  const double want = 0.9 * (lse - 1.0) + 0.1 * ((lse - 1) + (lse - 2) + (lse - 3)) / 3.0;
  EXPECT_NEAR(s.loss_sum, want, 1e-5);
  for (int j = 0; j < 3; ++j) {
    const double target = (j == 0 ? 0.9 : 0.0) + 0.1 / 3.0;
    EXPECT_NEAR(d[j], 2.0 * (std::exp(logits[j] - lse) - target), 1e-6) << j;
  }
}

TEST(LabelSmoothing, NeedsTheCrossEntropyLoss) {
  auto model = build_model("mnist_net", {}, {1, 28, 28}, 10);
  EXPECT_THROW(model->set_label_smoothing(0.1f), InputError);
  auto resnet = build_model("resnet20", {}, {1, 28, 28}, 10);
  EXPECT_THROW(resnet->set_label_smoothing(1.0f), InputError);
  EXPECT_NO_THROW(resnet->set_label_smoothing(0.1f));
}

// A 2-D weight and a 1-D bias, values and gradients set by hand.
struct TwoParams {
  Parameter weight{"fc.weight", Tensor({1, 2}), Tensor({1, 2})};
  Parameter bias{"fc.bias", Tensor({1}), Tensor({1})};
  std::vector<Parameter*> list() { return {&weight, &bias}; }
  void set(float w, float g) {
    for (Parameter* p : list()) {
      for (float& v : p->value.span()) v = w;
      for (float& v : p->grad.span()) v = g;
    }
  }
};

TEST(AdamW, OneStepMatchesTheDecoupledFormula) {
  TwoParams params;
  params.set(1.0f, 0.5f);
  auto backend = make_cpu_backend(1);
  auto adamw =
      make_optimizer({.kind = "adamw", .weight_decay = 0.01f}, params.list(), Device::kCpu);
  adamw->step(*backend, 0.1f);
  // w = 1 * (1 - 0.1 * 0.01); m_hat = 0.5, v_hat = 0.25; w -= 0.1 * 0.5 / (0.5 + 1e-8)
  const double want = 1.0 * (1 - 0.1 * 0.01) - 0.1 * 0.5 / (0.5 + 1e-8);
  EXPECT_NEAR(params.weight.value.data()[0], want, 1e-6);
  EXPECT_NEAR(params.bias.value.data()[0], want, 1e-6);
  // Adam (L2) differs: the decay goes through the moments.
  TwoParams l2;
  l2.set(1.0f, 0.5f);
  auto adam = make_optimizer({.kind = "adam", .weight_decay = 0.01f}, l2.list(), Device::kCpu);
  adam->step(*backend, 0.1f);
  EXPECT_NEAR(l2.weight.value.data()[0], 1.0 - 0.1, 1e-6);
}

TEST(WeightDecay, CanLeaveOutBatchNormAndBiasParameters) {
  auto backend = make_cpu_backend(1);
  for (const char* kind : {"sgd", "adamw"}) {
    TwoParams params;
    params.set(2.0f, 0.0f);
    OptimizerConfig c{.kind = kind, .weight_decay = 0.1f};
    c.decay_bn_and_bias = false;
    auto opt = make_optimizer(c, params.list(), Device::kCpu);
    opt->step(*backend, 0.5f);
    // sgd: w -= lr * wd * w; adamw: w *= 1 - lr * wd (and a zero Adam step)
    EXPECT_NEAR(params.weight.value.data()[0], 2.0 * (1 - 0.5 * 0.1), 1e-6) << kind;
    EXPECT_EQ(params.bias.value.data()[0], 2.0f) << kind << ": the bias must not decay";
  }
}

TEST(GradClip, GlobalNormAndCoefficientFollowClipGradNorm) {
  TwoParams params;
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
  TwoParams params;
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
