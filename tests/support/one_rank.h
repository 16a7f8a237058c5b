// OneRank: a BatchStatsReducer for one rank alone (SyncBatchNorm's
// reductions leave the sums as they are), counting its calls. The layer
// takes its host path with it, as under SyncBatchNorm.
#pragma once

#include <span>
#include <string_view>

#include "nn/batch_stats_reducer.h"

namespace lockstep::testing {

class OneRank final : public nn::BatchStatsReducer {
 public:
  void sum(std::span<double>, std::string_view) override { ++calls; }
  void sum_exact(nn::BinnedSum&, std::string_view) override { ++calls; }
  int calls = 0;
};

}  // namespace lockstep::testing
