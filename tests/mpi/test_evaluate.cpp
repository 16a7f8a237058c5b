// Evaluation on N ranks gives the single-process numbers: the test set's
// shards (uneven, none padded) count each sample once, and the sums and
// counts reduced across ranks give the same loss (to the rounding of a
// different summation order), the same accuracy and the same confusion
// matrix, entry by entry. Compared as numbers, not as printed lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "app/run/trainer.h"
#include "mpi_test_util.h"
#include "mpi_trainer_util.h"
#include "support/dataset_files.h"

namespace lockstep {
namespace {

TEST(EvaluateMpi, NRanksEvaluateLikeOneProcess) {
  auto comm = distributed::testing::make_test_comm();
  app::TrainConfig config =
      distributed::testing::mnist_test_config(*comm, "lockstep_eval", 64, 100);
  app::Trainer trainer(config, *comm);
  const app::EvalResult many = trainer.evaluate();
  EXPECT_EQ(many.samples, 100);
  if (comm->rank() == 0) {
    auto single = distributed::make_single_communicator();
    app::Trainer alone(config, *single);
    const app::EvalResult one = alone.evaluate();
    EXPECT_EQ(one.samples, many.samples);
    EXPECT_NEAR(one.loss, many.loss, 1e-12 * std::max(1.0, one.loss));
    EXPECT_EQ(one.accuracy, many.accuracy);
    EXPECT_EQ(one.top_k_accuracy, many.top_k_accuracy);
    const int64_t classes = 10;
    for (int64_t t = 0; t < classes; ++t) {
      for (int64_t p = 0; p < classes; ++p) {
        EXPECT_EQ(one.classes->confusion(t, p), many.classes->confusion(t, p)) << t << ", " << p;
      }
    }
  }
  comm->barrier();
  if (comm->rank() == 0)
    std::filesystem::remove_all(std::filesystem::path(config.data_dir).parent_path());
}

}  // namespace
}  // namespace lockstep
