// Subsets of image folders keep every class in proportion, deterministically.
#include <gtest/gtest.h>

#include <map>

#include "data/subset.h"

namespace lockstep {
namespace {

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

}  // namespace
}  // namespace lockstep
