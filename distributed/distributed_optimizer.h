// DistributedOptimizer: wraps any nn::Optimizer so that every rank steps with
// the gradients averaged over all ranks (Horovod's DistributedOptimizer, with
// PyTorch DDP's fixed buckets).
//
//   DistributedOptimizer dopt(comm, backend, model.parameters(), *sgd, config);
//   dopt.broadcast_parameters();                    // rank 0's weights + state
//   for each step:
//     for pass in 1..k:                             // k = backward_passes_per_step
//       model.forward(backend, x, ctx);
//       model.loss(backend, labels, 1.0f / (k * local_batch), true);
//       model.backward(backend, dopt.grad_ready_callback());
//     dopt.step(lr);                                // synchronize() + inner.step()
//
// Gradient contract: what backward leaves in Parameter::grad is this rank's
// contribution to a mean, i.e. the loss gradient is scaled by
// 1 / (k * local_batch). With op = average the reduced gradient is the sum
// over passes and ranks divided by the number of ranks: the mean over the
// global batch of size * k * local_batch samples (ranks take equal batches).
//
// Buckets (fusion): fixed at construction, in REVERSE parameter order (the
// order backward announces gradients). Walking the parameters from the last,
// a bucket is closed before a parameter that would take it past its limit,
// so a bucket exceeds its limit only when one parameter alone does. The first
// bucket's limit is first_bucket_mb (small, so communication starts early),
// the others' bucket_cap_mb. bucket_cap_mb = 0 disables fusion (one bucket
// per parameter). Buckets are reduced strictly in index order, so every rank
// issues the same collectives in the same order by construction.
//
// Overlap: with overlap on, one background thread (created once) allreduces
// each bucket as soon as its last gradient of the reducing pass arrives,
// while backward continues, then writes the result into Parameter::grad (CPU
// tensors). synchronize() waits for it. On the host path, the last bucket,
// when the thread has finished every other one by the time it is handed off,
// is reduced by synchronize() on the calling thread instead: nothing is left
// to overlap it with, and the two thread wake-ups (there and back) cost more
// than the allreduce of a small bucket (a model in one bucket never wakes the
// thread). Where gradients do not live in their buckets (below: accumulation,
// devices), they are packed (copied, or added on accumulation passes) into
// the bucket buffers by the announcing thread through the backend, which
// keeps backend calls on one thread and works for device tensors. Measured
// on the 2-core machine (2 ranks, 1 compute thread each, alexnet_cifar, 93
// MB of gradients per step, under load), before gradients lived in the
// buckets: packing cost ~40 ms of a ~330 ms backward; packing on the
// communication thread instead left the step time unchanged and raised the
// exposed wait from ~50 to ~75 ms. Overlap cut the exposed wait from ~210 ms
// to ~50-70 ms per step (now ~13 ms: 84% of the allreduce hidden).
// With overlap off, synchronize() does all reductions itself.
//
// Accumulation: with backward_passes_per_step = k, passes 1..k-1 only add
// into the bucket buffers (no communication); the k-th pass adds and reduces
// (the k of one step can be lowered with set_step_passes()).
// Announcing a k+1-th pass before step(), or calling synchronize() before
// the k-th pass has announced anything, throws DistributedError. Gradients
// not announced in the reducing pass are taken from Parameter::grad in
// synchronize(); with k = 1 that lets backward run without the callback
// (nothing then overlaps).
//
// Compression (fp16/bf16): see distributed/compression.h. After the
// prescale, each bucket is converted to 16 bits on the host and reduced with
// Communicator::allreduce_16bit: 2 bytes per value on the wire, half of
// fp32. The sum is rounded to 16 bits at every reduction step, so with more
// than 2 ranks it can differ from "sum in fp32, then round" by up to one
// 16-bit rounding per step (the tests allow (size - 1) half-ulps relative
// to the sum of |g| over ranks, and require equality with 2 ranks); every
// rank gets the same bits. The postscale runs in
// fp32 on the 16-bit sum. An fp16 value that overflows, on any rank or in
// the sum, or a non-finite gradient anywhere, makes the sum non-finite on
// every rank (infinity and NaN propagate through the reduction), so
// synchronize() throws DistributedError on every rank together instead of
// leaving NaN weights; the message says whether this rank's own gradient
// or the sum over ranks went out of range.
//
// One rank (size 1) with k = 1, no compression and no predivision: the
// reduction is the identity, so nothing is packed or copied and no thread is
// started; step() is inner.step() (stats count steps, no allreduces).
//
// Gradients in the buckets (PyTorch DDP's gradient_as_bucket_view): on the
// CPU with k = 1, more than one rank or any rounding, and no DeviceReducer,
// the constructor moves every Parameter::grad into its bucket's buffer
// (Parameter::grad becomes an nn::Tensor::view of its slot), so backward
// writes the gradients where they are reduced: no pack or unpack copy. The
// destructor gives each gradient its own memory back. A gradient replaced
// after construction (a new tensor) is packed and unpacked by copying, as on
// the other paths.
//
// Chunks: on the host path a bucket is reduced by allreduces of at most
// allreduce_chunk_mb each, one after the other (the bucket is still the
// unit of overlap, counting and errors). MPICH reduces pieces that stay in
// cache much faster than one large buffer, and above 32 MiB it allocates a
// fresh temporary buffer per call: on the 2-core machine (2 ranks,
// alexnet_cifar's 93 MB, `lockstep bench --allreduce`, one run) the whole
// reduction took 46.5 ms unchunked, 34.9 with 16 MiB pieces, 29.7 with 4,
// 26.9 with 1 and 27.9 with 0.25; 2-rank training (`lockstep bench
// --allreduce-chunk-mb 0 1 0 1 0 1`) ran 2-4.5% faster in each of three
// alternating pairs (medians 548.6 against 564.2 img/s). NCCL (the
// DeviceReducer) chunks by itself.
//
// The average: the reduction leaves sums; the factor f / size (average) is
// applied by step() inside the inner optimizer's update (nn::SgdParams::
// grad_scale), which reads every gradient anyway, and by synchronize() in a
// pass of its own. On the 2-core machine (2 ranks, alexnet_cifar, 93 MB)
// the copies and that pass cost ~13 ms of a ~63 ms reduction; the bucket
// allreduces alone take what one plain MPI_Allreduce of the same bytes takes.
//
// Devices: bucket buffers live on the parameters' device. With a gradient
// communicator that has a DeviceReducer (NCCL; see
// distributed/device_reducer.h) and no compression, buckets are reduced
// where they are: after packing bucket b the announcing thread records an
// event on the backend's stream (no host wait); the communication thread
// queues bucket b's allreduce on NCCL's stream behind that event, in index
// order; synchronize() makes the backend's stream wait for NCCL's and polls
// on the host until the reductions are complete (NCCL's asynchronous errors
// become a DistributedError naming the rank, as MPI failures do), then
// queues the unpack (copy into Parameter::grad) on the backend's
// stream. allreduce_seconds then counts queueing only. Otherwise, for
// non-CPU tensors a host copy of each bucket is made (explicitly,
// Tensor::copy_from) before the allreduce and copied back in synchronize();
// that is also the path of fp16/bf16 compression on a GPU (the 16-bit
// conversions run on the host).
//
// Untested for want of a GPU (no GPU on the development machine or in CI):
// the NCCL DeviceReducer itself (events, stream waits, asynchronous error
// polling) and this path with real CUDA tensors; tests/mpi/test_nccl*.cpp
// cover it and skip, saying so, without GPUs. The optimizer's side of the
// path (mark, enqueue, finish, unpack, errors) is tested on the CPU with a
// fake DeviceReducer (tests/test_distributed_optimizer_device.cpp).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/compression.h"
#include "distributed/timeline.h"
#include "nn/backend.h"
#include "nn/layer.h"
#include "nn/optimizer.h"

namespace lockstep::distributed {

struct DistributedOptimizerConfig {
  // average (Horovod's and DDP's default): sum over ranks / size; sum: the
  // plain sum. min and max are refused.
  ReduceOp op = ReduceOp::kAverage;
  // Horovod's gradient_predivide_factor f: gradients are multiplied by 1/f
  // before the sum and by f/size after it (only with op = average). f = size
  // divides before summing, which keeps fp16 sums in range.
  double gradient_predivide_factor = 1.0;
  // Limit of the first bucket, MiB (DDP: 1 MiB).
  double first_bucket_mb = 1.0;
  // Limit of every other bucket, MiB (DDP: 25 MiB); 0: one bucket per parameter.
  double bucket_cap_mb = 25.0;
  // Each bucket's host allreduce is issued in pieces of at most this many
  // MiB (see "Chunks" above); 0: one allreduce per bucket.
  double allreduce_chunk_mb = 1.0;
  Compression compression = Compression::kNone;
  // Backward passes accumulated per step (Horovod's backward_passes_per_step).
  int backward_passes_per_step = 1;
  // Reduce buckets on a background thread during backward (true), or all in
  // synchronize() (false).
  bool overlap = true;
  // Clip the averaged gradients to this global L2 norm (0: off), after the
  // reduction, so every rank clips by the same factor; folded into the
  // inner step's grad_scale.
  double grad_clip_norm = 0.0;
  // The communicator for gradient buckets (app/ passes NCCL's on GPUs);
  // null: the communicator given to the constructor. Must outlive the
  // optimizer and, if it has a DeviceReducer, accept the parameters'
  // memory (NCCL: device memory). broadcast_parameters() always uses the
  // constructor's communicator.
  Communicator* gradient_comm = nullptr;
  // Spans "pack/allreduce/unpack bucket B", "synchronize", "inner optimizer step";
  // null: none. May be set later with set_timeline().
  Timeline* timeline = nullptr;
};

// One fusion buffer: parameters (indices into the parameter list) in
// announce order, each at an element offset.
struct GradientBucket {
  std::vector<size_t> params;
  std::vector<int64_t> offsets;
  int64_t numel = 0;
  int64_t bytes() const { return numel * static_cast<int64_t>(sizeof(float)); }
};

// The bucket layout for parameters of the given element counts (forward
// order), as described above. Throws InputError on a negative or non-finite
// limit.
std::vector<GradientBucket> assign_buckets(const std::vector<int64_t>& numels,
                                           double first_bucket_mb, double bucket_cap_mb);

// Counters for the trainer's report; seconds are wall time.
struct DistributedOptimizerStats {
  int64_t steps = 0;               // synchronize() calls that reduced
  int64_t allreduces = 0;          // bucket allreduces issued
  int64_t bytes_reduced = 0;       // bytes on the wire: 4 per value, 2 with fp16/bf16
  double exposed_seconds = 0.0;    // main thread inside synchronize(): communication not hidden
  double allreduce_seconds = 0.0;  // inside Communicator::allreduce (total communication)
  double pack_seconds = 0.0;       // packing gradients into buckets (announcing thread)
  double unpack_seconds = 0.0;     // writing results back into Parameter::grad
};

class DistributedOptimizer {
 public:
  // params: the model's parameters (forward order), all on backend's device,
  // the same list inner was built over. comm, backend, params and inner must
  // outlive this object. Throws InputError on a bad config.
  DistributedOptimizer(Communicator& comm, nn::Backend& backend,
                       const std::vector<nn::Parameter*>& params, nn::Optimizer& inner,
                       DistributedOptimizerConfig config = {});
  // Stops the communication thread. A bucket allreduce in progress is
  // finished first: the peers complete it, or the stall watchdog or the
  // launcher ends the job.
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  // Backward's callback: parameter i's gradient is final for this pass.
  void on_grad_ready(size_t param_index);
  // A callback for Model::backward bound to on_grad_ready.
  std::function<void(size_t)> grad_ready_callback() {
    return [this](size_t i) { on_grad_ready(i); };
  }
  // The coming step accumulates `passes` backward passes (1 to
  // backward_passes_per_step) instead of backward_passes_per_step: an
  // epoch's last, shorter group of batches, whose loss the caller scales by
  // 1 / (passes * local_batch). Every rank must call it alike, before the
  // step's first pass; after the step, steps take backward_passes_per_step
  // passes again. Throws DistributedError otherwise.
  void set_step_passes(int passes);
  // True when the next (or current) backward pass is the one that reduces.
  bool will_reduce() const { return passes_done_ + 1 == passes_per_step_; }
  // Completed backward passes since the last step.
  int passes_done() const { return passes_done_; }

  // Waits for the reductions in flight (or runs them, with overlap off) and
  // leaves the reduced gradients in every Parameter::grad. Rethrows an error
  // raised on the communication thread.
  void synchronize();
  // synchronize() without the last multiplication: leaves the sums (times
  // 1 / gradient_predivide_factor) in Parameter::grad and returns the factor
  // that completes the reduction (f / size for average, 1 for sum), for an
  // update that reads every gradient anyway to apply.
  float reduce_gradients();
  // reduce_gradients(), then inner.step(backend, lr, that factor): the
  // average costs no pass of its own over the gradients.
  void step(float lr);

  // Every parameter value, every optimizer state tensor, the optimizer's
  // steps() and last_lr() from root to every rank. Collective. Throws
  // DistributedError on every rank when the ranks' models or optimizers
  // differ in shape.
  void broadcast_parameters(int root = 0);

  void set_timeline(Timeline* timeline) { config_.timeline = timeline; }
  const DistributedOptimizerConfig& config() const { return config_; }
  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  DistributedOptimizerStats stats() const;
  void reset_stats();

 private:
  struct BucketState {
    nn::Tensor buffer;           // on the parameters' device
    nn::Tensor host;             // host copy for non-CPU devices
    std::vector<uint16_t> wire;  // the 16-bit values reduced (compression only)
    size_t pending = 0;          // gradients of this pass not announced yet
    bool ready = false;          // handed to the reduction (guarded by mutex_)
    std::string pack_name, allreduce_name, unpack_name;
    float* host_data() { return host.empty() ? buffer.data() : host.data(); }
  };

  // Where parameter i's gradient goes in its bucket's buffer (null without
  // buffers), and whether Parameter::grad is a view of exactly that.
  float* bucket_slot(size_t param_index);
  bool in_bucket(size_t param_index);
  void accumulate(size_t param_index, bool first_pass);
  void hand_off(size_t bucket);
  void reduce_bucket(size_t bucket, int tid);
  void enqueue_on_device(size_t bucket, int tid);
  void set_label(size_t bucket);
  size_t chunk_values(size_t bytes_per_value) const;  // values per allreduce
  void count_allreduce(size_t bucket, double seconds);
  int64_t wire_bytes(size_t bucket) const;  // bytes one allreduce of it sends
  void unpack_on_host(size_t bucket, int tid);
  void unpack_on_device(size_t bucket);
  void finish_pass();
  void reset_pass();
  void comm_loop();

  Communicator& comm_;
  nn::Backend& backend_;
  std::vector<nn::Parameter*> params_;
  nn::Optimizer& inner_;
  DistributedOptimizerConfig config_;
  int passes_per_step_ = 1;  // of the current step (see set_step_passes)
  float prescale_ = 1.0f, postscale_ = 1.0f;
  bool on_host_ = true;               // parameters are CPU tensors
  Communicator& grad_comm_;           // config.gradient_comm or comm_
  DeviceReducer* reducer_ = nullptr;  // buckets reduced in place on the device
  // One rank, k = 1, no compression, f = 1: reduction is the identity, so
  // nothing is packed, reduced or copied back.
  bool passthrough_ = false;

  std::vector<GradientBucket> buckets_;
  std::vector<BucketState> state_;
  std::vector<size_t> param_bucket_;   // bucket of each parameter
  std::vector<int64_t> param_offset_;  // element offset in that bucket
  std::vector<bool> announced_;        // in the current pass
  size_t announced_count_ = 0;
  int passes_done_ = 0;
  // Counters only the caller's thread touches.
  int64_t steps_ = 0;
  double exposed_seconds_ = 0.0, pack_seconds_ = 0.0;

  // Shared with the communication thread.
  mutable std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  size_t next_bucket_ = 0;  // next bucket to reduce
  // The last bucket is left to synchronize() (the thread was idle when it was
  // handed off).
  bool reduce_inline_ = false;
  int64_t label_step_ = 0;  // step number for the stall label
  bool stop_ = false;
  std::exception_ptr error_;
  DistributedOptimizerStats stats_;
  std::thread thread_;
};

}  // namespace lockstep::distributed
