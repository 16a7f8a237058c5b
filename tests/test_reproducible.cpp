// The reproducible mode under mpiexec: for one global batch, every number
// of ranks that divides it ends with the same SHA-256 of the state (weights,
// optimizer state, step count) and of the metrics (losses, accuracies); a
// run resumed on other numbers of ranks ends with the bits of an
// uninterrupted one. Multi-rank: never skipped.
#include <gtest/gtest.h>

#include <regex>

#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::contains;
using testing::run_command;
using testing::ScratchDir;

constexpr int kGlobalBatch = 48;

struct Digests {
  std::string state, metrics;
  bool operator==(const Digests&) const = default;
};

class Reproducible : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { data_ = new Data; }
  static void TearDownTestSuite() { delete data_; }

  // Global batch 48 (batch: the per-rank batch given, 0: 48 / ranks), SGD
  // with momentum and weight decay; extra names the model.
  static std::string command(int ranks, const std::string& run_dir, const std::string& extra,
                             int batch = 0) {
    return std::string(LOCKSTEP_MPIEXEC) + " -n " + std::to_string(ranks) + " " + LOCKSTEP_BINARY +
           " train --dataset mnist --data-dir " + data_->dir.path() +
           " --progress plain --threads 1 --reproducible true"
           " --lr 0.05 --momentum 0.9 --weight-decay 0.0005" +
           (contains(extra, "--lr-scaling") ? "" : " --lr-scaling none") +
           " --test-batch-size 20 --run-dir " + run_dir + " --batch-size " +
           std::to_string(batch > 0 ? batch : kGlobalBatch / ranks) + " " + extra;
  }

  // Trains on `ranks` ranks and returns the digests the run prints.
  static Digests train(int ranks, const std::string& extra, const std::string& run_dir = "") {
    ScratchDir scratch;
    const auto r = run_command(command(ranks, run_dir.empty() ? scratch.path() : run_dir, extra));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::smatch m;
    static const std::regex line("state sha256 ([0-9a-f]{64}), metrics sha256 ([0-9a-f]{64})");
    EXPECT_TRUE(std::regex_search(r.output, m, line)) << r.output;
    return m.empty() ? Digests{} : Digests{m[1], m[2]};
  }

  struct Data {
    ScratchDir dir;
    Data() { testing::write_mnist_dir(dir.path(), 4 * kGlobalBatch, 40); }
  };
  static Data* data_;
};

Reproducible::Data* Reproducible::data_ = nullptr;

// mnist_net (two convolutions, dropout2d, dropout, two linear layers).
const std::string kMnistNet = "--model mnist_net ";
// A residual network small enough for CI: BatchNorm (synchronised), a basic
// block, global average pooling, dropout.
const std::string kSmallResNet =
    "--model custom --layers 'conv1: conv2d out=4 kernel=3 pad=1 bias=false'"
    " --layers 'bn1: batchnorm2d relu=true' --layers 'layer1.0: basic_block out=8 stride=2 "
    "shortcut=pad' --layers 'avgpool: global_avg_pool2d' --layers 'drop: dropout p=0.3'"
    " --layers 'linear: linear out=10' --sync-batchnorm true ";

// fp32 mnist_net: 1 to 16 ranks (16 oversubscribed), 4 steps.
TEST_F(Reproducible, SameBitsOnAnyNumberOfRanks) {
  const std::string flags = kMnistNet + "--train-subset 96 --epochs 2";
  const Digests one = train(1, flags);
  for (int ranks : {2, 3, 4, 6, 8, 16}) {
    EXPECT_EQ(train(ranks, flags), one) << ranks << " ranks against 1";
  }
  // Not vacuous: another seed trains other bits.
  EXPECT_NE(train(2, flags + " --seed 7").state, one.state);
}

// SyncBatchNorm, bf16 convolutions and GEMMs, random crops and flips, and
// three backward passes per step (the epoch's 4 batches: 3 + 1).
TEST_F(Reproducible, SameBitsWithSyncBatchNormBf16AugmentationAndAccumulation) {
  const std::string flags =
      kSmallResNet + "--epochs 1 --precision bf16 --augment on --backward-passes-per-step 3";
  const Digests one = train(1, flags);
  for (int ranks : {2, 3, 4, 6, 8}) {
    EXPECT_EQ(train(ranks, flags), one) << ranks << " ranks against 1";
  }
}

// The bits hold for one kind of kernels: ranks on other ones (here rank 1
// with direct convolutions, as an AVX2 node beside AVX-512 ones would be)
// are refused at start-up, naming the ranks and what each runs. MPMD
// mpiexec gives the one rank its own environment.
TEST_F(Reproducible, RanksOnOtherKernelsAreRefused) {
  ScratchDir run;
  const std::string one = command(1, run.path(), kMnistNet + "--train-subset 96 --epochs 1", 24);
  const std::string program = one.substr(one.find(LOCKSTEP_BINARY));
  const auto r = run_command(std::string(LOCKSTEP_MPIEXEC) + " -n 1 " + program +
                             " : -n 1 -env LOCKSTEP_CPU_WINOGRAD 0 " + program);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "ranks disagree on CPU kernels, which reproducible = true needs alike on "
                       "every rank (LOCKSTEP_CPU_ISA, LOCKSTEP_CPU_WINOGRAD): rank 0 has "))
      << r.output;
  EXPECT_TRUE(contains(r.output, " kernels, Winograd 3x3 convolutions, rank 1 has ")) << r.output;
  EXPECT_TRUE(contains(r.output, " kernels, direct convolutions")) << r.output;
  EXPECT_FALSE(contains(r.output, "epoch   1/1")) << r.output;
}

// bf16 takes Winograd's passes in fp32 too: ranks differing only in
// LOCKSTEP_CPU_WINOGRAD run different kernels there as well, and are refused.
TEST_F(Reproducible, Bf16RanksDifferingOnlyInWinogradAreRefused) {
  ScratchDir run;
  const std::string two =
      command(2, run.path(), kMnistNet + "--train-subset 96 --epochs 1 --precision bf16");
  const std::string program = two.substr(two.find(LOCKSTEP_BINARY));
  const auto r = run_command(std::string(LOCKSTEP_MPIEXEC) + " -n 1 " + program +
                             " : -n 1 -env LOCKSTEP_CPU_WINOGRAD 0 " + program);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(
      contains(r.output, " kernels, bf16 direct convolutions, fp32 Winograd 3x3 where it appl"))
      << r.output;
  EXPECT_TRUE(contains(r.output, " kernels, bf16 direct convolutions (start every rank"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "epoch   1/1")) << r.output;
}

// 4 ranks for epoch 1, 2 ranks for epoch 2, 3 ranks for epoch 3: the bits
// of 3 epochs on 1 rank; a rank count that does not divide is refused.
TEST_F(Reproducible, ResumesOnOtherNumbersOfRanks) {
  const std::string flags = kMnistNet + "--train-subset 96 ";
  const Digests straight = train(1, flags + "--epochs 3");
  ScratchDir run;
  train(4, flags + "--epochs 1", run.path());
  // Given the 4 ranks' per-rank batch (12): the global batch 48 is kept, and
  // the batches the 2 ranks load hold 24.
  auto r =
      run_command(command(2, run.path(), flags + "--epochs 2 --resume auto", kGlobalBatch / 4));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "world size changed from 4 to 2 ranks: per-rank batch 24 = global "
                       "batch 48 (12 x 4) / 2"))
      << r.output;
  const Digests resumed = train(3, flags + "--epochs 3 --resume auto", run.path());
  EXPECT_EQ(resumed.state, straight.state);
  r = run_command(command(5, run.path(), flags + "--epochs 4 --resume auto"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "which 5 ranks cannot divide")) << r.output;
}

TEST_F(Reproducible, RefusesWhatItCannotKeep) {
  const std::pair<std::string, std::string> cases[] = {
      {kMnistNet + "--compression fp16",
       "flag --reproducible: config key reproducible = true needs compression = \"none\""},
      {kMnistNet + "--lr-scaling linear",
       "flag --reproducible: config key reproducible = true needs lr_scaling = \"none\""},
      {"--model resnet20 --sync-batchnorm false",
       "flag --reproducible: config key reproducible = true: model resnet20 has BatchNorm "
       "layers, which need sync_batchnorm = true"},
  };
  for (const auto& [flags, message] : cases) {
    ScratchDir scratch;
    const auto r = run_command(command(1, scratch.path(), "--epochs 1 " + flags));
    EXPECT_NE(r.exit_code, 0) << flags;
    EXPECT_TRUE(contains(r.output, message)) << flags << "\n" << r.output;
  }
}

}  // namespace
}  // namespace lockstep
