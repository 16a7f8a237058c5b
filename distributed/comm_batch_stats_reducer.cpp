#include "distributed/comm_batch_stats_reducer.h"

#include <string>

namespace lockstep::distributed {

CommBatchStatsReducer::CommBatchStatsReducer(Communicator& comm, Timeline* timeline)
    : own_(comm.duplicate()), comm_(own_ ? *own_ : comm), timeline_(timeline) {}

void CommBatchStatsReducer::sum(std::span<double> values, std::string_view what) {
  const std::string label = "sync_batchnorm " + std::string(what);
  comm_.set_stall_label(label);
  TimelineSpan span(timeline_, label, "sync_batchnorm");
  comm_.allreduce(values, ReduceOp::kSum);
}

}  // namespace lockstep::distributed
