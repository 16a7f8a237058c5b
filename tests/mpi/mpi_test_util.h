// Helpers shared by the multi-rank tests.
#pragma once

#include <unistd.h>
#include <filesystem>
#include <memory>
#include <string>

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

// A fresh folder under the temporary directory, named by `prefix` and rank
// 0's process id, made by rank 0 and known to every rank on return
// (collective). Rank 0 removes it when the test is done.
inline std::string shared_scratch_dir(Communicator& comm, const std::string& prefix) {
  std::string dir;
  if (comm.rank() == 0) {
    dir = (std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(getpid())))
              .string();
    std::filesystem::create_directories(dir);
  }
  comm.broadcast_string(dir, 0);
  return dir;
}

}  // namespace lockstep::distributed::testing
