// The device strategy (device_reduction.h): buckets queued on a
// DeviceReducer behind stream events.
#include "distributed/device_reduction.h"

#include <string>

#include "common/clock.h"

namespace lockstep::distributed {

DeviceReduction::DeviceReduction(BucketLayout& layout, Communicator& comm, DeviceReducer& reducer,
                                 nn::Backend& backend, bool overlap, float prescale)
    : layout_(layout), comm_(comm), reducer_(reducer), backend_(backend), prescale_(prescale) {
  if (overlap) {
    thread_ = std::make_unique<CommThread>(
        layout_.size(), [this] { backend_.bind_thread(); },
        [this](size_t b) { enqueue(b, Timeline::kCommThread); });
  }
}

void DeviceReduction::bucket_ready(size_t b, int64_t step) {
  // Queued after the pack; the reduction waits for it on the device.
  if (prescale_ != 1.0f)
    backend_.scale(layout_.bucket(b).numel, prescale_, layout_.buffer(b).data());
  reducer_.mark_ready(b, backend_.native_stream());
  if (!thread_) return;  // finish() queues it
  label_step_ = step;
  thread_->hand_off(b, /*keep_last=*/false);
}

void DeviceReduction::finish(int64_t step) {
  std::exception_ptr error;
  if (thread_) {
    error = thread_->wait_all();
  } else {
    label_step_ = step;
    try {
      for (size_t b = 0; b < layout_.size(); ++b) enqueue(b, Timeline::kMainThread);
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!error) {
    try {
      reducer_.finish(backend_.native_stream());  // the host waits here, once per step
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  for (size_t b = 0; b < layout_.size(); ++b) {
    const auto start = Clock::now();
    {
      TimelineSpan span(timeline_, layout_.names(b).unpack, "unpack");
      layout_.unpack_on_device(b, backend_);
    }
    count_unpack(seconds_since(start));
  }
}

// Returns once bucket b's allreduce is queued behind its mark.
void DeviceReduction::enqueue(size_t b, int tid) {
  comm_.set_stall_label("step " + std::to_string(label_step_.load()) + " bucket " +
                        std::to_string(b));
  const auto start = Clock::now();
  {
    TimelineSpan span(timeline_, layout_.names(b).allreduce, "allreduce", tid);
    reducer_.enqueue_allreduce(b, layout_.buffer(b).span(), ReduceOp::kSum);
  }
  count_allreduce(layout_.bucket(b).bytes(), seconds_since(start));
}

}  // namespace lockstep::distributed
