// Loss scaling as the trainer takes a step (DistributedOptimizer::step with
// a GradScaler; app/run/loss_scaling.h): a skipped step leaves weights and
// optimizer state untouched, a taken step equals the unscaled one bit for
// bit, clipping applies to the unscaled gradients, and the scaler's state
// survives the checkpoint's JSON.
#include <gtest/gtest.h>

#include <limits>

#include "app/run/loss_scaling.h"
#include "support/dopt_test_util.h"

namespace lockstep::app {
namespace {

using distributed::testing::backward;
using distributed::testing::Batch;
using distributed::testing::FakeCommunicator;
using distributed::testing::make_batch;
using distributed::testing::range_ids;
using distributed::testing::small_model;
using distributed::testing::values;

constexpr int64_t kBatch = 8;

std::vector<float> state_values(nn::Optimizer& opt) {
  std::vector<float> out;
  for (const nn::StateTensor& s : opt.state()) {
    out.insert(out.end(), s.tensor->data(), s.tensor->data() + s.tensor->numel());
  }
  return out;
}

struct Rig {
  std::unique_ptr<nn::Backend> backend = nn::make_cpu_backend(1);
  FakeCommunicator comm{2};
  std::unique_ptr<nn::Model> model = small_model(3);
  std::unique_ptr<nn::Optimizer> opt;
  std::unique_ptr<distributed::DistributedOptimizer> dopt;

  // scaler: loss scaling (null: off), kept by the caller.
  Rig(nn::OptimizerKind kind, distributed::Compression compression, nn::GradScaler* scaler,
      double clip = 0.0) {
    opt =
        nn::make_optimizer({.kind = kind, .momentum = 0.9f}, model->parameters(), nn::Device::kCpu);
    distributed::DistributedOptimizerConfig c;
    c.compression = compression;
    c.grad_scaler = scaler;
    c.grad_clip_norm = clip;
    c.overlap = false;  // the test may poison a gradient after backward
    dopt = std::make_unique<distributed::DistributedOptimizer>(comm, *backend, model->parameters(),
                                                               *opt, c);
  }
  // One step; poison: a gradient is set to inf after backward.
  bool step(const nn::GradScaler& scaler, int64_t first_id, bool poison) {
    const Batch b = make_batch(range_ids(first_id, kBatch));
    backward(*model, *backend, b, scaler.loss_factor() * (1.0f / kBatch),
             dopt->grad_ready_callback());
    if (poison) model->parameters()[1]->grad.data()[0] = std::numeric_limits<float>::infinity();
    return dopt->step(0.1);
  }
};

TEST(LossScaling, SkippedStepLeavesWeightsAndOptimizerStateUntouched) {
  for (nn::OptimizerKind kind : {nn::OptimizerKind::kSgd, nn::OptimizerKind::kAdam}) {
    for (auto compression : {distributed::Compression::kNone, distributed::Compression::kFp16}) {
      SCOPED_TRACE(std::string(nn::to_string(kind)) + " " + distributed::to_string(compression));
      nn::GradScaler scaler({.init_scale = 1024.0f, .growth_interval = 2});
      Rig rig(kind, compression, &scaler);
      EXPECT_TRUE(rig.step(scaler, 0, false));
      const std::vector<float> w = values(*rig.model), s = state_values(*rig.opt);
      const int64_t steps = rig.opt->steps();
      const double last_lr = rig.opt->last_lr();
      EXPECT_FALSE(rig.step(scaler, 8, true));
      EXPECT_TRUE(values(*rig.model) == w) << "a skipped step changed the weights";
      EXPECT_TRUE(state_values(*rig.opt) == s) << "a skipped step changed the optimizer state";
      EXPECT_EQ(rig.opt->steps(), steps);
      EXPECT_EQ(rig.opt->last_lr(), last_lr);
      EXPECT_EQ(scaler.scale(), 512.0f);
      EXPECT_EQ(scaler.state().growth_tracker, 0);
      EXPECT_EQ(scaler.skipped(), 1);
      // Training goes on from where it was, with finite weights.
      EXPECT_TRUE(rig.step(scaler, 16, false));
      EXPECT_TRUE(values(*rig.model) != w);
      for (float v : values(*rig.model)) ASSERT_TRUE(std::isfinite(v));
    }
  }
}

// Power-of-two scales commute with float rounding: the scaled loss, unscaled
// in the update, gives the unscaled run's weights bit for bit, also while
// the scale grows.
TEST(LossScaling, TakenStepsEqualUnscaledTrainingBitForBit) {
  nn::GradScaler scaler({.init_scale = 65536.0f, .growth_interval = 2});
  Rig plain(nn::OptimizerKind::kAdam, distributed::Compression::kNone, nullptr);
  Rig scaled(nn::OptimizerKind::kAdam, distributed::Compression::kNone, &scaler);
  for (int64_t t = 0; t < 5; ++t) {
    const Batch b = make_batch(range_ids(t * kBatch, kBatch));
    backward(*plain.model, *plain.backend, b, 1.0f / kBatch, plain.dopt->grad_ready_callback());
    plain.dopt->step(0.1f);
    EXPECT_TRUE(scaled.step(scaler, t * kBatch, false));
    ASSERT_TRUE(values(*plain.model) == values(*scaled.model)) << "step " << t;
  }
  EXPECT_EQ(scaler.scale(), 65536.0f * 4);
  EXPECT_TRUE(state_values(*plain.opt) == state_values(*scaled.opt));
}

// Clipping applies to the unscaled average, with loss scaling on as off: a
// plain SGD step (no momentum on the first step's update) moves the weights
// by lr * the clipped gradient, whose global norm is grad_clip_norm.
TEST(LossScaling, ClipsTheUnscaledGradientsToGradClipNorm) {
  constexpr double kClip = 0.05, kLr = 1.0;
  nn::GradScaler scaler({.init_scale = 65536.0f});
  Rig plain(nn::OptimizerKind::kSgd, distributed::Compression::kNone, nullptr);
  Rig clipped(nn::OptimizerKind::kSgd, distributed::Compression::kNone, &scaler, kClip);
  Rig clipped_plain(nn::OptimizerKind::kSgd, distributed::Compression::kNone, nullptr, kClip);
  const Batch b = make_batch(range_ids(0, kBatch));
  // The unclipped average gradient's norm (FakeCommunicator(2): sum of two
  // identical ranks, halved in the update).
  backward(*plain.model, *plain.backend, b, 1.0f / kBatch, plain.dopt->grad_ready_callback());
  const std::vector<float> w0 = values(*plain.model);
  plain.dopt->step(kLr);
  double unclipped = 0.0;
  const std::vector<float> w_plain = values(*plain.model);
  for (size_t i = 0; i < w0.size(); ++i) unclipped += std::pow((w_plain[i] - w0[i]) / kLr, 2);
  ASSERT_GT(std::sqrt(unclipped), 4 * kClip) << "the test needs a gradient that clipping changes";

  for (Rig* rig : {&clipped, &clipped_plain}) {
    const float factor = rig == &clipped ? scaler.loss_factor() : 1.0f;
    backward(*rig->model, *rig->backend, b, factor / kBatch, rig->dopt->grad_ready_callback());
    ASSERT_TRUE(rig->dopt->step(kLr));
    const std::vector<float> w = values(*rig->model);
    double norm = 0.0;
    for (size_t i = 0; i < w0.size(); ++i) norm += std::pow((w[i] - w0[i]) / kLr, 2);
    EXPECT_NEAR(std::sqrt(norm), kClip, 1e-3 * kClip)
        << (rig == &clipped ? "with" : "without") << " loss scaling";
  }
  EXPECT_EQ(values(*clipped.model), values(*clipped_plain.model));
}

TEST(LossScaling, OnForFp16OrWhenAskedOnly) {
  TrainConfig c;
  EXPECT_EQ(make_grad_scaler(c), nullptr);  // fp32, auto
  c.precision = nn::Precision::kBf16;
  EXPECT_EQ(make_grad_scaler(c), nullptr);
  c.precision = nn::Precision::kFp16;
  c.loss_scale_growth_interval = 7;
  auto s = make_grad_scaler(c);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->scale(), 65536.0f);
  EXPECT_EQ(s->config().growth_interval, 7);
  c.loss_scaling = "off";
  EXPECT_EQ(make_grad_scaler(c), nullptr);
  EXPECT_FALSE(loss_scaling_on(c));
  c.precision = nn::Precision::kFp32;
  c.loss_scaling = "on";
  c.loss_scale_init = 8;
  ASSERT_NE(make_grad_scaler(c), nullptr);
  EXPECT_EQ(make_grad_scaler(c)->scale(), 8.0f);
  EXPECT_TRUE(loss_scaling_on(c));
}

TEST(LossScaling, StateRoundTripsThroughCheckpointJson) {
  nn::GradScaler a({.init_scale = 3.0f, .growth_interval = 5});
  for (bool f : {true, false, false, true, false, false, false}) a.update(f);
  const auto text = scaler_state_json(a).dump();
  nn::GradScaler b;
  restore_scaler_state(b, nlohmann::json::parse(text), "ck.lsck");
  EXPECT_EQ(b.scale(), a.scale());  // 0.75: not a power of two, still exact
  EXPECT_EQ(b.state().growth_tracker, 3);
  try {
    restore_scaler_state(b, nlohmann::json::parse(R"({"scale": 2})"), "ck.lsck");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ck.lsck: malformed loss_scale state"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lockstep::app
