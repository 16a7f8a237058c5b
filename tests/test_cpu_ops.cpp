// The CPU backend's element-wise ops, dropout, log-softmax and losses
// against references written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "nn/backend.h"
#include "nn/counter_rng.h"
#include "nn/error.h"
#include "nn/tensor.h"
#include "support/backend_checks.h"

namespace lockstep::nn {
namespace {

using testing::bitwise_equal;
using testing::dropout_geometry;
using testing::random_tensor;

// --- relu and small vector helpers -----------------------------------------

TEST(CpuElementwise, ReluForwardBackwardAndInPlace) {
  auto backend = make_cpu_backend(2);
  const int64_t n = 100003;  // several chunks and a ragged end
  const Tensor x = random_tensor({n}, 1);
  const Tensor dy = random_tensor({n}, 2);
  Tensor y({n}), dx({n});
  backend->relu_forward(n, x.data(), y.data());
  backend->relu_backward(n, y.data(), dy.data(), dx.data());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y.data()[i], x.data()[i] > 0 ? x.data()[i] : 0.0f) << i;
    ASSERT_EQ(dx.data()[i], x.data()[i] > 0 ? dy.data()[i] : 0.0f) << i;
  }
  Tensor inplace = x.clone();
  backend->relu_forward(n, inplace.data(), inplace.data());
  EXPECT_TRUE(bitwise_equal(inplace, y));
  Tensor grad = dy.clone();
  backend->relu_backward(n, y.data(), grad.data(), grad.data());
  EXPECT_TRUE(bitwise_equal(grad, dx));
}

TEST(CpuElementwise, FillScaleAxpyCopy) {
  auto backend = make_cpu_backend(2);
  const int64_t n = 70001;
  const Tensor x = random_tensor({n}, 3);
  Tensor y = random_tensor({n}, 4);
  const Tensor y0 = y.clone();
  backend->axpy(n, 0.5f, x.data(), y.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(y.data()[i], y0.data()[i] + 0.5f * x.data()[i]);
  backend->scale(n, -2.0f, y.data());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_FLOAT_EQ(y.data()[i], -2.0f * (y0.data()[i] + 0.5f * x.data()[i]));
  }
  backend->copy(n, x.data(), y.data());
  EXPECT_TRUE(bitwise_equal(x, y));
  backend->fill(n, 1.25f, y.data());
  for (float v : y.span()) ASSERT_EQ(v, 1.25f);
}

TEST(CpuElementwise, RowBiasAndColumnSums) {
  auto backend = make_cpu_backend(2);
  const int64_t rows = 300, cols = 130;
  const Tensor bias = random_tensor({cols}, 5);
  const Tensor dy = random_tensor({rows, cols}, 6);
  Tensor y = dy.clone();
  backend->add_row_bias(rows, cols, bias.data(), y.data());
  Tensor db({cols});
  backend->sum_rows(rows, cols, dy.data(), db.data());
  for (int64_t j = 0; j < cols; ++j) {
    double sum = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(y.data()[r * cols + j], dy.data()[r * cols + j] + bias.data()[j]);
      sum += dy.data()[r * cols + j];
    }
    EXPECT_NEAR(db.data()[j], sum, 1e-4) << "column " << j;
  }
}

// --- dropout -----------------------------------------------------------------

TEST(CpuDropout, MaskFollowsTheCounterGeneratorAndBroadcastsOverChannels) {
  auto backend = make_cpu_backend(2);
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
  auto backend = make_cpu_backend(2);
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
  auto backend = make_cpu_backend(2);
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
  auto backend = make_cpu_backend(1);
  const DropoutGeometry g = dropout_geometry(2, 3, 1, 1.0f, 0);
  const std::vector<int64_t> ids = {0, 1};
  const float x[6] = {1, 2, 3, 4, 5, 6};
  float y[6], mask[6];
  backend->dropout_forward(g, ids.data(), x, y, mask);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], 0.0f);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(mask[i], 0.0f);
}

// --- log-softmax and losses ------------------------------------------------------

TEST(CpuSoftmax, LogSoftmaxForwardBackwardMatchReference) {
  auto backend = make_cpu_backend(2);
  const int64_t rows = 37, cols = 11;
  const Tensor x = random_tensor({rows, cols}, 9, -20.0f, 20.0f);
  const Tensor dy = random_tensor({rows, cols}, 10);
  Tensor y(x.shape()), dx(x.shape());
  backend->log_softmax_forward(rows, cols, x.data(), y.data());
  backend->log_softmax_backward(rows, cols, y.data(), dy.data(), dx.data());
  for (int64_t i = 0; i < rows; ++i) {
    double top = -1e300, sum = 0.0, dsum = 0.0;
    for (int64_t j = 0; j < cols; ++j) top = std::max(top, double{x.data()[i * cols + j]});
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(x.data()[i * cols + j] - top);
    for (int64_t j = 0; j < cols; ++j) dsum += dy.data()[i * cols + j];
    for (int64_t j = 0; j < cols; ++j) {
      const double ly = x.data()[i * cols + j] - top - std::log(sum);
      EXPECT_NEAR(y.data()[i * cols + j], ly, 1e-5 * (1 + std::abs(ly)));
      EXPECT_NEAR(dx.data()[i * cols + j], dy.data()[i * cols + j] - std::exp(ly) * dsum, 1e-5);
    }
  }
}

TEST(CpuSoftmax, LogSoftmaxIsStableForHugeLogits) {
  auto backend = make_cpu_backend(1);
  const float x[3] = {1000.0f, 0.0f, -1000.0f};
  float y[3];
  backend->log_softmax_forward(1, 3, x, y);
  EXPECT_FLOAT_EQ(y[0], 0.0f);
  EXPECT_FLOAT_EQ(y[1], -1000.0f);
  EXPECT_FLOAT_EQ(y[2], -2000.0f);
}

TEST(CpuLoss, NllLossValuesCountsAndGradient) {
  auto backend = make_cpu_backend(2);
  // Row 0: argmax 1 (label 1, correct); row 1: tie between 0 and 2, first
  // wins (label 2: wrong); row 2: label 0, argmax 2.
  const float logp[9] = {-2.0f, -0.5f, -3.0f, -1.0f, -4.0f, -1.0f, -2.5f, -3.5f, -0.25f};
  const int32_t labels[3] = {1, 2, 0};
  float dlogp[9];
  std::fill(dlogp, dlogp + 9, std::numeric_limits<float>::quiet_NaN());
  const LossStats s = backend->nll_loss(3, 3, logp, labels, 0.5f, dlogp);
  EXPECT_DOUBLE_EQ(s.loss_sum, 0.5 + 1.0 + 2.5);
  EXPECT_EQ(s.correct, 1);
  EXPECT_EQ(s.count, 3);
  const float want[9] = {0, -0.5f, 0, 0, 0, -0.5f, -0.5f, 0, 0};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(dlogp[i], want[i]) << i;
  // No gradient requested.
  EXPECT_DOUBLE_EQ(backend->nll_loss(3, 3, logp, labels, 1.0f, nullptr).loss_sum, 4.0);
}

TEST(CpuLoss, LabelOutsideTheClassesIsAnInputErrorNamingRowAndLabel) {
  auto backend = make_cpu_backend(1);
  const float logp[6] = {0, 0, 0, 0, 0, 0};
  const int32_t labels[2] = {1, 10};
  for (int op = 0; op < 2; ++op) {
    try {
      if (op == 0) backend->nll_loss(2, 3, logp, labels, 1.0f, nullptr);
      if (op == 1) backend->softmax_cross_entropy(2, 3, logp, labels, 1.0f, nullptr, 0.0f);
      ADD_FAILURE() << "no InputError for label 10 of 3 classes";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("row 1"), std::string::npos) << what;
      EXPECT_NE(what.find("label 10"), std::string::npos) << what;
    }
  }
  const int32_t negative[2] = {-1, 0};
  EXPECT_THROW(backend->nll_loss(2, 3, logp, negative, 1.0f, nullptr), InputError);
}

TEST(CpuLoss, SoftmaxCrossEntropyMatchesReferenceAndIsStable) {
  auto backend = make_cpu_backend(2);
  const int64_t rows = 20, cols = 7;
  Tensor logits = random_tensor({rows, cols}, 11, -5.0f, 5.0f);
  logits.data()[0] = 1000.0f;  // row 0: huge logits stay finite
  logits.data()[1] = -1000.0f;
  std::vector<int32_t> labels(rows);
  for (int64_t i = 0; i < rows; ++i) labels[i] = static_cast<int32_t>((i * 3) % cols);
  Tensor d(logits.shape());
  const float scale = 1.0f / rows;
  const LossStats s = backend->softmax_cross_entropy(rows, cols, logits.data(), labels.data(),
                                                     scale, d.data(), 0.0f);
  double loss = 0.0;
  int64_t correct = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const float* x = logits.data() + i * cols;
    const double top = *std::max_element(x, x + cols);
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(x[j] - top);
    const double lse = top + std::log(sum);
    loss += lse - x[labels[i]];
    correct += std::max_element(x, x + cols) - x == labels[i];
    for (int64_t j = 0; j < cols; ++j) {
      const double want = scale * (std::exp(x[j] - lse) - (j == labels[i] ? 1.0 : 0.0));
      EXPECT_NEAR(d.data()[i * cols + j], want, 1e-6) << i << "," << j;
    }
  }
  EXPECT_TRUE(std::isfinite(s.loss_sum));
  EXPECT_NEAR(s.loss_sum, loss, 1e-4 * (1 + loss));
  EXPECT_EQ(s.correct, correct);
  EXPECT_EQ(s.count, rows);
}

TEST(CpuBackend, NameSaysCpuAndThreadCount) {
  EXPECT_EQ(make_cpu_backend(2)->name(), "cpu (2 threads)");
  EXPECT_EQ(make_cpu_backend(1)->name(), "cpu (1 thread)");
  EXPECT_EQ(make_cpu_backend(1)->device(), Device::kCpu);
  EXPECT_EQ(make_cpu_backend(0)->name().rfind("cpu (", 0), 0u);
}

}  // namespace
}  // namespace lockstep::nn
