// A trainer configuration the multi-rank tests share.
#pragma once

#include <cstdint>
#include <string>

#include "app/config/config.h"
#include "mpi_test_util.h"
#include "support/dataset_files.h"

namespace lockstep::distributed::testing {

// MNIST-format files of `train` and `test` samples, written by rank 0 into a
// shared scratch folder named by `prefix`, and a configuration that reads
// them: no run directory, no console output, one thread, evaluation batches
// of 7 (several uneven batches per rank). Collective.
inline app::TrainConfig mnist_test_config(Communicator& comm, const std::string& prefix,
                                          int64_t train, int64_t test) {
  const std::string dir = shared_scratch_dir(comm, prefix);
  if (comm.rank() == 0) lockstep::testing::write_mnist_dir(dir + "/data", train, test);
  comm.barrier();
  app::TrainConfig config;
  config.dataset = "mnist";
  config.data_dir = dir + "/data";
  config.run_dir.clear();
  config.progress = "none";
  config.threads = 1;
  config.test_batch_size = 7;
  return config;
}

}  // namespace lockstep::distributed::testing
