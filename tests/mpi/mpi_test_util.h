// Helpers shared by the multi-rank tests.
#pragma once

#include <memory>

#include "distributed/mpi_communicator.h"

namespace lockstep::distributed::testing {

// A communicator over MPI_COMM_WORLD whose watchdog ends the job if a test
// leaves the ranks out of step (a failed ASSERT on one rank skips the
// collectives that follow), so a broken test fails instead of hanging.
inline std::unique_ptr<Communicator> make_test_comm() {
  MpiCommunicatorOptions options;
  options.stall.warning_seconds = 20.0;
  options.stall.abort_seconds = 120.0;
  return make_mpi_communicator(MPI_COMM_WORLD, options);
}

}  // namespace lockstep::distributed::testing
