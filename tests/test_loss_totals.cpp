// nn/loss_totals.h and the accumulating losses (Backend::nll_loss_accumulate,
// softmax_cross_entropy_accumulate): the totals are the sums the returning
// losses give, added batch by batch in the same order (so the trainer's
// numbers keep their bits); a bad label or a non-finite loss is recorded
// with its batch instead of thrown; app/run/training_guard.h turns the
// record into the error, naming epoch and step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "app/run/training_guard.h"
#include "nn/backend.h"
#include "nn/loss_totals.h"
#include "support/backend_checks.h"
#include "support/cpu_backend.h"
#include "support/dataset_files.h"

namespace lockstep::nn {
namespace {

using testing::random_tensor;
using testing::throws_input_error;

std::vector<int32_t> labels_of(int64_t rows, int64_t cols) {
  std::vector<int32_t> labels;
  for (int64_t i = 0; i < rows; ++i) labels.push_back(static_cast<int32_t>((i * 3) % cols));
  return labels;
}

TEST(LossTotals, AccumulatedLossesAreTheReturnedStatsAddedInOrder) {
  const int64_t rows = 9, cols = 5;
  auto backend = testing::test_cpu_backend(2);
  for (const bool nll : {true, false}) {
    SCOPED_TRACE(nll ? "nll" : "cross-entropy");
    LossTotals totals;
    double loss = 0.0, correct = 0.0, count = 0.0;
    const std::vector<int32_t> labels = labels_of(rows, cols);
    for (uint64_t batch = 0; batch < 4; ++batch) {
      const Tensor x = random_tensor({rows, cols}, 10 + batch);
      Tensor d1({rows, cols}), d2({rows, cols});
      const LossStats s =
          nll ? backend->nll_loss(rows, cols, x.data(), labels.data(), 0.25f, d1.data())
              : backend->softmax_cross_entropy(rows, cols, x.data(), labels.data(), 0.25f,
                                               d1.data(), 0.1f);
      if (nll) {
        backend->nll_loss_accumulate(rows, cols, x.data(), labels.data(), 0.25f, d2.data(),
                                     &totals);
      } else {
        backend->softmax_cross_entropy_accumulate(rows, cols, x.data(), labels.data(), 0.25f,
                                                  d2.data(), 0.1f, &totals);
      }
      loss += s.loss_sum;
      correct += static_cast<double>(s.correct);
      count += static_cast<double>(s.count);
      EXPECT_EQ(std::vector<float>(d1.span().begin(), d1.span().end()),
                std::vector<float>(d2.span().begin(), d2.span().end()));
    }
    EXPECT_EQ(totals.loss_sum, loss);  // the same doubles, bit for bit
    EXPECT_EQ(totals.correct, correct);
    EXPECT_EQ(totals.count, count);
    EXPECT_EQ(totals.batches, 4.0);
    EXPECT_EQ(totals.first_non_finite, 0.0);
    EXPECT_EQ(totals.bad_labels, 0.0);
  }
}

TEST(LossTotals, BadLabelsAreCountedWithTheirBatchAndGetNoGradient) {
  const int64_t rows = 4, cols = 3;
  auto backend = testing::test_cpu_backend(1);
  const Tensor x = random_tensor({rows, cols}, 3);
  for (const bool nll : {true, false}) {
    LossTotals totals;
    double expected = 0.0;  // the good rows' losses, each computed alone, in row order
    for (int batch = 0; batch < 3; ++batch) {
      std::vector<int32_t> labels = {0, 1, 2, 1};
      if (batch == 1) labels[1] = -1, labels[3] = 3;
      double batch_sum = 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        if (labels[r] < 0 || labels[r] >= cols) continue;
        const float* row = x.data() + r * cols;
        batch_sum +=
            nll ? backend->nll_loss(1, cols, row, &labels[r], 0.0f, nullptr).loss_sum
                : backend->softmax_cross_entropy(1, cols, row, &labels[r], 0.0f, nullptr, 0.0f)
                      .loss_sum;
      }
      expected += batch_sum;
      Tensor d({rows, cols});
      if (nll) {
        backend->nll_loss_accumulate(rows, cols, x.data(), labels.data(), 1.0f, d.data(), &totals);
      } else {
        backend->softmax_cross_entropy_accumulate(rows, cols, x.data(), labels.data(), 1.0f,
                                                  d.data(), 0.0f, &totals);
      }
      if (batch != 1) continue;
      for (int64_t j = 0; j < cols; ++j) {
        EXPECT_EQ(d.data()[1 * cols + j], 0.0f) << j;
        EXPECT_EQ(d.data()[3 * cols + j], 0.0f) << j;
      }
      EXPECT_NE(d.data()[0], 0.0f);
    }
    EXPECT_EQ(totals.bad_labels, 2.0);
    EXPECT_EQ(totals.first_bad_label, 2.0);
    EXPECT_EQ(totals.count, 3.0 * rows - 2.0);
    EXPECT_EQ(totals.loss_sum, expected);
  }
}

TEST(LossTotals, TheFirstNonFiniteBatchIsRecordedWithItsLoss) {
  LossTotals t;
  add_batch_loss(1.5, 1, 2, 0, t);
  add_batch_loss(std::numeric_limits<double>::infinity(), 0, 2, 0, t);
  add_batch_loss(std::nan(""), 0, 2, 0, t);
  EXPECT_EQ(t.batches, 3.0);
  EXPECT_EQ(t.first_non_finite, 2.0);
  EXPECT_EQ(t.non_finite_loss, std::numeric_limits<double>::infinity());
  EXPECT_EQ(t.count, 6.0);
}

TEST(LossTotals, TheErrorsNameEpochStepAndLearningRate) {
  const auto lr_at = [](int64_t step) { return 0.5 + static_cast<double>(step); };
  LossTotals t;
  for (int b = 0; b < 6; ++b) add_batch_loss(b == 3 ? std::nan("") : 1.0, 0, 1, 0, t);
  // Batch 4 with 2 passes a step is the epoch's second step: run step 10 + 2.
  EXPECT_TRUE(throws_input_error([&] { app::check_loss_totals(t, 2, 10, 2, lr_at); },
                                 {"training diverged: the loss is NaN in epoch 2 step 12",
                                  "(learning rate 1.5)", "no checkpoint"}));
  LossTotals bad;
  add_batch_loss(1.0, 0, 1, 0, bad);
  add_batch_loss(1.0, 0, 1, 3, bad);
  EXPECT_TRUE(throws_input_error([&] { app::check_loss_totals(bad, 1, 0, 1, lr_at); },
                                 {"3 labels in epoch 1 from step 2 on", "number of classes"}));
  LossTotals fine;
  add_batch_loss(1.0, 0, 1, 0, fine);
  EXPECT_NO_THROW(app::check_loss_totals(fine, 1, 0, 1, lr_at));
  const std::vector<int32_t> labels = {0, 9, 10};
  EXPECT_TRUE(throws_input_error([&] { app::check_batch_labels(labels, 10, 3, 41); },
                                 {"label 10 of row 2 in epoch 3 step 41 is outside [0, 10)"}));
  EXPECT_NO_THROW(app::check_batch_labels(labels, 11, 3, 41));
}

}  // namespace
}  // namespace lockstep::nn
