// The SyncBatchNorm reduction (nn/batch_stats_reducer.h) over a
// Communicator: one allreduce (sum, double) per call, recorded on the
// timeline as a "sync_batchnorm" span named after the layer and direction,
// and labelled for the stall watchdog. The collectives run on a duplicate
// of the communicator (Communicator::duplicate(); the communicator itself
// when it has none), so they may overlap the gradient thread's.
#pragma once

#include <memory>

#include "distributed/communicator.h"
#include "distributed/timeline.h"
#include "nn/batch_stats_reducer.h"

namespace lockstep::distributed {

class CommBatchStatsReducer final : public nn::BatchStatsReducer {
 public:
  // Collective over comm (duplicates it). timeline may be null. Both must
  // outlive the reducer.
  CommBatchStatsReducer(Communicator& comm, Timeline* timeline);
  void sum(std::span<double> values, std::string_view what) override;
  void sum_exact(nn::BinnedSum& sums, std::string_view what) override;
  // The stall policy of the reducer's collectives (the duplicate keeps the
  // one in force when it was made until told otherwise).
  void set_stall_policy(StallPolicy policy) { comm_.set_stall_policy(policy); }

 private:
  std::unique_ptr<Communicator> own_;  // the duplicate, or null
  Communicator& comm_;                 // *own_, or the given one
  Timeline* timeline_;
};

}  // namespace lockstep::distributed
