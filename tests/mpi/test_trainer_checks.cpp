// The trainer's per-epoch step-count check across ranks (app/run/trainer.h):
// equal counts pass; a rank with one batch more stops every rank with one
// message naming the range over the ranks and the rank's own count.
#include <gtest/gtest.h>

#include <string>

#include "app/run/trainer.h"
#include "common/error.h"
#include "mpi_test_util.h"

namespace lockstep {
namespace {

TEST(TrainerChecksMpi, StepCountCheckPassesEqualCountsAndNamesUnequalOnes) {
  auto comm = distributed::testing::make_test_comm();
  EXPECT_NO_THROW(app::check_batch_count(*comm, 2, 10));
  const int64_t mine = comm->rank() == 1 ? 11 : 10;
  std::string error = "no error";
  try {
    app::check_batch_count(*comm, 3, mine);
  } catch (const DistributedError& e) {
    error = e.what();
  }
  const std::string want =
      "ranks disagree on the number of batches in epoch 3: from 10 to 11 "
      "across ranks, rank " +
      std::to_string(comm->rank()) + " has " + std::to_string(mine);
  EXPECT_NE(error.find(want), std::string::npos) << error;
}

}  // namespace
}  // namespace lockstep
