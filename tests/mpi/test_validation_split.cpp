// The validation split on 3 ranks: every rank holds the same split, and
// evaluating it counts each sample once, giving what one process gets.
#include <gtest/gtest.h>

#include <filesystem>

#include "app/run/trainer.h"
#include "data/catalog.h"
#include "data/validation_split.h"
#include "mpi_test_util.h"
#include "mpi_trainer_util.h"
#include "support/dataset_files.h"

namespace lockstep {
namespace {

TEST(ValidationSplitMpi, EveryRankHoldsTheSameSplitAndCountsItOnce) {
  auto comm = distributed::testing::make_test_comm();
  app::TrainConfig config =
      distributed::testing::mnist_test_config(*comm, "lockstep_val_split", 90, 10);
  config.val_fraction = 0.3;
  app::Trainer trainer(config, *comm);
  const app::EvalResult v = trainer.evaluate(true);
  // The trainer's split (images and labels), compared across ranks and with
  // the split the same seed makes of the whole training file here.
  const data::Dataset& held = trainer.validation_set();
  const uint64_t h = held.fingerprint();
  const auto all = comm->allgather_value(h);
  for (size_t r = 0; r < all.size(); ++r) EXPECT_EQ(all[r], h) << "rank " << r << "'s split";
  data::Dataset whole = data::load_dataset("mnist", config.data_dir, true);
  const data::Dataset want = data::split_off_validation(whole, 0.3, config.seed);
  EXPECT_EQ(held.size(), want.size());
  EXPECT_EQ(h, want.fingerprint());
  EXPECT_EQ(v.samples, held.size());
  if (comm->rank() == 0) {
    auto single = distributed::make_single_communicator();
    app::Trainer alone(config, *single);
    EXPECT_EQ(alone.validation_set().fingerprint(), h);
    const app::EvalResult one = alone.evaluate(true);
    EXPECT_EQ(one.samples, v.samples);
    EXPECT_NEAR(one.loss, v.loss, 1e-6 * std::max(1.0, one.loss));
    EXPECT_DOUBLE_EQ(one.accuracy, v.accuracy);
  }
  comm->barrier();
  if (comm->rank() == 0)
    std::filesystem::remove_all(std::filesystem::path(config.data_dir).parent_path());
}

}  // namespace
}  // namespace lockstep
