// ReductionStrategy: how the buckets of a BucketLayout (bucket_layout.h)
// are summed over the ranks. The DistributedOptimizer counts backward passes
// and steps, packs each gradient into its slot and hands each full bucket to
// a strategy; the strategy communicates and leaves the sums in
// Parameter::grad. Two strategies exist:
//   HostReduction (host_reduction.h): MPI on host memory, on a thread.
//   DeviceReduction (device_reduction.h): a DeviceReducer (NCCL) on device
//   memory, ordered by stream events.
//
// Contract, per step:
//   bucket_ready(b, step) once for every bucket, in any order, on the
//   thread that owns the backend, after bucket b's buffer holds this rank's
//   contribution (queued on the backend is enough);
//   finish(step) once, on that thread: returns when every bucket's sum
//   (times the prescale) is in Parameter::grad, or throws DistributedError
//   (a communication error, on every rank alike where the cause is
//   collective). After finish(), returning or throwing, the next step may
//   begin. `step` is the step number for stall labels.
// Buckets are reduced strictly in index order on every rank.
#pragma once

#include <cstdint>
#include <mutex>

#include "distributed/timeline.h"

namespace lockstep::distributed {

// Counters of a strategy; seconds are wall time.
struct ReductionStats {
  int64_t allreduces = 0;          // bucket allreduces issued
  int64_t bytes_reduced = 0;       // bytes on the wire: 4 per value, 2 with fp16/bf16
  double allreduce_seconds = 0.0;  // inside the communicator (total communication)
  double unpack_seconds = 0.0;     // writing results back into Parameter::grad
};

class ReductionStrategy {
 public:
  virtual ~ReductionStrategy() = default;
  virtual void bucket_ready(size_t b, int64_t step) = 0;
  virtual void finish(int64_t step) = 0;

  // Spans "allreduce/unpack bucket B" go there (null: none). Set between steps.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  ReductionStats stats() const {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    return stats_;
  }
  void reset_stats() {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_ = {};
  }

 protected:
  // Thread-safe: called from the communication thread too.
  void count_allreduce(int64_t bytes, double seconds) {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.allreduces;
    stats_.bytes_reduced += bytes;
    stats_.allreduce_seconds += seconds;
  }
  void count_unpack(double seconds) {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.unpack_seconds += seconds;
  }

  Timeline* timeline_ = nullptr;

 private:
  mutable std::mutex stats_mutex_;
  ReductionStats stats_;
};

}  // namespace lockstep::distributed
