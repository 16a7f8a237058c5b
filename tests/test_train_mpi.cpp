// The lockstep command under mpiexec: data parallelism proven by
// equivalence, exact distributed metrics, rank-0-only output, multi-rank
// resume, and refusal of ranks that disagree. Multi-rank: never skipped.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "app/checkpoint/checkpoint.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::final_checkpoint;
using testing::newest_checkpoint;
using testing::run_command;
using testing::ScratchDir;

std::string mpiexec(int ranks, const std::string& args) {
  return std::string(LOCKSTEP_MPIEXEC) + " -n " + std::to_string(ranks) + " " + LOCKSTEP_BINARY +
         " " + args;
}

// A tiny Fashion-MNIST-format dataset the test writes itself, so these
// multi-rank tests need nothing installed and never skip.
struct TinyData {
  ScratchDir dir;
  TinyData(int64_t train, int64_t test) { testing::write_mnist_dir(dir.path(), train, test); }
  std::string flags() const {
    return "--dataset mnist --data-dir " + dir.path() + " --progress plain --threads 1";
  }
};

double max_relative_difference(const app::Checkpoint& a, const app::Checkpoint& b,
                               const std::string& prefix_filter) {
  double worst = 0.0;
  for (const auto& e : a.entries) {
    if (e.name.find(prefix_filter) == std::string::npos) continue;
    const auto* other = b.find(e.name);
    EXPECT_NE(other, nullptr) << e.name;
    if (other == nullptr) continue;
    for (size_t i = 0; i < e.values.size(); ++i) {
      const double d = std::fabs(double(e.values[i]) - other->values[i]);
      worst = std::max(worst, d / std::max(1e-3, std::fabs(double(e.values[i]))));
    }
  }
  return worst;
}

// Trains mnist_net for 2 epochs on `train` tiny samples with 1 rank at
// batch 64 and 2 ranks at batch 32 (plus `extra` flags), and checks that
// they end with the same weights and momentum; returns the final step.
int64_t expect_two_ranks_match_one(int64_t train, const std::string& extra) {
  TinyData data(train, 100);
  ScratchDir one, two;
  const std::string common = data.flags() +
                             " --model mnist_net --epochs 2 --lr 0.05 --lr-scaling none"
                             " --test-subset 100 " +
                             extra + " --run-dir ";
  auto r = run_command(mpiexec(1, "train " + common + one.path() + " --batch-size 64"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // With the bucket check on: backward never writes a bucket MPI reads.
  r = run_command("LOCKSTEP_VERIFY_BUCKETS=1 " +
                  mpiexec(2, "train " + common + two.path() + " --batch-size 32"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (::testing::Test::HasFailure()) return -1;
  const auto a = final_checkpoint(one.path());
  const auto b = final_checkpoint(two.path());
  EXPECT_EQ(a.meta["step"], b.meta["step"]);
  EXPECT_LT(max_relative_difference(a, b, "weight"), 1e-3);
  EXPECT_LT(max_relative_difference(a, b, "momentum_buffer"), 1e-2);
  return a.meta["step"].get<int64_t>();
}

// N ranks at batch B == 1 rank at batch N*B: the same samples per step (the
// strided shards of one permutation), gradients averaged, dropout masks keyed
// by sample id. Only the order of float sums differs.
TEST(TrainMpi, TwoRanksAtBatchBEqualOneRankAtBatch2B) {
  EXPECT_EQ(expect_two_ranks_match_one(512, ""), 16);
}

// The same with backward_passes_per_step = 3 over 8 batches a rank (the last
// one short): steps of 3, 3 and 2 passes, the short batch weighted per
// sample on 2 ranks as on 1.
TEST(TrainMpi, AccumulationWithAShortLastStepMatchesOneRank) {
  EXPECT_EQ(expect_two_ranks_match_one(500, "--backward-passes-per-step 3"), 6);
}

// Per-rank BatchNorm (sync_batchnorm off): each rank's running statistics
// follow its own half batches, and the trainer averages them over the ranks
// after every epoch. The running mean is an exponential average of batch
// means, linear in them: with weights that do not move (lr 1e-12: below one
// ulp of a weight, 1e-13 on biases that start at 0) the average of 2 ranks' running means at batch
// 32 is the running mean of 1 rank at batch 64 (the same samples per step), to float rounding; rank
// 0's own statistics alone are far from it.
TEST(TrainMpi, RunningStatisticsAreAveragedOverRanksWithoutSyncBatchNorm) {
  TinyData data(256, 100);
  ScratchDir one, two;
  std::ofstream(one.file("bn.toml"))
      << "model = \"custom\"\nlayers = [\"conv2d out=4 kernel=3\", \"batchnorm2d relu=true\", "
         "\"max_pool2d kernel=2\", \"flatten\", \"linear out=10\", \"log_softmax\"]\n";
  const std::string common = "train --config " + one.file("bn.toml") + " " + data.flags() +
                             " --epochs 1 --lr 1e-12 --lr-scaling none --test-subset 100 "
                             "--run-dir ";
  auto r = run_command(mpiexec(1, common + one.path() + " --batch-size 64"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(mpiexec(2, common + two.path() + " --batch-size 32"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto a = final_checkpoint(one.path());
  const auto b = final_checkpoint(two.path());
  ASSERT_NE(a.find("batchnorm2d2.running_mean"), nullptr) << "the BatchNorm layer's buffers";
  EXPECT_EQ(a.meta["step"], b.meta["step"]);
  for (const char* name : {"conv2d1.weight", "conv2d1.bias", "batchnorm2d2.weight",
                           "batchnorm2d2.bias", "linear5.weight", "linear5.bias"}) {
    ASSERT_NE(b.find(name), nullptr) << name;
    const std::vector<float>& x = a.find(name)->values;
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_NEAR(x[i], b.find(name)->values[i], 1e-9) << name << " moved";  // biases from 0
    }
  }
  EXPECT_LT(max_relative_difference(a, b, "running_mean"), 1e-4);
  EXPECT_EQ(max_relative_difference(a, b, "num_batches_tracked"), 0.0);
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The reference averaged per-rank means over padded shards; lockstep reduces
// sums and counts, so 3 ranks give the single-process numbers: the same
// prediction for every sample (the confusion matrices, counts, are equal).
// The loss in full precision: EvaluateMpi (tests/mpi/test_evaluate.cpp).
TEST(TrainMpi, ThreeRanksEvaluateLikeOneProcess) {
  TinyData data(256, 100);
  ScratchDir run, one_dir, three_dir;
  auto r = run_command(mpiexec(
      1, "train " + data.flags() + " --epochs 1 --test-subset 100 --run-dir " + run.path()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ckpt = newest_checkpoint(run.path());
  const std::regex line("test loss ([0-9.]+) acc ([0-9.]+)% \\(([0-9]+) samples");
  std::smatch m1, m3;
  const auto one =
      run_command(mpiexec(1, "evaluate --checkpoint " + ckpt + " --report-dir " + one_dir.path()));
  const auto three = run_command(
      mpiexec(3, "evaluate --checkpoint " + ckpt + " --report-dir " + three_dir.path()));
  ASSERT_TRUE(std::regex_search(one.output, m1, line)) << one.output;
  ASSERT_TRUE(std::regex_search(three.output, m3, line)) << three.output;
  EXPECT_EQ(m1[3], "100");
  EXPECT_EQ(m3[3], "100");  // 34 + 33 + 33: every sample once, none padded
  const std::string confusion = file_text(one_dir.file("confusion_matrix.csv"));
  ASSERT_FALSE(confusion.empty()) << one.output;
  EXPECT_EQ(file_text(three_dir.file("confusion_matrix.csv")), confusion);
  EXPECT_EQ(file_text(three_dir.file("per_class_accuracy.csv")),
            file_text(one_dir.file("per_class_accuracy.csv")));
}

TEST(TrainMpi, OnlyRankZeroPrintsAndWrites) {
  TinyData data(256, 64);
  ScratchDir run;
  const auto r = run_command(mpiexec(2, "train " + data.flags() + " --epochs 2 --run-dir " +
                                            run.path() + " --timeline " + run.file("trace.json")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string& out = r.output;
  const std::regex epoch_line("epoch +1/2");
  EXPECT_EQ(std::distance(std::sregex_iterator(out.begin(), out.end(), epoch_line),
                          std::sregex_iterator()),
            1)
      << out;
  std::ifstream metrics(run.file("metrics.csv"));
  int lines = 0;
  for (std::string l; std::getline(metrics, l);) ++lines;
  EXPECT_EQ(lines, 3);  // header + 2 epochs, written once
  EXPECT_EQ(app::CheckpointStore(run.path() + "/checkpoints", 0).list().size(), 2u);
  // The timeline: one merged file with a track per rank, no per-rank leftovers.
  std::ifstream trace(run.file("trace.json"));
  const std::string text((std::istreambuf_iterator<char>(trace)), {});
  EXPECT_NE(text.find("\"pid\":0"), std::string::npos);
  EXPECT_NE(text.find("\"pid\":1"), std::string::npos);
  EXPECT_NE(text.find("allreduce"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(run.file("trace.rank1.json")));
}

TEST(TrainMpi, ResumeWithTwoRanksIsBitIdentical) {
  TinyData data(256, 64);
  ScratchDir straight, split;
  const std::string common = "train " + data.flags() + " --run-dir ";
  auto r = run_command(mpiexec(2, common + straight.path() + " --epochs 4"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(mpiexec(2, common + split.path() + " --epochs 2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(mpiexec(2, common + split.path() + " --epochs 4 --resume auto"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto a = final_checkpoint(straight.path());
  const auto b = final_checkpoint(split.path());
  ASSERT_EQ(a.entries.size(), b.entries.size());
  for (size_t i = 0; i < a.entries.size(); ++i) {
    EXPECT_TRUE(a.entries[i].values == b.entries[i].values) << a.entries[i].name;
  }
}

TEST(TrainMpi, RanksWithDifferentConfigsStopWithOneMessage) {
  TinyData data(128, 32);
  ScratchDir run;
  const std::string base = std::string(LOCKSTEP_BINARY) + " train " + data.flags() +
                           " --epochs 1 --run-dir " + run.path();
  const auto r = run_command("timeout 60 " + std::string(LOCKSTEP_MPIEXEC) + " -n 1 " + base +
                             " --batch-size 64 : -n 1 " + base + " --batch-size 32");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "the job hung";
  EXPECT_NE(r.output.find("config.batch_size"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
}

// The device plan is collective unless device = "cpu": ranks that disagree
// on the device are stopped by the config check before it, with the key
// named, not by mismatched collectives.
TEST(TrainMpi, RanksOnDifferentDevicesStopWithOneMessage) {
  TinyData data(128, 32);
  ScratchDir run;
  const std::string base = std::string(LOCKSTEP_BINARY) + " train " + data.flags() +
                           " --epochs 1 --run-dir " + run.path();
  const auto r = run_command("timeout 60 " + std::string(LOCKSTEP_MPIEXEC) + " -n 1 " + base +
                             " --device cpu : -n 1 " + base + " --device auto");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "the job hung";
  EXPECT_NE(r.output.find("config.device"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace lockstep
