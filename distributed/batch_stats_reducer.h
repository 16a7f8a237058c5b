// The SyncBatchNorm reduction (nn/batch_stats_reducer.h) over a
// Communicator: one allreduce (sum, double) per call, recorded on the
// timeline as a "sync_batchnorm" span named after the layer and direction,
// and labelled for the stall watchdog.
#pragma once

#include "distributed/communicator.h"
#include "distributed/timeline.h"
#include "nn/batch_stats_reducer.h"

namespace lockstep::distributed {

class CommBatchStatsReducer final : public nn::BatchStatsReducer {
 public:
  // timeline may be null. Both must outlive the reducer.
  CommBatchStatsReducer(Communicator& comm, Timeline* timeline)
      : comm_(comm), timeline_(timeline) {}
  void sum(std::span<double> values, std::string_view what) override;

 private:
  Communicator& comm_;
  Timeline* timeline_;
};

}  // namespace lockstep::distributed
