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

#include "app/checkpoint.h"
#include "support/dataset_files.h"
#include "support/run_command.h"

namespace lockstep {
namespace {

using testing::run_command;
using testing::run_lockstep;
using testing::ScratchDir;

#define REQUIRE_FASHION_MNIST()                                                   \
  if (!std::filesystem::exists(std::string(LOCKSTEP_FASHION_MNIST_DIR) +          \
                               "/train-images-idx3-ubyte.gz"))                    \
  GTEST_SKIP() << "Fashion-MNIST is not installed in " LOCKSTEP_FASHION_MNIST_DIR \
                  " (scripts/setup.sh installs the Debian package dataset-fashion-mnist)"

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

app::Checkpoint final_checkpoint(const std::string& dir) {
  return app::load_checkpoint(app::CheckpointStore(dir + "/checkpoints", 0).latest());
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
  ASSERT_EQ(a.entries.size(), b.entries.size());
  for (size_t i = 0; i < a.entries.size(); ++i) {
    EXPECT_EQ(a.entries[i].name, b.entries[i].name);
    EXPECT_TRUE(a.entries[i].values == b.entries[i].values) << a.entries[i].name << " differs";
  }
  // Evaluation in eval mode uses the restored running statistics.
  std::ifstream metrics(straight.path() + "/metrics.csv");
  std::string line, last;
  while (std::getline(metrics, line)) last = line;
  r = run_lockstep("evaluate --checkpoint " +
                   app::CheckpointStore(straight.path() + "/checkpoints", 0).latest());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("acc ([0-9.]+)% \\(200 samples")))
      << r.output;
  std::stringstream fields(last);
  std::vector<std::string> f;
  while (std::getline(fields, line, ',')) f.push_back(line);
  ASSERT_GT(f.size(), 6u);
  EXPECT_NEAR(std::stod(m[1]) / 100.0, std::stod(f[6]), 1e-4) << r.output;
}

TEST(TrainResNetE2E, SyncBatchNormOnTwoRanksShowsItsCollectivesOnTheTimeline) {
  REQUIRE_FASHION_MNIST();
  ScratchDir dir;
  const std::string trace = dir.file("trace.json");
  const auto r = run_command(std::string(LOCKSTEP_MPIEXEC) + " -n 2 " LOCKSTEP_BINARY " " +
                             small_resnet_run(dir.path(), 1) +
                             " --sync-batchnorm --timeline " + trace + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 ranks"), std::string::npos) << r.output;
  std::ifstream in(trace);
  std::stringstream s;
  s << in.rdbuf();
  for (const char* span :
       {"sync_batchnorm bn1 forward statistics", "sync_batchnorm layer1.0.bn2 backward sums"}) {
    EXPECT_NE(s.str().find(span), std::string::npos) << span << " missing from the timeline";
  }
}

}  // namespace
}  // namespace lockstep
