// The CPU backend's dropout: the counter-based mask, the kept fraction, the
// same mask for a sample wherever it lands. The layer's gradient:
// test_layers.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "nn/backend.h"
#include "nn/counter_rng.h"
#include "nn/tensor.h"
#include "support/backend_checks.h"
#include "support/cpu_backend.h"

namespace lockstep::nn {
namespace {

using testing::bitwise_equal;
using testing::dropout_geometry;
using testing::random_tensor;

// --- dropout -----------------------------------------------------------------

TEST(CpuDropout, MaskFollowsTheCounterGeneratorAndBroadcastsOverChannels) {
  auto backend = testing::test_cpu_backend(2);
  const DropoutGeometry g = dropout_geometry(5, 7, 6, 0.4f, 3);
  const std::vector<int64_t> ids = {10, 3, 999, 0, 123456789};
  const Tensor x = random_tensor({g.batch, g.channels, g.spatial}, 7);
  const Tensor dy = random_tensor({g.batch, g.channels, g.spatial}, 8);
  Tensor y(x.shape()), mask({g.batch, g.channels}), dx(x.shape());
  backend->dropout_forward(g, ids.data(), x.data(), y.data(), mask.data());
  backend->dropout_backward(g, mask.data(), dy.data(), dx.data());
  const float keep = 1.0f / (1.0f - g.p);
  const uint64_t key = hash_combine(g.seed, g.stream);
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t c = 0; c < g.channels; ++c) {
      const uint64_t counter = static_cast<uint64_t>(ids[n]) * g.channels + c;
      const float want = counter_uniform(key, counter) >= g.p ? keep : 0.0f;
      const float m = mask.data()[n * g.channels + c];
      ASSERT_EQ(m, want) << "n " << n << " c " << c;
      for (int64_t s = 0; s < g.spatial; ++s) {
        const int64_t i = (n * g.channels + c) * g.spatial + s;
        ASSERT_EQ(y.data()[i], x.data()[i] * m);
        ASSERT_EQ(dx.data()[i], dy.data()[i] * m);
      }
    }
  }
}

TEST(CpuDropout, KeptFractionIsOneMinusPAndValuesAreZeroOrScaled) {
  auto backend = testing::test_cpu_backend(2);
  const DropoutGeometry g = dropout_geometry(1000, 100, 1, 0.3f, 1);
  std::vector<int64_t> ids(g.batch);
  for (int64_t i = 0; i < g.batch; ++i) ids[i] = 7 * i + 1;
  Tensor x({g.batch, g.channels}), y(x.shape()), mask(x.shape());
  backend->fill(x.numel(), 1.0f, x.data());
  backend->dropout_forward(g, ids.data(), x.data(), y.data(), mask.data());
  int64_t kept = 0;
  for (float m : mask.span()) {
    ASSERT_TRUE(m == 0.0f || m == 1.0f / (1.0f - 0.3f)) << m;
    kept += m != 0.0f;
  }
  // 100000 Bernoulli(0.7) draws: standard deviation 0.0014.
  EXPECT_NEAR(static_cast<double>(kept) / mask.numel(), 0.7, 0.01);
}

TEST(CpuDropout, SameSampleGetsTheSameMaskAtAnyBatchPosition) {
  auto backend = testing::test_cpu_backend(2);
  const DropoutGeometry g = dropout_geometry(3, 64, 4, 0.5f, 9);
  const std::vector<int64_t> first = {5, 9, 2}, second = {2, 7, 5};
  Tensor x({3, 64, 4}), y(x.shape()), m1({3, 64}), m2({3, 64});
  backend->fill(x.numel(), 1.0f, x.data());
  backend->dropout_forward(g, first.data(), x.data(), y.data(), m1.data());
  backend->dropout_forward(g, second.data(), x.data(), y.data(), m2.data());
  for (int64_t c = 0; c < 64; ++c) {
    EXPECT_EQ(m1.data()[0 * 64 + c], m2.data()[2 * 64 + c]) << "sample 5, channel " << c;
    EXPECT_EQ(m1.data()[2 * 64 + c], m2.data()[0 * 64 + c]) << "sample 2, channel " << c;
  }
  // Another stream (layer or epoch) draws another mask.
  Tensor m3({3, 64});
  backend->dropout_forward(dropout_geometry(3, 64, 4, 0.5f, 10), first.data(), x.data(), y.data(),
                           m3.data());
  EXPECT_FALSE(bitwise_equal(m1, m3));
}

TEST(CpuDropout, ProbabilityOneDropsEverything) {
  auto backend = testing::test_cpu_backend(1);
  const DropoutGeometry g = dropout_geometry(2, 3, 1, 1.0f, 0);
  const std::vector<int64_t> ids = {0, 1};
  const float x[6] = {1, 2, 3, 4, 5, 6};
  float y[6], mask[6];
  backend->dropout_forward(g, ids.data(), x, y, mask);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], 0.0f);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(mask[i], 0.0f);
}

}  // namespace
}  // namespace lockstep::nn
