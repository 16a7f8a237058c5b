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
#include <numeric>
#include <regex>
#include <set>
#include <sstream>

#include "app/checkpoint/checkpoint.h"
#include "app/config/data_setup.h"
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
  // round(0.2 x 398) = 80 in all: 20.1, 8.04, 1.41, 0.2 and 50.25 by class,
  // the one left over to the largest remainder (class 2).
  EXPECT_EQ(s.validation.size(), 80u);
  EXPECT_EQ(per_class[0], 20);
  EXPECT_EQ(per_class[1], 8);
  EXPECT_EQ(per_class[2], 2);
  EXPECT_EQ(per_class[3], 0);  // a lone sample stays in training
  EXPECT_EQ(per_class[4], 50);
  const auto again = data::stratified_split(labels, 5, 0.2, 42);
  EXPECT_EQ(again.validation, s.validation);
  EXPECT_NE(data::stratified_split(labels, 5, 0.2, 43).validation, s.validation);
  // Not simply the first samples of each class.
  EXPECT_NE(s.validation.front(), 0);
}

// A small fraction holds out its share of the whole set, not one sample per
// class: 0.01 of 60 images in 10 classes is 1 sample, not 10 (17%).
TEST(ValidationSplit, ASmallFractionHoldsOutItsShareOfTheWholeSet) {
  const std::vector<int64_t> sixes(10, 6);
  const auto count = [](const std::vector<int64_t>& v) {
    return std::accumulate(v.begin(), v.end(), int64_t{0});
  };
  EXPECT_EQ(count(data::validation_counts(sixes, 0.01)), 1);
  EXPECT_EQ(count(data::validation_counts(sixes, 0.1)), 6);
  // 12 of 60: 1.2 each, the two left over to the lowest labels (equal remainders).
  EXPECT_EQ(data::validation_counts(sixes, 0.2),
            (std::vector<int64_t>{2, 2, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(count(data::validation_counts(sixes, 0.005)), 0) << "round(0.3) = 0";
  const auto labels = labels_with_counts(std::vector<int>(10, 6));
  EXPECT_EQ(data::stratified_split(labels, 10, 0.01, 42).validation.size(), 1u);
  // Each class keeps one for training; what a class cannot give, the others
  // give, as far as they can.
  EXPECT_EQ(data::validation_counts({1, 1, 1, 1, 4}, 0.5), (std::vector<int64_t>{0, 0, 0, 0, 3}));
  EXPECT_EQ(data::validation_counts({1, 9}, 0.5), (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(data::validation_counts({1, 1, 1}, 0.5), (std::vector<int64_t>{0, 0, 0}));
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
  // The split carries each class's size; each class holds out its
  // validation_counts() of them.
  ASSERT_EQ(split.class_sizes.size(), 5u);
  const std::vector<int64_t> counts = data::validation_counts(split.class_sizes, 0.3);
  for (int32_t c = 0; c < 5; ++c) {
    const auto at = static_cast<size_t>(c);
    EXPECT_EQ(split.class_sizes[at], std::count(d.labels.begin(), d.labels.end(), c));
    EXPECT_EQ(counts[at],
              std::count_if(split.validation.begin(), split.validation.end(),
                            [&](int64_t i) { return d.labels[static_cast<size_t>(i)] == c; }));
  }
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

// An in-memory training set with `counts[c]` samples of class c.
data::Dataset with_class_counts(const std::vector<int>& counts) {
  data::Dataset d;
  d.name = "x/train";
  d.source = "memory";
  d.channels = d.height = d.width = 1;
  d.num_classes = static_cast<int64_t>(counts.size());
  for (size_t c = 0; c < counts.size(); ++c) d.class_names.push_back(std::to_string(c));
  d.labels = labels_with_counts(counts);
  d.images.assign(d.labels.size(), 7);
  return d;
}

// keep_best and patience need validation samples: a split that comes out
// empty is an error with the fraction and the samples per class, not a run
// that silently never validates.
TEST(ValidationSplit, AnEmptySplitIsAnErrorWithTheNumbers) {
  app::TrainConfig c;
  c.val_fraction = 0.2;
  c.keep_best = true;
  c.origins["val_fraction"] = {"config file c.toml:4", true};
  std::vector<std::string> notes;
  data::Dataset ones = with_class_counts(std::vector<int>(10, 1));
  EXPECT_TRUE(testing::throws_input_error(
      [&] { app::take_validation(ones, c, notes); },
      {"config file c.toml:4: config key val_fraction = 0.2 holds out no validation sample: the "
       "10 training samples have at most 1 per class (10 classes), and each class keeps one for "
       "training (keep_best and patience need a validation split)"}));
  c.train_subset = 10;
  EXPECT_TRUE(testing::throws_input_error([&] { app::take_validation(ones, c, notes); },
                                          {"the 10 training samples (train_subset = 10) have"}));
  // Through the command: 0.01 of 40 samples rounds to none.
  ScratchDir dir;
  testing::write_mnist_dir(dir.file("data"), 40, 10);
  const auto r = run_lockstep(
      testing::mnist_train_args(dir.file("data"), dir.file("run"),
                                "--epochs 1 --progress none --val-fraction 0.01 --patience 2"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("flag --val-fraction: config key val_fraction = 0.01 holds out no "
                          "validation sample: round(0.01 x 40) is 0 for the 40 training samples; "
                          "raise val_fraction to at least 0.0125 or set it to 0 (keep_best and "
                          "patience need a validation split)"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("run"))) << r.output;
}

// When classes are too small to give their share, fewer are held out, and
// the run says so.
TEST(ValidationSplit, FewerHeldOutThanAskedIsNoted) {
  app::TrainConfig c;
  c.val_fraction = 0.5;
  std::vector<std::string> notes;
  data::Dataset train = with_class_counts({1, 1, 1, 1, 4});
  const data::Dataset val = app::take_validation(train, c, notes);
  EXPECT_EQ(val.size(), 3);
  EXPECT_EQ(train.size(), 5);
  EXPECT_EQ(notes, std::vector<std::string>{"note: val_fraction = 0.5 asks for 4 of the 8 training "
                                            "samples; 3 held out, as each class keeps one sample "
                                            "for training"});
  notes.clear();
  data::Dataset enough = with_class_counts({10, 10});
  EXPECT_EQ(app::take_validation(enough, c, notes).size(), 10);
  EXPECT_TRUE(notes.empty());
  c.val_fraction = 0;
  EXPECT_EQ(app::take_validation(enough, c, notes).size(), 0);
  EXPECT_EQ(enough.size(), 10);
}

TEST(ValidationSplit, BadSettingsNameTheKey) {
  auto r = run_lockstep("train --val-fraction 1.5 --progress none --run-dir /tmp/none");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("val_fraction"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1.5"), std::string::npos) << r.output;
  r = run_lockstep("train --val-fraction 1 --progress none --run-dir /tmp/none");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("config key val_fraction must be >= 0 and < 1, got 1"), std::string::npos)
      << r.output;
  r = run_lockstep("train --keep-best --progress none --run-dir /tmp/none");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("keep_best and patience need a validation split"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace lockstep
