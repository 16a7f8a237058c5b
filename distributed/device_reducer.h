// DeviceReducer: allreduce of device buffers ordered by device streams
// instead of host waits. The NCCL communicator offers one
// (Communicator::device_reducer()); the DistributedOptimizer uses it for
// gradient buckets on a GPU:
//
//   // announcing thread, after queueing the pack of bucket b on the backend:
//   reducer.mark_ready(b, backend.native_stream());
//   // communication thread, buckets in index order; returns once queued:
//   reducer.enqueue_allreduce(b, bucket_b_on_device, ReduceOp::kSum);
//   // synchronize(): the backend's stream waits for every queued allreduce,
//   // and the host polls (asynchronous errors, stall policy) until done:
//   reducer.finish(backend.native_stream());
//
// No host synchronisation happens between buckets: the reducer's stream
// waits on an event recorded after bucket b's pack, and the backend's
// stream waits on an event recorded after the last allreduce. Streams are
// passed as void* (cudaStream_t) so that nothing outside distributed/cuda
// depends on CUDA or NCCL.
#pragma once

#include <cstddef>
#include <span>

#include "distributed/communicator.h"

namespace lockstep::distributed {

class DeviceReducer {
 public:
  virtual ~DeviceReducer() = default;

  // Records what is queued on `stream` so far as what the next allreduce of
  // `slot` waits for. Never blocks. Call it on the thread that queued the
  // work; may run while another thread is inside enqueue_allreduce.
  virtual void mark_ready(size_t slot, void* stream) = 0;
  // Queues an in-place allreduce of `data` (device memory; the same count on
  // every rank, slots in the same order) after slot's mark. Returns once
  // queued, not once done. Throws DistributedError naming this rank when
  // an earlier asynchronous error was seen.
  virtual void enqueue_allreduce(size_t slot, std::span<float> data, ReduceOp op) = 0;
  // Makes `stream` wait for every allreduce queued so far, then waits on the
  // host until they have completed, polling asynchronous errors and the
  // stall policy. Throws DistributedError naming this rank and the
  // collective on an asynchronous error (the communicator is then aborted).
  virtual void finish(void* stream) = 0;
};

}  // namespace lockstep::distributed
