// DistributedOptimizer: wraps any nn::Optimizer so that every rank steps with
// the gradients averaged over all ranks (Horovod's DistributedOptimizer, with
// PyTorch DDP's fixed buckets). It counts backward passes and steps, packs
// each announced gradient into its bucket (BucketLayout, bucket_layout.h) and
// hands each full bucket to a ReductionStrategy (reduction_strategy.h): the
// DeviceReduction when the gradient communicator has a DeviceReducer and no
// compression is asked for, the HostReduction otherwise. Design notes and
// measurements: docs/gradient-reduction.md.
//
//   DistributedOptimizer dopt(comm, backend, model.parameters(), *sgd, config);
//   dopt.broadcast_parameters();                    // rank 0's weights + state
//   for each step:
//     for pass in 1..k:                             // k = backward_passes_per_step
//       model.forward(backend, x, ctx);
//       model.loss(backend, labels, 1.0f / (k * local_batch), true);
//       model.backward(backend, dopt.grad_ready_callback());
//     dopt.step(lr);                                // the whole step, below
//
// step(lr) is the one place a step is taken: reduce; with a GradScaler,
// unscale, look for inf/NaN on every rank and skip together; clip to
// grad_clip_norm; then inner.step(). Every factor (1/size, 1/scale, clip)
// is folded into the inner update's grad_scale.
//
// Gradient contract: what backward leaves in Parameter::grad is this rank's
// contribution to a mean (loss gradient scaled by 1 / (k * local_batch)).
// With op = average the reduced gradient is the sum over passes and ranks
// divided by the number of ranks; the 1/size is applied inside the inner
// optimizer's update (grad_scale) by step(), in a pass of its own by
// synchronize().
//
// Ordering: buckets are reduced strictly in index order on every rank, so
// every rank issues the same collectives in the same order by construction.
// Accumulation: passes 1..k-1 only add into the buckets; the k-th adds and
// reduces. One rank with k = 1, no compression and no predivision: nothing
// is packed or reduced and no thread is started.
//
// Threads: every method on one thread (the one that runs backward); the
// strategy may reduce on a communication thread of its own.
// Errors: a bad config is an InputError; announcing a k+1-th pass, a
// gradient twice, or synchronizing before the k-th pass has begun is a
// DistributedError; a communication error (or a 16-bit overflow) is
// rethrown by synchronize()/step() as a DistributedError on every rank, the
// step is not taken, and the next step starts clean.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "distributed/bucket_layout.h"
#include "distributed/communicator.h"
#include "distributed/compression.h"
#include "distributed/reduction_strategy.h"
#include "distributed/timeline.h"
#include "nn/backend.h"
#include "nn/grad_scaler.h"
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
  // MiB (host_reduction.h); 0: one allreduce per bucket.
  double allreduce_chunk_mb = 1.0;
  Compression compression = Compression::kNone;
  // Loss scaling (nn/grad_scaler.h); null: off. step() unscales by
  // 1 / scale, checks the reduced gradients for inf/NaN (one max allreduce
  // of a flag on the constructor's communicator, so the ranks skip
  // together), advances the scaler and skips the step when any was found.
  // With compression, a bucket whose 16-bit sum is not finite is left in
  // Parameter::grad as inf/NaN instead of throwing. Must outlive the
  // optimizer.
  nn::GradScaler* grad_scaler = nullptr;
  // Debug: a host bucket written between its hand-off and the end of its
  // reduction throws DistributedError (HostReductionConfig::verify_unchanged).
  bool verify_buckets = false;
  // Backward passes accumulated per step (Horovod's backward_passes_per_step).
  int backward_passes_per_step = 1;
  // Reduce buckets on a background thread during backward (true), or all in
  // synchronize() (false).
  bool overlap = true;
  // Clip the averaged (and unscaled) gradients to this global L2 norm (0:
  // off), after the reduction, so every rank clips by the same factor;
  // folded into the inner step's grad_scale.
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
  // Stops the communication thread (a bucket allreduce in progress is
  // finished first) and gives the gradients their own memory back.
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
  // backward_passes_per_step): an epoch's last, shorter group of batches,
  // whose loss the caller scales by 1 / (passes * local_batch). Every rank
  // alike, before the step's first pass; throws DistributedError otherwise.
  void set_step_passes(int passes);
  // True when the next (or current) backward pass is the one that reduces.
  bool will_reduce() const { return passes_done_ + 1 == passes_per_step_; }
  // Completed backward passes since the last step.
  int passes_done() const { return passes_done_; }

  // Completes the reduction and leaves the reduced gradients in every
  // Parameter::grad. Gradients not announced in the reducing pass (k = 1:
  // backward run without the callback) are taken from Parameter::grad.
  void synchronize();
  // synchronize() without the last multiplication: leaves the sums (times
  // 1 / gradient_predivide_factor) in Parameter::grad and returns the factor
  // that completes the reduction (f / size for average, 1 for sum).
  float reduce_gradients();
  // The step: reduce_gradients(); with a scaler, unscale, the non-finite
  // check (every rank agrees) and the scaler's update; clipping; then
  // inner.step(backend, lr, the product of the factors). Returns false when
  // the scaler skipped the step (no weight or optimizer state changed).
  bool step(double lr);

  // Every parameter value, every optimizer state tensor, the optimizer's
  // steps() and last_lr() from root to every rank. Collective. Throws
  // DistributedError on every rank when the ranks' models or optimizers
  // differ in shape.
  void broadcast_parameters(int root = 0);

  void set_timeline(Timeline* timeline);
  const DistributedOptimizerConfig& config() const { return config_; }
  const std::vector<GradientBucket>& buckets() const { return layout_->buckets(); }
  DistributedOptimizerStats stats() const;
  void reset_stats();

 private:
  void check_reduce_allowed() const;
  bool found_non_finite_on_any_rank();
  void finish_pass();
  void reset_pass();

  Communicator& comm_;
  nn::Backend& backend_;
  std::vector<nn::Parameter*> params_;
  nn::Optimizer& inner_;
  DistributedOptimizerConfig config_;
  int passes_per_step_ = 1;  // of the current step (see set_step_passes)
  float postscale_ = 1.0f;
  std::unique_ptr<BucketLayout> layout_;
  std::unique_ptr<ReductionStrategy> strategy_;  // null: one rank, nothing to reduce

  std::vector<bool> announced_;  // in the current pass
  std::vector<size_t> pending_;  // per bucket: gradients of this pass not announced yet
  size_t announced_count_ = 0;
  int passes_done_ = 0;
  int64_t steps_ = 0;
  double exposed_seconds_ = 0.0, pack_seconds_ = 0.0;
};

}  // namespace lockstep::distributed
