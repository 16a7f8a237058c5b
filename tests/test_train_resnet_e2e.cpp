// A small BatchNorm ResNet through the lockstep command on real
// Fashion-MNIST: checkpoints hold the running statistics under PyTorch's
// names, resume is bit-identical, evaluation restores the buffers, and two
// ranks with sync_batchnorm = true show the statistics' collectives on the
// timeline.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "app/checkpoint/checkpoint.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::final_checkpoint;
using testing::run_command;
using testing::run_lockstep;
using testing::ScratchDir;

std::string small_resnet_run(const std::string& dir, int epochs) {
  return "train --dataset fashion-mnist --train-subset 256 --test-subset 200 --batch-size 32"
         " --epochs " +
         std::to_string(epochs) +
         " --model custom --layers 'conv1: conv2d out=4 kernel=3 pad=1 bias=false'"
         " --layers 'bn1: batchnorm2d relu=true' --layers 'layer1.0: basic_block out=8 "
         "stride=2 shortcut=pad' --layers 'avgpool: global_avg_pool2d'"
         " --layers 'linear: linear out=10' --lr 0.05 --momentum 0.9 --progress plain"
         " --threads 1 --run-dir " +
         dir;
}

TEST(TrainResNetE2E, CheckpointsHoldBuffersAndResumeIsBitIdentical) {
  REQUIRE_FASHION_MNIST();
  ScratchDir straight, split;
  auto r = run_lockstep(small_resnet_run(straight.path(), 2));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("    layer1.0.bn1"), std::string::npos) << r.output;
  r = run_lockstep(small_resnet_run(split.path(), 1));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_lockstep(small_resnet_run(split.path(), 2) + " --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto a = final_checkpoint(straight.path()), b = final_checkpoint(split.path());
  for (const char* name :
       {"bn1.running_mean", "layer1.0.bn2.running_var", "layer1.0.bn1.num_batches_tracked"}) {
    ASSERT_NE(a.find(name), nullptr) << name;
  }
  EXPECT_EQ(a.find("layer1.0.bn1.num_batches_tracked")->values, std::vector<float>{16.0f});
  testing::expect_same_tensors(a, b);
  // Evaluation in eval mode uses the restored running statistics.
  const std::vector<std::string> f = testing::last_metrics(straight.path());
  r = run_lockstep("evaluate --checkpoint " + testing::newest_checkpoint(straight.path()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("acc ([0-9.]+)% \\(200 samples")))
      << r.output;
  ASSERT_GT(f.size(), 6u);
  EXPECT_NEAR(std::stod(m[1]) / 100.0, std::stod(f[6]), 1e-4) << r.output;
}

TEST(TrainResNetE2E, SyncBatchNormOnTwoRanksShowsItsCollectivesOnTheTimeline) {
  REQUIRE_FASHION_MNIST();
  ScratchDir dir;
  const std::string trace = dir.file("trace.json");
  const auto r = run_command(std::string(LOCKSTEP_MPIEXEC) + " -n 2 " LOCKSTEP_BINARY " " +
                             small_resnet_run(dir.path(), 1) + " --sync-batchnorm --timeline " +
                             trace + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 ranks"), std::string::npos) << r.output;
  const std::string text = testing::read_file(trace);
  for (const char* span :
       {"sync_batchnorm bn1 forward statistics", "sync_batchnorm layer1.0.bn2 backward sums"}) {
    EXPECT_NE(text.find(span), std::string::npos) << span << " missing from the timeline";
  }
}

}  // namespace
}  // namespace lockstep
