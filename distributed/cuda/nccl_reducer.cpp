// The NCCL communicator as a DeviceReducer (distributed/device_reducer.h):
// gradient buckets ordered by events, the host waits only in finish().
#include "distributed/cuda/nccl_communicator_impl.h"
#include "nn/cuda/cuda_check.h"

namespace lockstep::distributed::nccl_detail {

NcclCommunicator::Claim NcclCommunicator::claim(const char* operation) {
  if (busy_.exchange(true)) {
    throw DistributedError(detail::concat("rank ", rank_, ": NCCL ", operation,
                                          " issued while another collective is in flight on the "
                                          "same communicator (use one communicator per thread)"));
  }
  if (!comm_) {
    busy_ = false;
    throw DistributedError(detail::concat("rank ", rank_, ": NCCL ", operation,
                                          " on a communicator aborted after an earlier error"));
  }
  return Claim{busy_};
}

cudaEvent_t NcclCommunicator::ready_event(size_t slot) {
  std::lock_guard lock(events_mutex_);
  while (ready_events_.size() <= slot) ready_events_.push_back(make_event());
  return ready_events_[slot].get();
}

void NcclCommunicator::mark_ready(size_t slot, void* stream) {
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaEventRecord(ready_event(slot), static_cast<cudaStream_t>(stream)));
}

void NcclCommunicator::enqueue_allreduce(size_t slot, std::span<float> data, ReduceOp op) {
  const Claim claimed = claim("allreduce");
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), ready_event(slot), 0));
  if (!data.empty()) {
    NCCL_CHECK(ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, nccl_op(op),
                             comm_.get(), stream_.get()));
    // A non-blocking communicator may still be queueing the call: wait for
    // that (not for the reduction), watching asynchronous errors.
    wait_until("allreduce", [] { return true; });
  }
  ++sequence_;
}

void NcclCommunicator::finish(void* stream) {
  const Claim claimed = claim("allreduce");
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaEventRecord(done_event_.get(), stream_.get()));
  CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), done_event_.get(), 0));
  wait_until("allreduce", [&] {
    const cudaError_t status = cudaEventQuery(done_event_.get());
    if (status == cudaErrorNotReady) return false;
    CUDA_CHECK(status);
    return true;
  });
}

}  // namespace lockstep::distributed::nccl_detail
