// Training in bf16 precision end to end: the same short run (mnist_net on a
// Fashion-MNIST subset, same seed) in fp32 and in bf16 gives per-epoch
// train losses within 5% of each other and test accuracies within 3 points;
// the start-up line names the precision, and says when bf16 runs emulated
// (slower than fp32); fp16 is refused with the key named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app/platform/cpu_isa_env.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::run_lockstep;

struct Epoch {
  double train_loss = 0.0, test_accuracy = 0.0;
};

// Per epoch: columns train_loss and test_accuracy of metrics.csv.
std::vector<Epoch> read_metrics(const std::string& dir) {
  std::vector<Epoch> out;
  for (const auto& row : testing::read_csv(dir + "/metrics.csv")) {
    out.push_back({std::stod(row.at("train_loss")), std::stod(row.at("test_accuracy"))});
  }
  return out;
}

std::string run_args(const std::string& dir, const std::string& precision) {
  return "train --dataset fashion-mnist --train-subset 2000 --test-subset 500 --epochs 3 "
         "--lr 0.05 --seed 3 --progress plain --threads 2 --precision " +
         precision + " --run-dir " + dir;
}

TEST(TrainBf16, LossTracksFp32) {
  REQUIRE_FASHION_MNIST();
  testing::ScratchDir base;  // its own folder: ctest runs this test twice at once (isa_avx2)
  std::vector<Epoch> runs[2];
  const char* precisions[2] = {"fp32", "bf16"};
  for (int i = 0; i < 2; ++i) {
    const std::string dir = base.file(precisions[i]);
    const auto r = run_lockstep(run_args(dir, precisions[i]));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    if (i == 1) {
      EXPECT_NE(r.output.find("bf16"), std::string::npos) << r.output;
      // The emulation is said where it runs (this CPU, or the isa_avx2 lane),
      // and only there.
      const bool emulated = nn::make_cpu_backend(app::cpu_backend_options(1, nn::Precision::kBf16))
                                ->kernels()
                                .bf16_emulated;
      EXPECT_EQ(r.output.find("note: bf16 products are emulated (") != std::string::npos, emulated)
          << r.output;
    }
    runs[i] = read_metrics(dir);
    ASSERT_EQ(runs[i].size(), 3u) << r.output;
  }
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_NEAR(runs[1][e].train_loss, runs[0][e].train_loss, 0.05 * runs[0][e].train_loss)
        << "epoch " << e + 1;
    EXPECT_NEAR(runs[1][e].test_accuracy, runs[0][e].test_accuracy, 0.03) << "epoch " << e + 1;
  }
  EXPECT_LT(runs[1][2].train_loss, runs[1][0].train_loss);  // it learns
}

TEST(TrainBf16, Fp16IsRefusedNamingTheKey) {
  const auto r = run_lockstep("train --precision fp16 --epochs 1 --train-subset 64");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("config key precision = \"fp16\""), std::string::npos) << r.output;
}

}  // namespace
}  // namespace lockstep
