// Every layer's backward against central differences (the one gradient
// checker), plus shapes and initialisation. Conv2d: test_conv2d.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <ostream>
#include <random>

#include "common/error.h"
#include "nn/layers/activations.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/dropout.h"
#include "nn/layers/linear.h"
#include "nn/layers/pool2d.h"
#include "support/backend_checks.h"
#include "support/cpu_backend.h"
#include "support/gradient_check.h"

namespace lockstep::nn {
namespace {

using testing::check_layer_gradients;
using testing::fill_random;
using testing::GradCheckOptions;

TEST(LayerLinear, GradientAndShape) {
  Linear fc(7, 5);
  fc.set_name("fc");
  fc.reset_parameters(5, Device::kCpu);
  EXPECT_EQ(fc.output_shape({4, 7}), (Shape{4, 5}));
  EXPECT_THROW(fc.output_shape({4, 6}), InputError);
  Tensor x({4, 7});
  fill_random(x, 2);
  check_layer_gradients(fc, x, {});
}

// Distinct values spaced further apart than the finite-difference step, so no
// window has a near-tie and max-pooling is differentiable everywhere tested.
Tensor spaced_values(const Shape& shape, uint64_t seed) {
  Tensor x(shape);
  std::vector<float> v(static_cast<size_t>(x.numel()));
  std::iota(v.begin(), v.end(), 0.0f);
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = v[static_cast<size_t>(i)] * 0.05f - 1.0f;
  return x;
}

TEST(LayerMaxPool, GradientOnOddSizesAndStride) {
  for (auto [k, s] : {std::pair<int64_t, int64_t>{2, 2}, {3, 2}, {2, 1}}) {
    MaxPool2d pool(k, s);
    Tensor x = spaced_values({2, 3, 7, 5}, 4);
    check_layer_gradients(pool, x, {}, {.step = 1e-3f});
  }
  EXPECT_EQ(MaxPool2d(2).output_shape({1, 1, 7, 5}), (Shape{1, 1, 3, 2}));
}

TEST(LayerRelu, GradientSkippingTheKink) {
  ReLU relu;
  Tensor x({3, 17});
  fill_random(x, 8);
  check_layer_gradients(relu, x, {}, {.kink = 0.0f, .kink_range = 0.02f});
}

TEST(LayerLogSoftmax, GradientAndRowsSumToOne) {
  LogSoftmax ls;
  Tensor x({4, 6});
  fill_random(x, 9, -3.0f, 3.0f);
  check_layer_gradients(ls, x, {});
  auto backend = testing::test_cpu_backend(1);
  Tensor y(x.shape());
  ls.forward(*backend, x, y, {});
  for (int64_t r = 0; r < 4; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < 6; ++c) sum += std::exp(y.data()[r * 6 + c]);
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST(LayerFlatten, GradientAndShape) {
  Flatten f;
  EXPECT_EQ(f.output_shape({2, 3, 4, 5}), (Shape{2, 60}));
  Tensor x({2, 3, 2, 2});
  fill_random(x, 1);
  check_layer_gradients(f, x, {});
}

TEST(LayerDropout, TrainingGradientUsesTheSameMask) {
  for (bool channelwise : {false, true}) {
    Dropout d(0.4f, channelwise);
    d.set_index(3);
    Tensor x({3, 4, 3, 3});
    fill_random(x, 5);
    const int64_t ids[] = {17, 4, 99};
    ForwardContext ctx{.training = true, .seed = 42, .epoch = 1, .sample_ids = ids};
    check_layer_gradients(d, x, ctx);
  }
}

TEST(LayerDropout, InferenceIsIdentityAndTrainingDropsAboutP) {
  auto backend = testing::test_cpu_backend(1);
  Dropout d(0.25f, false);
  Tensor x({64, 500});
  for (float& v : x.span()) v = 1.0f;
  Tensor y(x.shape());
  d.forward(*backend, x, y, {});
  EXPECT_TRUE(std::equal(x.span().begin(), x.span().end(), y.span().begin()));
  std::vector<int64_t> ids(64);
  std::iota(ids.begin(), ids.end(), 0);
  d.forward(*backend, x, y, {.training = true, .seed = 1, .epoch = 0, .sample_ids = ids.data()});
  const auto zeros = std::count(y.span().begin(), y.span().end(), 0.0f);
  EXPECT_NEAR(static_cast<double>(zeros) / static_cast<double>(y.numel()), 0.25, 0.01);
  for (float v : y.span()) EXPECT_TRUE(v == 0.0f || std::fabs(v - 1.0f / 0.75f) < 1e-6f);
}

TEST(LayerDropout, ChannelwiseDropsWholePlanes) {
  auto backend = testing::test_cpu_backend(1);
  Dropout d(0.5f, true);
  Tensor x({8, 6, 4, 4});
  for (float& v : x.span()) v = 1.0f;
  Tensor y(x.shape());
  std::vector<int64_t> ids(8);
  std::iota(ids.begin(), ids.end(), 100);
  d.forward(*backend, x, y, {.training = true, .seed = 7, .epoch = 2, .sample_ids = ids.data()});
  int dropped = 0;
  for (int64_t plane = 0; plane < 8 * 6; ++plane) {
    const float* p = y.data() + plane * 16;
    EXPECT_TRUE(std::all_of(p, p + 16, [&](float v) { return v == p[0]; })) << "plane " << plane;
    dropped += p[0] == 0.0f;
  }
  EXPECT_GT(dropped, 5);
  EXPECT_LT(dropped, 43);
}

// PyTorch's default for conv and linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
// for weights and biases alike.
TEST(LayerInit, UniformWithPyTorchBound) {
  Conv2d conv(10, 20, 5);
  conv.set_name("conv2");
  conv.reset_parameters(42, Device::kCpu);
  const float bound = 1.0f / std::sqrt(250.0f);
  const Tensor& w = conv.parameters()[0]->value;
  double sum = 0, sq = 0;
  for (float v : w.span()) {
    EXPECT_LE(std::fabs(v), bound);
    sum += v;
    sq += double(v) * v;
  }
  const double n = static_cast<double>(w.numel());
  EXPECT_NEAR(sum / n, 0.0, 0.05 * bound);
  EXPECT_NEAR(sq / n, bound * bound / 3.0, 0.1 * bound * bound / 3.0);
  // Same seed, same name: same values; another seed: different values.
  Conv2d again(10, 20, 5);
  again.set_name("conv2");
  again.reset_parameters(42, Device::kCpu);
  EXPECT_TRUE(
      std::equal(w.span().begin(), w.span().end(), again.parameters()[0]->value.span().begin()));
  again.reset_parameters(43, Device::kCpu);
  EXPECT_FALSE(
      std::equal(w.span().begin(), w.span().end(), again.parameters()[0]->value.span().begin()));
  EXPECT_EQ(conv.parameters()[1]->name, "conv2.bias");
}

}  // namespace
}  // namespace lockstep::nn
