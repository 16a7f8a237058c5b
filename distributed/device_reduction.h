// DeviceReduction: buckets summed where they are, in device memory, by a
// DeviceReducer (device_reducer.h; NCCL on GPUs), as a ReductionStrategy
// (reduction_strategy.h).
//
// bucket_ready(b) queues the prescale on the backend's stream and marks the
// bucket (an event; no host wait); the allreduce of bucket b is queued on
// the reducer's stream behind that mark, in index order, by a CommThread
// (overlap on) or by finish() (overlap off). finish() makes the backend's
// stream wait for every allreduce and polls on the host until they are
// complete (asynchronous errors become a DistributedError naming the rank),
// then queues the copies into Parameter::grad on the backend's stream.
// allreduce_seconds counts queueing only. NCCL chunks by itself.
//
// Threads: bucket_ready() and finish() on the backend's thread; the
// communication thread calls Backend::bind_thread() first, then only the
// reducer.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "distributed/bucket_layout.h"
#include "distributed/comm_thread.h"
#include "distributed/device_reducer.h"
#include "distributed/reduction_strategy.h"

namespace lockstep::distributed {

class DeviceReduction final : public ReductionStrategy {
 public:
  // layout (with buffers on the backend's device), comm (whose
  // device_reducer() is `reducer`) and backend must outlive this object.
  DeviceReduction(BucketLayout& layout, Communicator& comm, DeviceReducer& reducer,
                  nn::Backend& backend, bool overlap, float prescale);
  void bucket_ready(size_t b, int64_t step) override;
  void finish(int64_t step) override;

 private:
  void enqueue(size_t b, int tid);

  BucketLayout& layout_;
  Communicator& comm_;
  DeviceReducer& reducer_;
  nn::Backend& backend_;
  const float prescale_;
  std::atomic<int64_t> label_step_{0};  // for the stall label
  std::unique_ptr<CommThread> thread_;  // overlap only
};

}  // namespace lockstep::distributed
