// BatchStatsReducer: how a BatchNorm layer sums its per-channel statistics
// over every rank (SyncBatchNorm) without knowing of MPI. distributed/
// implements it over a Communicator; nn/ only declares it.
#pragma once

#include <span>
#include <string_view>

namespace lockstep::nn {

class BinnedSum;

class BatchStatsReducer {
 public:
  virtual ~BatchStatsReducer() = default;
  // Replaces values, on every rank, with their sum over all ranks. Every
  // rank calls it the same number of times with the same sizes, in the same
  // order (BatchNorm layers in forward and backward order). `what` names the
  // collective for timelines and stall reports ("layer1.0.bn1 forward").
  virtual void sum(std::span<double> values, std::string_view what) = 0;
  // Reproducible mode: replaces sums, on every rank, with their exact sum
  // over all ranks (nn/exact_sum.h); the same calling rules as sum().
  virtual void sum_exact(BinnedSum& sums, std::string_view what) = 0;
};

}  // namespace lockstep::nn
