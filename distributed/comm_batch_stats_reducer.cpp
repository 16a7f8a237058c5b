#include "distributed/comm_batch_stats_reducer.h"

#include <string>

#include "distributed/exact_gradients.h"

namespace lockstep::distributed {

CommBatchStatsReducer::CommBatchStatsReducer(Communicator& comm, Timeline* timeline)
    : own_(comm.duplicate()), comm_(own_ ? *own_ : comm), timeline_(timeline) {}

void CommBatchStatsReducer::sum(std::span<double> values, std::string_view what) {
  const std::string label = "sync_batchnorm " + std::string(what);
  comm_.set_stall_label(label);
  TimelineSpan span(timeline_, label, "sync_batchnorm");
  comm_.allreduce(values, ReduceOp::kSum);
}

void CommBatchStatsReducer::sum_exact(nn::BinnedSum& sums, std::string_view what) {
  const std::string label = "sync_batchnorm " + std::string(what);
  comm_.set_stall_label(label);
  TimelineSpan span(timeline_, label, "sync_batchnorm");
  allreduce_exact(comm_, {&sums});
}

}  // namespace lockstep::distributed
