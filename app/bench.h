// `lockstep bench`: training throughput of the reference models on synthetic
// data (no dataset needed), for a set of thread counts. One forward, loss,
// backward and optimizer step per iteration, exactly as the trainer runs
// them (through the DistributedOptimizer on the given communicator).
#pragma once

#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace lockstep::app {

struct BenchCase {
  std::string model;   // mnist_net | alexnet_cifar
  int64_t batch = 64;  // per rank
  int threads = 1;     // compute threads per rank
};

struct BenchResult {
  BenchCase bench;
  double images_per_second = 0.0;  // over all ranks
  double seconds_per_step = 0.0;
  int64_t steps = 0;
};

// Runs one case for at least min_seconds (after warmup steps).
BenchResult run_bench(const BenchCase& bench, distributed::Communicator& comm, double min_seconds);

// The default suite: mnist_net at batch 64 and alexnet_cifar at batch 128,
// each with 1 and 2 threads.
std::vector<BenchCase> default_bench_cases();

}  // namespace lockstep::app
