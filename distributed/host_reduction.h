// HostReduction: buckets summed with the communicator's allreduce on host
// memory (MPI), as a ReductionStrategy (reduction_strategy.h).
//
// - Overlap on: one CommThread (comm_thread.h) reduces each bucket as soon
//   as it is handed off, while backward continues, and writes the sums back
//   into Parameter::grad (CPU tensors). The last bucket, when the thread has
//   finished every other one by then, is reduced by finish() on the calling
//   thread instead. Overlap off: finish() reduces every bucket itself.
// - Chunks: a bucket is reduced by allreduces of at most allreduce_chunk_mb
//   MiB each, one after the other (0: one per bucket); the bucket stays the
//   unit of overlap, counting and errors.
// - Compression (fp16/bf16, compression.h): after the prescale a bucket is
//   converted to 16 bits and reduced with allreduce_16bit. A non-finite sum
//   (fp16 overflow on any rank or in the sum, or a non-finite gradient)
//   is non-finite on every rank, so finish() throws DistributedError on
//   every rank together; the message says whether this rank's gradient or
//   the sum went out of range.
// - verify_unchanged (debug): the bucket is reduced in a copy and must not
//   change between bucket_ready() and the end of its reduction.
// - Non-CPU tensors: bucket_ready() copies the buffer into a host copy
//   (Tensor::copy_from); finish() copies the sums back through the backend.
//
// Threads: bucket_ready() and finish() on the backend's thread; the
// communication thread calls Backend::bind_thread() first, then only the
// communicator and host memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "distributed/bucket_layout.h"
#include "distributed/comm_thread.h"
#include "distributed/communicator.h"
#include "distributed/compression.h"
#include "distributed/reduction_strategy.h"

namespace lockstep::distributed {

struct HostReductionConfig {
  bool overlap = true;
  double allreduce_chunk_mb = 1.0;
  Compression compression = Compression::kNone;
  float prescale = 1.0f;  // applied to every bucket before the sum
  // With compression: a bucket whose 16-bit sum is not finite is left in the
  // gradients as inf/NaN instead of throwing (loss scaling skips the step).
  bool keep_non_finite = false;
  // A debug check (CPU tensors only; TSan cannot see MPI's reads): each
  // bucket is checksummed when it is handed off and again when its
  // reduction has ended, having been reduced in a copy meanwhile; a bucket
  // written in between (backward writing a gradient it had announced while
  // MPI reads it) throws DistributedError naming the bucket. Costs a copy
  // and two passes over every bucket.
  bool verify_unchanged = false;
};

class HostReduction final : public ReductionStrategy {
 public:
  // layout (with buffers), comm and backend must outlive this object.
  HostReduction(BucketLayout& layout, Communicator& comm, nn::Backend& backend,
                HostReductionConfig config);
  void bucket_ready(size_t b, int64_t step) override;
  void finish(int64_t step) override;

  // Values per allreduce for a chunk of `chunk_mb` MiB (0: no limit).
  static size_t chunk_values(double chunk_mb, size_t bytes_per_value);

 private:
  float* host_data(size_t b);
  void reduce(size_t b, int tid);  // no backend calls
  void reduce_values(size_t b, std::span<float> data, int tid);
  void check_unchanged(size_t b, std::span<const float> bucket) const;
  void allreduce(size_t b, std::span<float> data);
  void unpack_on_host(size_t b, int tid);
  void unpack_on_device(size_t b);

  BucketLayout& layout_;
  Communicator& comm_;
  nn::Backend& backend_;
  HostReductionConfig config_;
  const bool on_host_;                       // the buffers are CPU tensors
  std::vector<nn::Tensor> host_;             // host copies (non-CPU tensors)
  std::vector<std::vector<uint16_t>> wire_;  // 16-bit values (compression)
  const bool verify_;                        // verify_unchanged on CPU tensors
  std::vector<uint64_t> ready_checksum_;     // verify: at bucket_ready()
  std::vector<std::vector<float>> copy_;     // verify: reduced here
  std::atomic<int64_t> label_step_{0};       // for the stall label
  std::unique_ptr<CommThread> thread_;       // overlap only
};

}  // namespace lockstep::distributed
