// TensorBoard event files: CRC-32C and TFRecord framing against known
// values, scalar events decoded back, a damaged tail dropped; a training
// run's file holds metrics.csv's values (read here and by TensorBoard's own
// reader), and resuming, also after a run that outlived its last
// checkpoint, appends without repeating a step.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/formats/tfrecord.h"
#include "app/run/tensorboard.h"
#include "support/dataset_files.h"
#include "support/interop_util.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::run_lockstep;
using testing::ScratchDir;

TEST(TfRecord, Crc32cAndFramingMatchTheReferenceValues) {
  EXPECT_EQ(app::crc32c("123456789"), 0xe3069283u);            // the CRC-32C check value
  EXPECT_EQ(app::crc32c(std::string(32, '\0')), 0x8a9136aau);  // RFC 3720 B.4
  const std::string r = app::tfrecord("abc");
  ASSERT_EQ(r.size(), 8u + 4u + 3u + 4u);
  EXPECT_EQ(r.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(r.substr(12, 3), "abc");
  const std::string two = r + app::tfrecord("de");
  EXPECT_EQ(app::read_tfrecords(two), (std::vector<std::string>{"abc", "de"}));
  size_t valid = 0;
  EXPECT_EQ(app::read_tfrecords(two.substr(0, two.size() - 1), &valid),
            (std::vector<std::string>{"abc"}));
  EXPECT_EQ(valid, r.size());
  std::string damaged = two;
  damaged[r.size() + 12] = 'X';
  EXPECT_EQ(app::read_tfrecords(damaged).size(), 1u);
}

TEST(TensorBoardEvents, HistogramsAreNotReadAsScalars) {
  const std::string e = app::histogram_event("epoch/weights/w", 2, {1.0f, 2.0f, 2.0f, 5.0f}, 4, 0);
  EXPECT_TRUE(app::read_scalar_events(app::tfrecord(e)).empty());
  // The counts (field 7, packed doubles) sum to the values: 1 | 2 2 | - | 5.
  const std::string counts(reinterpret_cast<const char*>(std::vector<double>{1, 2, 0, 1}.data()),
                           32);
  EXPECT_NE(e.find(counts), std::string::npos);
}

TEST(TensorBoardEvents, ScalarEventsDecodeBack) {
  const std::string e = app::scalar_event("epoch/train_loss", 300, 0.25f, 1.7e9);
  const auto s = app::read_scalar_events(app::tfrecord(e));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].tag, "epoch/train_loss");
  EXPECT_EQ(s[0].step, 300);
  EXPECT_EQ(s[0].value, 0.25f);
}

const std::map<std::string, std::string> kPairs = {{"epoch/train_loss", "train_loss"},
                                                   {"epoch/train_accuracy", "train_accuracy"},
                                                   {"epoch/test_loss", "test_loss"},
                                                   {"epoch/test_accuracy", "test_accuracy"},
                                                   {"epoch/lr", "lr"}};

// The event file against metrics.csv (last row per epoch wins), with
// steps_per_epoch / log_every step records per epoch and no repeated step.
void expect_log_matches_metrics(const std::string& run, int64_t epochs, int64_t step_records) {
  const auto events = app::read_scalar_events(
      testing::read_file(run + "/tensorboard/events.out.tfevents.lockstep"));
  std::map<std::string, std::map<int64_t, int>> seen;
  std::map<std::string, std::map<int64_t, float>> value;
  for (const auto& e : events) {
    ++seen[e.tag][e.step];
    value[e.tag][e.step] = e.value;
  }
  for (const auto& [tag, steps] : seen)
    for (const auto& [step, n] : steps) EXPECT_EQ(n, 1) << tag << " step " << step << " repeated";
  std::map<int64_t, std::map<std::string, std::string>> by_epoch;
  for (auto& row : testing::read_csv(run + "/metrics.csv"))
    by_epoch[std::stoll(row["epoch"])] = row;
  ASSERT_EQ(static_cast<int64_t>(by_epoch.size()), epochs);
  for (const auto& [tag, column] : kPairs) {
    ASSERT_EQ(static_cast<int64_t>(value[tag].size()), epochs) << tag;
    for (const auto& [epoch, row] : by_epoch)
      EXPECT_NEAR(value[tag][epoch], std::stod(row.at(column)),
                  1e-6 + 1e-6 * std::stod(row.at(column)))
          << tag << " epoch " << epoch;
  }
  EXPECT_EQ(static_cast<int64_t>(seen["step/train_loss"].size()), step_records);
  EXPECT_EQ(value["epoch/images_per_second"].size(), static_cast<size_t>(epochs));
  EXPECT_EQ(value["epoch/allreduce_wait_s"].size(), static_cast<size_t>(epochs));
}

struct TrainedRun {
  ScratchDir dir;
  std::string train(int64_t epochs, const std::string& extra = "") {
    if (!std::filesystem::exists(dir.file("data")))
      testing::write_mnist_dir(dir.file("data"), 64, 32);
    const auto r = run_lockstep(testing::mnist_train_args(
        dir.file("data"), dir.file("run"),
        "--epochs " + std::to_string(epochs) +
            " --batch-size 16 --log-every 2 --keep-checkpoints 0 --progress none " + extra));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  }
};

TEST(TensorBoardRun, HoldsMetricsCsvValuesAndResumeAppendsWithoutRepeats) {
  TrainedRun run;
  run.train(2, "--tensorboard-histograms");
  expect_log_matches_metrics(run.dir.file("run"), 2, 4);  // 4 steps per epoch, every 2
  run.train(3, "--resume auto --tensorboard-histograms");
  expect_log_matches_metrics(run.dir.file("run"), 3, 6);
  // A run that went on past its last checkpoint: epoch 3 is trained again
  // from epoch 2's checkpoint, and its records replace the first ones.
  std::filesystem::remove(run.dir.file("run/checkpoints/checkpoint-epoch0003-step00000012.lsck"));
  run.train(3, "--resume auto --tensorboard-histograms");
  expect_log_matches_metrics(run.dir.file("run"), 3, 6);

  LOCKSTEP_REQUIRE_INTEROP_PYTHON();
  nlohmann::json pairs(kPairs);
  const auto r =
      testing::run_interop("check-tensorboard --logdir " + run.dir.file("run/tensorboard") +
                           " --metrics " + run.dir.file("run/metrics.csv") + " --pairs '" +
                           pairs.dump() + "' --step-tag step/train_loss --step-count 6" +
                           " --histogram-tag epoch/weights/conv1.weight" +
                           " --histogram-epochs 3 --histogram-values 250");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace lockstep
