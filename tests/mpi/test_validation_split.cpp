// The validation split on 3 ranks: every rank holds the same split, and
// evaluating it counts each sample once, giving what one process gets.
#include <gtest/gtest.h>

#include <filesystem>

#include "app/run/trainer.h"
#include "data/catalog.h"
#include "data/validation_split.h"
#include "mpi_test_util.h"
#include "support/dataset_files.h"

namespace lockstep {
namespace {

TEST(ValidationSplitMpi, EveryRankHoldsTheSameSplitAndCountsItOnce) {
  auto comm = distributed::testing::make_test_comm();
  const std::string dir = distributed::testing::shared_scratch_dir(*comm, "lockstep_val_split");
  if (comm->rank() == 0) lockstep::testing::write_mnist_dir(dir + "/data", 90, 10);
  comm->barrier();
  app::TrainConfig config;
  config.dataset = "mnist";
  config.data_dir = dir + "/data";
  config.run_dir.clear();
  config.progress = "none";
  config.threads = 1;
  config.test_batch_size = 7;  // several uneven batches per rank
  config.val_fraction = 0.3;
  app::Trainer trainer(config, *comm);
  const app::EvalResult v = trainer.evaluate(true);
  // The split itself, compared across ranks by a hash of its indices.
  const std::vector<int32_t> labels = data::load_dataset("mnist", dir + "/data", true).labels;
  uint64_t h = 0;
  const auto split = data::stratified_split(labels, 10, 0.3, config.seed);
  for (int64_t i : split.validation) h = h * 1000003u + static_cast<uint64_t>(i);
  const auto all = comm->allgather_value(h);
  for (uint64_t other : all) EXPECT_EQ(other, h);
  EXPECT_EQ(v.samples, static_cast<int64_t>(split.validation.size()));
  if (comm->rank() == 0) {
    auto single = distributed::make_single_communicator();
    app::Trainer alone(config, *single);
    const app::EvalResult one = alone.evaluate(true);
    EXPECT_EQ(one.samples, v.samples);
    EXPECT_NEAR(one.loss, v.loss, 1e-6 * std::max(1.0, one.loss));
    EXPECT_DOUBLE_EQ(one.accuracy, v.accuracy);
  }
  comm->barrier();
  if (comm->rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep
