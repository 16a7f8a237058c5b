#include <gtest/gtest.h>

#include "nn/error.h"
#include "nn/tensor.h"

namespace lockstep::nn {
namespace {

TEST(Tensor, StartsZeroWithShape) {
  Tensor t({2, 3, 4, 5});
  EXPECT_EQ(t.numel(), 120);
  EXPECT_EQ(t.ndim(), 4u);
  EXPECT_EQ(shape_string(t.shape()), "(2, 3, 4, 5)");
  for (float v : t.span()) EXPECT_EQ(v, 0.0f);
}

TEST(Tensor, CloneIsDeepAndResizeKeepsCapacity) {
  Tensor t({4});
  t.data()[2] = 5.0f;
  Tensor c = t.clone();
  t.data()[2] = 1.0f;
  EXPECT_EQ(c.data()[2], 5.0f);
  const float* before = t.data();
  t.resize({3});
  EXPECT_EQ(t.data(), before);
  EXPECT_EQ(t.numel(), 3);
  t.resize({8});
  EXPECT_EQ(t.numel(), 8);
}

TEST(Tensor, ReshapeRefusesOtherElementCounts) {
  Tensor t({2, 6});
  t.reshape({3, 4});
  EXPECT_EQ(t.dim(0), 3);
  EXPECT_THROW(t.reshape({5}), Error);
}

}  // namespace
}  // namespace lockstep::nn
