// `lockstep evaluate` builds only what evaluation needs: it runs with the
// training files gone, takes data flags over the stored config, and refuses
// training flags.
#include <filesystem>

#include <gtest/gtest.h>

#include "app/checkpoint/checkpoint.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::run_lockstep;
using testing::ScratchDir;

TEST(Evaluate, NeedsNoTrainingSet) {
  ScratchDir dir;
  testing::write_mnist_dir(dir.file("mnist"), 96, 40);
  auto r = run_lockstep(testing::mnist_train_args(dir.file("mnist"), dir.file("run"),
                                                  "--epochs 1 --batch-size 32 --progress none"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string checkpoint = testing::newest_checkpoint(dir.file("run"));
  ASSERT_FALSE(checkpoint.empty()) << r.output;
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) {
    ASSERT_TRUE(std::filesystem::remove(dir.file("mnist/") + f)) << f;
  }
  r = run_lockstep("evaluate --checkpoint " + checkpoint);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(40 samples of mnist)"), std::string::npos) << r.output;
  r = run_lockstep("evaluate --test-subset 10 --threads 2 --checkpoint " + checkpoint);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(10 samples of mnist)"), std::string::npos) << r.output;
  r = run_lockstep("evaluate --epochs 3 --checkpoint " + checkpoint);
  EXPECT_NE(r.exit_code, 0) << r.output;
  // The training's data folder gone: the message says the checkpoint named
  // it, and which flag names another.
  std::filesystem::rename(dir.file("mnist"), dir.file("moved"));
  r = run_lockstep("evaluate --checkpoint " + checkpoint);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("checkpoint " + checkpoint +
                          " (its training's data_dir; --data-dir gives another): config key "
                          "data_dir = \"" +
                          dir.file("mnist") + "\": no such folder"),
            std::string::npos)
      << r.output;
  r = run_lockstep("evaluate --data-dir " + dir.file("moved") + " --checkpoint " + checkpoint);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace lockstep
