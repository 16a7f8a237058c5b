// Loss scaling through the lockstep command on the CPU (loss_scaling = on
// with fp32, the route that runs without a GPU): with power-of-two scales
// it trains bit for bit as without; the scale and growth tracker resume
// exactly; a scale too large for the gradients makes steps skip, says so,
// and training recovers.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>

#include "app/checkpoint/checkpoint.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::expect_same_tensors;
using testing::final_checkpoint;
using testing::run_lockstep;
using testing::ScratchDir;

// 1000 samples at batch 64: 16 steps an epoch.
std::string scaling_run(const std::string& dir, int epochs) {
  return testing::fashion_mnist_train_args(dir, epochs, 1000, 200, 1);
}

// 32 steps with growth every 10: the scale doubles three times, no step is
// skipped, and the weights equal the unscaled run's.
TEST(TrainLossScaling, PowerOfTwoScalesTrainBitForBitAsWithout) {
  REQUIRE_FASHION_MNIST();
  ScratchDir plain, scaled;
  auto r = run_lockstep(scaling_run(plain.path(), 2));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_lockstep(scaling_run(scaled.path(), 2) +
                   " --loss-scaling on --loss-scale-growth-interval 10");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("loss scaling: scale 65536 (initial 65536), x2 after 10 clean steps"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("loss scale 131072, 0 steps skipped"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("loss scale 524288, 0 steps skipped"), std::string::npos) << r.output;
  const auto a = final_checkpoint(plain.path()), b = final_checkpoint(scaled.path());
  expect_same_tensors(a, b);
  EXPECT_FALSE(a.meta.contains("loss_scale"));
  EXPECT_EQ(b.meta.at("loss_scale").at("scale"), 524288.0);
  EXPECT_EQ(b.meta.at("loss_scale").at("growth_tracker"), 2);
}

// grad_clip_norm applies with loss scaling on as off (it was skipped when
// the scaled step bypassed DistributedOptimizer::step): the clipped runs
// agree bit for bit, and differ from the unclipped one.
TEST(TrainLossScaling, ClippingAppliesWithLossScalingAsWithout) {
  REQUIRE_FASHION_MNIST();
  ScratchDir unclipped, clipped, scaled;
  const std::string clip = " --grad-clip-norm 0.05";
  auto r = run_lockstep(scaling_run(unclipped.path(), 1));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_lockstep(scaling_run(clipped.path(), 1) + clip);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_lockstep(scaling_run(scaled.path(), 1) + clip + " --loss-scaling on");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("0 steps skipped"), std::string::npos) << r.output;
  const auto a = final_checkpoint(clipped.path()), b = final_checkpoint(scaled.path());
  expect_same_tensors(a, b);
  const auto c = final_checkpoint(unclipped.path());
  ASSERT_EQ(c.entries.size(), a.entries.size());
  bool differs = false;
  for (size_t i = 0; i < c.entries.size(); ++i)
    differs |= c.entries[i].values != a.entries[i].values;
  EXPECT_TRUE(differs) << "clipping at 0.05 changed nothing: the test needs a lower norm";
}

// 2 + 2 epochs resumed equal 4 in one go, the scaler's state included (a
// resume that lost the growth tracker would grow at other steps).
TEST(TrainLossScaling, ResumeRestoresScaleAndGrowthTracker) {
  REQUIRE_FASHION_MNIST();
  const std::string flags = " --loss-scaling on --loss-scale-growth-interval 10";
  ScratchDir straight, split;
  auto r = run_lockstep(scaling_run(straight.path(), 4) + flags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_lockstep(scaling_run(split.path(), 2) + flags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_lockstep(scaling_run(split.path(), 4) + flags + " --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resuming from"), std::string::npos) << r.output;
  const auto a = final_checkpoint(straight.path()), b = final_checkpoint(split.path());
  EXPECT_EQ(a.meta.at("loss_scale"), b.meta.at("loss_scale"));
  EXPECT_EQ(a.meta.at("loss_scale").at("scale"), 65536.0 * 64);  // 64 steps: grew 6 times
  EXPECT_EQ(a.meta.at("loss_scale").at("growth_tracker"), 4);
  expect_same_tensors(a, b);
}

// Gradients scaled by 2^30 overflow fp16 on the wire (compression fp16,
// which rounds even on one rank) as fp16 activations would: the first steps
// are skipped, each halving the scale, until the gradients fit; then the
// model trains on with finite weights.
TEST(TrainLossScaling, OverflowSkipsStepsAndTrainingRecovers) {
  REQUIRE_FASHION_MNIST();
  ScratchDir dir;
  const auto r = run_lockstep(scaling_run(dir.path(), 2) +
                              " --loss-scaling on --loss-scale-init 1073741824 --compression fp16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Steps skipped in each epoch, from the epoch lines.
  std::vector<int> skipped;
  const std::regex line("epoch +\\d+/2 .* (\\d+) steps skipped");
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), line);
       it != std::sregex_iterator(); ++it) {
    skipped.push_back(std::stoi((*it)[1]));
  }
  ASSERT_EQ(skipped.size(), 2u) << r.output;
  EXPECT_GE(skipped[0], 1) << r.output;
  EXPECT_LT(skipped[0] + skipped[1], 32) << r.output;
  const auto c = final_checkpoint(dir.path());
  const double scale = c.meta.at("loss_scale").at("scale").get<double>();
  // No growth in 32 steps at the default interval: one halving per skip.
  EXPECT_EQ(scale, std::ldexp(1.0, 30 - skipped[0] - skipped[1])) << r.output;
  for (const auto& e : c.entries) {
    for (float v : e.values) ASSERT_TRUE(std::isfinite(v)) << e.name;
  }
}

}  // namespace
}  // namespace lockstep
