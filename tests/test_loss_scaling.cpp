// Loss scaling as the trainer takes a step (app/run/loss_scaling.h): a skipped
// step leaves weights and optimizer state untouched, a taken step equals
// the unscaled one bit for bit, and the scaler's state survives the
// checkpoint's JSON.
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

  Rig(const std::string& kind, distributed::Compression compression) {
    opt =
        nn::make_optimizer({.kind = kind, .momentum = 0.9f}, model->parameters(), nn::Device::kCpu);
    distributed::DistributedOptimizerConfig c;
    c.compression = compression;
    c.keep_non_finite = true;
    c.overlap = false;  // the test may poison a gradient after backward
    dopt = std::make_unique<distributed::DistributedOptimizer>(comm, *backend, model->parameters(),
                                                               *opt, c);
  }
  // One step; poison: a gradient is set to inf after backward.
  bool step(nn::GradScaler& scaler, int64_t first_id, bool poison) {
    const Batch b = make_batch(range_ids(first_id, kBatch));
    backward(*model, *backend, b, scaler.loss_factor() * (1.0f / kBatch),
             dopt->grad_ready_callback());
    if (poison) model->parameters()[1]->grad.data()[0] = std::numeric_limits<float>::infinity();
    return scaled_step(scaler, *dopt, *opt, *backend, comm, model->parameters(), 0.1f, nullptr);
  }
};

TEST(LossScaling, SkippedStepLeavesWeightsAndOptimizerStateUntouched) {
  for (const char* kind : {"sgd", "adam"}) {
    for (auto compression : {distributed::Compression::kNone, distributed::Compression::kFp16}) {
      SCOPED_TRACE(std::string(kind) + " " + distributed::to_string(compression));
      Rig rig(kind, compression);
      nn::GradScaler scaler({.init_scale = 1024.0f, .growth_interval = 2});
      EXPECT_TRUE(rig.step(scaler, 0, false));
      const std::vector<float> w = values(*rig.model), s = state_values(*rig.opt);
      const int64_t steps = rig.opt->steps();
      const float last_lr = rig.opt->last_lr();
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
  Rig plain("adam", distributed::Compression::kNone);
  Rig scaled("adam", distributed::Compression::kNone);
  nn::GradScaler scaler({.init_scale = 65536.0f, .growth_interval = 2});
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

TEST(LossScaling, OnForFp16OrWhenAskedOnly) {
  TrainConfig c;
  EXPECT_EQ(make_grad_scaler(c), nullptr);  // fp32, auto
  c.precision = "bf16";
  EXPECT_EQ(make_grad_scaler(c), nullptr);
  c.precision = "fp16";
  c.loss_scale_growth_interval = 7;
  auto s = make_grad_scaler(c);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->scale(), 65536.0f);
  EXPECT_EQ(s->config().growth_interval, 7);
  c.loss_scaling = "off";
  EXPECT_EQ(make_grad_scaler(c), nullptr);
  EXPECT_FALSE(loss_scaling_on(c));
  c.precision = "fp32";
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
