// The validation split: deterministic, stratified, disjoint from training;
// keep_best keeps the best validation checkpoint apart from the newest ones;
// patience stops a run that no longer improves (and a resumed run knows its
// best); bad settings are one-line errors naming the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "app/checkpoint/checkpoint.h"
#include "data/validation_split.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::run_lockstep;
using testing::ScratchDir;

std::vector<int32_t> labels_with_counts(const std::vector<int>& counts) {
  std::vector<int32_t> labels;
  for (int round = 0; round < 1000; ++round)  // interleaved, as real data sets are
    for (size_t c = 0; c < counts.size(); ++c)
      if (round < counts[c]) labels.push_back(static_cast<int32_t>(c));
  return labels;
}

TEST(ValidationSplit, IsStratifiedDisjointCompleteAndDeterministic) {
  const std::vector<int> counts = {100, 40, 7, 1, 250};
  const auto labels = labels_with_counts(counts);
  const auto s = data::stratified_split(labels, 5, 0.2, 42);
  std::set<int64_t> train(s.train.begin(), s.train.end()),
      val(s.validation.begin(), s.validation.end());
  EXPECT_EQ(train.size() + val.size(), labels.size());
  for (int64_t v : val) EXPECT_FALSE(train.contains(v)) << v;
  EXPECT_TRUE(std::is_sorted(s.train.begin(), s.train.end()));
  std::map<int32_t, int> per_class;
  for (int64_t v : s.validation) ++per_class[labels[static_cast<size_t>(v)]];
  EXPECT_EQ(per_class[0], 20);
  EXPECT_EQ(per_class[1], 8);
  EXPECT_EQ(per_class[2], 1);  // round(1.4)
  EXPECT_EQ(per_class[3], 0);  // a lone sample stays in training
  EXPECT_EQ(per_class[4], 50);
  const auto again = data::stratified_split(labels, 5, 0.2, 42);
  EXPECT_EQ(again.validation, s.validation);
  EXPECT_NE(data::stratified_split(labels, 5, 0.2, 43).validation, s.validation);
  // Not simply the first samples of each class.
  EXPECT_NE(s.validation.front(), 0);
}

TEST(ValidationSplit, SplitOffMovesThePixelsWithTheirLabels) {
  const auto images = testing::synthetic_images(50, 1, 4, 4, 5, 3);
  data::Dataset d;
  d.name = "x/train";
  d.channels = 1;
  d.height = d.width = 4;
  d.num_classes = 5;
  d.images = images.images;
  d.labels.assign(images.labels.begin(), images.labels.end());
  const auto split = data::stratified_split(d.labels, 5, 0.3, 7);
  data::Dataset train = d;
  const data::Dataset val = data::split_off_validation(train, 0.3, 7);
  ASSERT_EQ(val.size(), static_cast<int64_t>(split.validation.size()));
  ASSERT_EQ(train.size() + val.size(), d.size());
  EXPECT_EQ(val.name, "x/train/validation");
  for (int64_t k = 0; k < val.size(); ++k) {
    const int64_t i = split.validation[static_cast<size_t>(k)];
    EXPECT_EQ(val.labels[static_cast<size_t>(k)], d.labels[static_cast<size_t>(i)]);
    EXPECT_EQ(0, std::memcmp(val.image(k), d.image(i), 16));
  }
}

TEST(ValidationSplit, KeepBestAndPatienceFollowTheValidationAccuracy) {
  ScratchDir dir;
  const auto written = testing::write_mnist_dir(dir.file("data"), 200, 40);
  const std::vector<int32_t> labels(written.train.labels.begin(), written.train.labels.end());
  const auto val =
      static_cast<int64_t>(data::stratified_split(labels, 10, 0.25, 42).validation.size());
  // lr so small that accuracy soon stops improving: patience ends the run.
  const std::string train = testing::mnist_train_args(
      dir.file("data"), dir.file("run"),
      "--epochs 30 --batch-size 20 --progress plain --val-fraction 0.25 --keep-best --patience 2 "
      "--lr 0.0001 --keep-checkpoints 1");
  const auto r = run_lockstep(train);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("validation " + std::to_string(val) + " samples held out of training"),
            std::string::npos)
      << r.output;
  const auto rows = testing::read_csv(dir.file("run/metrics.csv"));
  ASSERT_GE(rows.size(), 3u);
  ASSERT_LT(rows.size(), 30u) << "patience 2 stops the run early\n" << r.output;
  // The epoch line shows the validation figures that metrics.csv records.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.output, m,
      std::regex(
          R"(epoch +1/30  train loss \S+ acc +\S+%  val loss (\S+) acc +(\S+)%  test loss)")))
      << r.output;
  EXPECT_NEAR(std::stod(m[1]), std::stod(rows[0].at("val_loss")), 6e-5);
  EXPECT_NEAR(std::stod(m[2]), 100 * std::stod(rows[0].at("val_accuracy")), 6e-3);
  EXPECT_EQ(std::stoll(rows[0].at("train_samples")), 200 - val);
  double best = -1;
  int64_t best_epoch = 0;
  for (const auto& row : rows) {
    const double acc = std::stod(row.at("val_accuracy"));
    if (acc > best) best = acc, best_epoch = std::stoll(row.at("epoch"));
  }
  EXPECT_EQ(static_cast<int64_t>(rows.size()), best_epoch + 2) << "stops 2 epochs after its best";
  EXPECT_NE(r.output.find("early stop after epoch " + std::to_string(rows.size())),
            std::string::npos)
      << r.output;
  const auto kept = app::load_checkpoint(dir.file("run/best.lsck"));
  EXPECT_EQ(kept.meta.at("epoch").get<int64_t>(), best_epoch);
  EXPECT_EQ(kept.meta.at("best").at("epoch").get<int64_t>(), best_epoch);
  // The newest (the stopping epoch's) is kept apart from the best.
  const auto newest = app::CheckpointStore(dir.file("run/checkpoints"), 0).list();
  ASSERT_EQ(newest.size(), 1u);
  EXPECT_EQ(app::load_checkpoint(newest[0]).meta.at("epoch").get<int64_t>(),
            static_cast<int64_t>(rows.size()));
  // The run is finished, and says how: job scripts resubmit a run without
  // the marker.
  const std::string marker =
      "complete: early stop after epoch " + std::to_string(rows.size()) + " of 30\n";
  EXPECT_EQ(testing::read_file(dir.file("run/COMPLETE")), marker);
  // Resuming knows the best: it stops at once instead of training on.
  const auto again = run_lockstep(train + " --resume auto");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(testing::read_file(dir.file("run/COMPLETE")), marker) << again.output;
  EXPECT_EQ(testing::read_csv(dir.file("run/metrics.csv")).size(), rows.size()) << again.output;
  EXPECT_NE(again.output.find("early stop after epoch " + std::to_string(rows.size())),
            std::string::npos)
      << again.output;
}

TEST(ValidationSplit, BadSettingsNameTheKey) {
  auto r = run_lockstep("train --val-fraction 1.5 --progress none --run-dir /tmp/none");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("val_fraction"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1.5"), std::string::npos) << r.output;
  r = run_lockstep("train --val-fraction 1 --progress none --run-dir /tmp/none");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("val_fraction must be below 1"), std::string::npos) << r.output;
  r = run_lockstep("train --keep-best --progress none --run-dir /tmp/none");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("keep_best and patience need a validation split"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace lockstep
