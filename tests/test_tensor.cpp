#include <gtest/gtest.h>

#include <vector>

#include "common/error.h"
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

TEST(Tensor, ViewSharesMemoryItDoesNotOwn) {
  std::vector<float> memory(10, 0.0f);
  {
    Tensor v = Tensor::view(memory.data() + 4, {2, 3}, Device::kCpu);
    EXPECT_TRUE(v.is_view());
    EXPECT_EQ(v.data(), memory.data() + 4);
    EXPECT_EQ(shape_string(v.shape()), "(2, 3)");
    v.data()[5] = 7.0f;
    Tensor c = v.clone();
    EXPECT_FALSE(c.is_view());
    EXPECT_NE(c.data(), v.data());
    EXPECT_EQ(c.data()[5], 7.0f);
    v.resize({4});  // fits: still the view
    EXPECT_EQ(v.data(), memory.data() + 4);
    v.resize({7});  // does not fit: its own memory
    EXPECT_FALSE(v.is_view());
    EXPECT_NE(v.data(), memory.data() + 4);
    Tensor moved = Tensor::view(memory.data(), {3}, Device::kCpu);
    Tensor target({5});
    target = std::move(moved);  // frees target's memory, never the view's
    EXPECT_TRUE(target.is_view());
  }  // the views are gone; the vector's memory was not freed by them
  EXPECT_EQ(memory[9], 7.0f);
  EXPECT_FALSE(Tensor({2}).is_view());
}

TEST(Tensor, UnallocatedHasAShapeAndNoMemoryUntilItGrows) {
  Tensor t = Tensor::unallocated({4, 16, 8, 8}, Device::kCpu);
  EXPECT_FALSE(t.allocated());
  EXPECT_EQ(t.data(), nullptr);
  EXPECT_EQ(t.numel(), 4 * 16 * 8 * 8);
  EXPECT_EQ(shape_string(t.shape()), "(4, 16, 8, 8)");
  t.resize({3, 16, 8, 8});  // fits: still none
  EXPECT_FALSE(t.allocated());
  EXPECT_EQ(t.numel(), 3 * 16 * 8 * 8);
  t.resize({5, 16, 8, 8});  // does not fit: its own, zeroed
  ASSERT_TRUE(t.allocated());
  EXPECT_FALSE(t.is_view());
  EXPECT_EQ(t.data()[5 * 16 * 8 * 8 - 1], 0.0f);
  EXPECT_TRUE(Tensor({0}).allocated());  // nothing to hold
  EXPECT_TRUE(Tensor({2}).allocated());
}

}  // namespace
}  // namespace lockstep::nn
