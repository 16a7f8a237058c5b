// Log-softmax and the losses (NLL, softmax cross-entropy, with label
// smoothing as PyTorch's CrossEntropyLoss) of the CPU backend against
// references written here. Element-wise ops: test_elementwise.cpp;
// dropout: test_dropout.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "nn/backend.h"
#include "nn/model_zoo.h"
#include "nn/tensor.h"
#include "support/backend_checks.h"
#include "support/cpu_backend.h"

namespace lockstep::nn {
namespace {

using testing::random_tensor;

// --- log-softmax and losses ------------------------------------------------------

TEST(CpuSoftmax, LogSoftmaxForwardBackwardMatchReference) {
  auto backend = testing::test_cpu_backend(2);
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
  auto backend = testing::test_cpu_backend(1);
  const float x[3] = {1000.0f, 0.0f, -1000.0f};
  float y[3];
  backend->log_softmax_forward(1, 3, x, y);
  EXPECT_FLOAT_EQ(y[0], 0.0f);
  EXPECT_FLOAT_EQ(y[1], -1000.0f);
  EXPECT_FLOAT_EQ(y[2], -2000.0f);
}

TEST(CpuLoss, NllLossValuesCountsAndGradient) {
  auto backend = testing::test_cpu_backend(2);
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
  auto backend = testing::test_cpu_backend(1);
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
  auto backend = testing::test_cpu_backend(2);
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

// --- label smoothing -------------------------------------------------------------

TEST(LabelSmoothing, LossAndGradientFollowPyTorch) {
  auto backend = make_cpu_backend(1);
  const float logits[] = {1.0f, 2.0f, 3.0f};
  const int32_t label[] = {0};
  float d[3];
  const LossStats s = backend->softmax_cross_entropy(1, 3, logits, label, 2.0f, d, 0.1f);
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  // (1 - e) * (-logp[0]) + e * mean_j(-logp[j])
  const double want = 0.9 * (lse - 1.0) + 0.1 * ((lse - 1) + (lse - 2) + (lse - 3)) / 3.0;
  EXPECT_NEAR(s.loss_sum, want, 1e-5);
  for (int j = 0; j < 3; ++j) {
    const double target = (j == 0 ? 0.9 : 0.0) + 0.1 / 3.0;
    EXPECT_NEAR(d[j], 2.0 * (std::exp(logits[j] - lse) - target), 1e-6) << j;
  }
}

TEST(LabelSmoothing, NeedsTheCrossEntropyLoss) {
  auto model = build_model("mnist_net", {}, {1, 28, 28}, 10);
  EXPECT_THROW(model->set_label_smoothing(0.1f), InputError);
  auto resnet = build_model("resnet20", {}, {1, 28, 28}, 10);
  EXPECT_THROW(resnet->set_label_smoothing(1.0f), InputError);
  EXPECT_NO_THROW(resnet->set_label_smoothing(0.1f));
}

}  // namespace
}  // namespace lockstep::nn
