// Subsets of image folders keep every class in proportion, deterministically.
#include <gtest/gtest.h>

#include <map>

#include "app/config/data_setup.h"
#include "data/subset.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::run_lockstep;
using testing::ScratchDir;

// Classes in storage order (as an image folder loads them): 0 x50, 1 x30,
// 2 x20; each image's one pixel is its index.
data::Dataset class_ordered() {
  data::Dataset d;
  d.channels = d.height = d.width = 1;
  d.num_classes = 3;
  d.class_names = {"a", "b", "c"};
  for (int i = 0; i < 100; ++i) {
    d.labels.push_back(i < 50 ? 0 : i < 80 ? 1 : 2);
    d.images.push_back(static_cast<uint8_t>(i));
  }
  return d;
}

TEST(Subset, StratifiedSubsetKeepsClassProportions) {
  const data::Dataset d = class_ordered();
  const data::Dataset s = data::stratified_subset(d, 10);
  ASSERT_EQ(s.size(), 10);
  std::map<int32_t, int> per_class;
  for (int32_t label : s.labels) ++per_class[label];
  EXPECT_EQ(per_class, (std::map<int32_t, int>{{0, 5}, {1, 3}, {2, 2}}));
  // Spread over each class, in storage order, pixels following their labels.
  EXPECT_EQ(s.images, (std::vector<uint8_t>{0, 10, 20, 30, 40, 50, 60, 70, 80, 90}));
  EXPECT_EQ(s.class_names, d.class_names);
  EXPECT_NO_THROW(s.validate());
}

TEST(Subset, RoundingGoesToTheLargestRemaindersAndIsDeterministic) {
  const data::Dataset d = class_ordered();
  for (int64_t n : {1, 2, 7, 33, 99}) {
    const data::Dataset a = data::stratified_subset(d, n), b = data::stratified_subset(d, n);
    EXPECT_EQ(a.size(), n);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_EQ(a.images, b.images);
  }
  std::map<int32_t, int> per_class;
  for (int32_t label : data::stratified_subset(d, 7).labels) ++per_class[label];
  EXPECT_EQ(per_class, (std::map<int32_t, int>{{0, 4}, {1, 2}, {2, 1}}));  // 3.5, 2.1, 1.4
  EXPECT_EQ(data::stratified_subset(d, 0).size(), 100);
  EXPECT_EQ(data::stratified_subset(d, 500).size(), 100);
}

// train_subset and test_subset above the samples there are: an error naming
// the key, where it was set, the value and the samples available, instead
// of silently taking them all.
TEST(Subset, MoreThanTheDataHoldsIsAnError) {
  app::TrainConfig c;
  c.dataset = "folder";
  c.train_subset = 101;
  c.origins["train_subset"] = {"config file c.toml:3", true};
  data::Dataset d = class_ordered();
  d.name = "folder/train";
  d.source = "data/train";
  EXPECT_TRUE(testing::throws_input_error(
      [&] { app::take_subset(d, c, true); },
      {"config file c.toml:3: config key train_subset = 101 is more than the 100 samples of "
       "folder/train in data/train (0 takes them all)"}));
  c.train_subset = 100;
  EXPECT_EQ(app::take_subset(d, c, true).size(), 100);
  c.train_subset = 10;
  EXPECT_EQ(app::take_subset(d, c, true).labels, data::stratified_subset(d, 10).labels);
  c.test_subset = 1000;
  EXPECT_TRUE(testing::throws_input_error([&] { app::take_subset(d, c, false); },
                                          {"config key test_subset = 1000 is more than the 100"}));
  // Through the command, with a flag.
  ScratchDir dir;
  testing::write_mnist_dir(dir.file("data"), 50, 20);
  const auto r = run_lockstep(
      testing::mnist_train_args(dir.file("data"), dir.file("run"), "--epochs 1 --train-subset 64"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("flag --train-subset: config key train_subset = 64 is more than the 50 "
                          "samples of mnist/train in " +
                          dir.file("data")),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace lockstep
