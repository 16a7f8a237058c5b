// `lockstep bench`: training throughput of the reference models on synthetic
// data (no dataset needed), for a set of thread counts. One forward, loss,
// backward and optimizer step per iteration, exactly as the trainer runs
// them (through the DistributedOptimizer on the given communicator).
//
// `lockstep bench --allreduce`: the DistributedOptimizer's whole gradient
// reduction of one step, as step() pays it (announce every gradient in
// backward's order, pack it unless it already lives in its bucket, allreduce
// each bucket, unpack where needed: DistributedOptimizer::reduce_gradients(),
// the sums; the average is folded into the optimizer's update) against one
// Communicator::allreduce (sum) of the same bytes, alternating the two,
// several repetitions; each repetition's time is the slowest rank's.
#pragma once

#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/timeline.h"
#include "nn/precision.h"

namespace lockstep::app {

struct BenchCase {
  std::string model;                // mnist_net | alexnet_cifar
  int64_t batch = 64;               // per rank
  int threads = 1;                  // compute threads per rank
  double allreduce_chunk_mb = 1.0;  // DistributedOptimizerConfig's
  nn::Precision precision = nn::Precision::kFp32;
  // The trainer's reproducible mode (exact per-sample gradient and loss
  // sums, distributed/exact_gradients.h) instead of the bucketed reduction.
  bool reproducible = false;
  // BatchNorm statistics over all ranks (SyncBatchNorm); false: per rank.
  bool sync_batchnorm = false;
};

struct BenchResult {
  BenchCase bench;
  double images_per_second = 0.0;  // over all ranks
  double seconds_per_step = 0.0;
  int64_t steps = 0;
};

// Runs one case for at least min_seconds (after warmup steps). With a
// timeline, the timed steps record "forward", "backward" and "optimizer
// step" spans as the trainer does (and the optimizer's own spans).
BenchResult run_bench(const BenchCase& bench, distributed::Communicator& comm, double min_seconds,
                      distributed::Timeline* timeline = nullptr);

// The default suite: mnist_net at batch 64 and alexnet_cifar at batch 128,
// each with 1 and 2 threads.
std::vector<BenchCase> default_bench_cases();

struct AllreduceBenchCase {
  std::string model;  // its parameter list is what is reduced
  double first_bucket_mb = 1.0;
  double bucket_cap_mb = 25.0;      // 0: one bucket per parameter
  bool overlap = true;              // buckets reduced on the communication thread
  int repeats = 10;                 // timed repetitions of each variant
  double allreduce_chunk_mb = 1.0;  // pieces of each bucket's allreduce; 0: whole
};

struct AllreduceBenchResult {
  AllreduceBenchCase bench;
  int64_t bytes = 0;  // gradient bytes per step
  size_t buckets = 0;
  // Per repetition, seconds (slowest rank), and their medians.
  std::vector<double> fused, plain;
  double fused_median = 0.0, plain_median = 0.0;
  // Where the fused time goes, seconds per repetition (this rank's means, from
  // DistributedOptimizerStats): packing on the calling thread, inside the
  // allreduce calls, unpacking into Parameter::grad, and the caller's wait in
  // synchronize().
  double pack = 0.0, allreduce = 0.0, unpack = 0.0, exposed = 0.0;
  // Algorithm bandwidth: bytes / median time, GB/s.
  double fused_gbps() const { return bytes / fused_median / 1e9; }
  double plain_gbps() const { return bytes / plain_median / 1e9; }
};

// Collective. Two warm-up rounds, then `repeats` rounds of (fused, plain).
AllreduceBenchResult run_allreduce_bench(const AllreduceBenchCase& bench,
                                         distributed::Communicator& comm);

// One line for people, then "bench {...}" with every repetition's times (ms).
std::string format_allreduce_result(const AllreduceBenchResult& r, int ranks);

}  // namespace lockstep::app
