#include "distributed/distributed_optimizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "distributed/device_reducer.h"
#include "nn/error.h"
#include "nn/grad_clip.h"

namespace lockstep::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void validate(const DistributedOptimizerConfig& c) {
  if (c.op != ReduceOp::kAverage && c.op != ReduceOp::kSum) {
    fail_input("distributed optimizer: op ", to_string(c.op), " is not allowed (average or sum)");
  }
  if (!std::isfinite(c.gradient_predivide_factor) || c.gradient_predivide_factor <= 0) {
    fail_input("distributed optimizer: gradient_predivide_factor = ", c.gradient_predivide_factor,
               " must be > 0");
  }
  if (c.gradient_predivide_factor != 1.0 && c.op != ReduceOp::kAverage) {
    fail_input("distributed optimizer: gradient_predivide_factor needs op = average");
  }
  if (!std::isfinite(c.allreduce_chunk_mb) || c.allreduce_chunk_mb < 0) {
    fail_input("distributed optimizer: allreduce_chunk_mb = ", c.allreduce_chunk_mb,
               " must be >= 0");
  }
  if (c.backward_passes_per_step < 1) {
    fail_input("distributed optimizer: backward_passes_per_step = ", c.backward_passes_per_step,
               " must be >= 1");
  }
}

}  // namespace

DistributedOptimizer::DistributedOptimizer(Communicator& comm, nn::Backend& backend,
                                           const std::vector<nn::Parameter*>& params,
                                           nn::Optimizer& inner, DistributedOptimizerConfig config)
    : comm_(comm),
      backend_(backend),
      params_(params),
      inner_(inner),
      config_(config),
      grad_comm_(config.gradient_comm != nullptr ? *config.gradient_comm : comm) {
  validate(config_);
  passes_per_step_ = config_.backward_passes_per_step;
  passthrough_ = grad_comm_.size() == 1 && passes_per_step_ == 1 &&
                 config_.compression == Compression::kNone &&
                 config_.gradient_predivide_factor == 1.0;
  const double f = config_.gradient_predivide_factor;
  prescale_ = static_cast<float>(1.0 / f);
  postscale_ = config_.op == ReduceOp::kAverage ? static_cast<float>(f / grad_comm_.size()) : 1.0f;
  on_host_ = backend_.device() == nn::Device::kCpu;
  if (!passthrough_ && config_.compression == Compression::kNone) {
    reducer_ = grad_comm_.device_reducer();
  }

  std::vector<int64_t> numels;
  for (const nn::Parameter* p : params_) {
    if (p->value.device() != backend_.device() || p->grad.device() != backend_.device() ||
        p->grad.numel() != p->value.numel()) {
      fail_input("distributed optimizer: parameter ", p->name, " (",
                 nn::to_string(p->value.device()),
                 ") must have a gradient of the same size on the backend's device (",
                 nn::to_string(backend_.device()), ")");
    }
    numels.push_back(p->value.numel());
  }
  buckets_ = assign_buckets(numels, config_.first_bucket_mb, config_.bucket_cap_mb);
  state_ = std::vector<BucketState>(buckets_.size());
  param_bucket_.resize(params_.size());
  param_offset_.resize(params_.size());
  // Gradients kept in the buckets (see "Gradients in the buckets" in the
  // header): host tensors, no accumulation, reduced by MPI.
  const bool views = !passthrough_ && on_host_ && !reducer_ && passes_per_step_ == 1;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    BucketState& s = state_[b];
    if (!passthrough_) {
      s.buffer = nn::Tensor({buckets_[b].numel}, backend_.device());
      if (!on_host_ && !reducer_) s.host = nn::Tensor({buckets_[b].numel}, nn::Device::kCpu);
      if (config_.compression != Compression::kNone) {
        s.wire.resize(static_cast<size_t>(buckets_[b].numel));
      }
    }
    s.pack_name = "pack bucket " + std::to_string(b);
    s.allreduce_name = "allreduce bucket " + std::to_string(b);
    s.unpack_name = "unpack bucket " + std::to_string(b);
    for (size_t j = 0; j < buckets_[b].params.size(); ++j) {
      const size_t i = buckets_[b].params[j];
      param_bucket_[i] = b;
      param_offset_[i] = buckets_[b].offsets[j];
      if (views && params_[i]->grad.numel() > 0) {
        nn::Tensor& grad = params_[i]->grad;
        float* home = s.buffer.data() + buckets_[b].offsets[j];
        std::memcpy(home, grad.data(), static_cast<size_t>(grad.numel()) * sizeof(float));
        grad = nn::Tensor::view(home, grad.shape(), nn::Device::kCpu);
      }
    }
  }
  announced_.assign(params_.size(), false);
  reset_pass();
  // Nothing to reduce yet: the thread waits for bucket 0.
  next_bucket_ = 0;
  if (config_.overlap && !passthrough_) thread_ = std::thread([this] { comm_loop(); });
}

DistributedOptimizer::~DistributedOptimizer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Gradients kept in the buckets get memory of their own again: the model
  // outlives this object.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (in_bucket(i)) params_[i]->grad = params_[i]->grad.clone();
  }
}

float* DistributedOptimizer::bucket_slot(size_t i) {
  BucketState& s = state_[param_bucket_[i]];
  return s.buffer.empty() ? nullptr : s.buffer.data() + param_offset_[i];
}

bool DistributedOptimizer::in_bucket(size_t i) {
  return params_[i]->grad.is_view() && params_[i]->grad.data() == bucket_slot(i);
}

void DistributedOptimizer::reset_pass() {
  announced_.assign(params_.size(), false);
  announced_count_ = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) state_[b].pending = buckets_[b].params.size();
}

void DistributedOptimizer::accumulate(size_t i, bool first_pass) {
  const BucketState& s = state_[param_bucket_[i]];
  TimelineSpan span(config_.timeline, s.pack_name, "pack");
  if (in_bucket(i)) return;  // backward wrote it there (the span marks it ready)
  const nn::Tensor& grad = params_[i]->grad;
  float* dst = bucket_slot(i);
  if (first_pass) {
    backend_.copy(grad.numel(), grad.data(), dst);
  } else {
    backend_.axpy(grad.numel(), 1.0f, grad.data(), dst);
  }
}

void DistributedOptimizer::on_grad_ready(size_t i) {
  if (i >= params_.size()) {
    throw DistributedError(
        detail::concat("gradient ready for parameter ", i, " of ", params_.size()));
  }
  if (passes_done_ >= passes_per_step_) {
    if (passes_per_step_ != config_.backward_passes_per_step) {
      throw DistributedError(detail::concat("more than the ", passes_per_step_,
                                            " backward passes set for this step before step()"));
    }
    throw DistributedError(detail::concat(
        "more than backward_passes_per_step = ", passes_per_step_,
        " backward passes before step(): call step() (or synchronize()) after every ",
        passes_per_step_, " passes"));
  }
  if (announced_[i]) {
    throw DistributedError(
        detail::concat("gradient of ", params_[i]->name, " announced twice in one backward pass"));
  }
  const auto start = Clock::now();
  announced_[i] = true;
  ++announced_count_;
  if (!passthrough_) {
    accumulate(i, passes_done_ == 0);
    const size_t b = param_bucket_[i];
    const bool reducing = passes_done_ + 1 == passes_per_step_;
    if (--state_[b].pending == 0 && reducing) hand_off(b);
  }
  pack_seconds_ += seconds_since(start);
  if (announced_count_ == params_.size()) finish_pass();
}

void DistributedOptimizer::set_step_passes(int passes) {
  const int k = config_.backward_passes_per_step;
  if (passes < 1 || passes > k) {
    throw DistributedError(detail::concat("set_step_passes(", passes,
                                          "): a step takes 1 to backward_passes_per_step = ", k,
                                          " backward passes"));
  }
  if (passes_done_ != 0 || announced_count_ != 0) {
    throw DistributedError(detail::concat("set_step_passes(", passes, ") after ", passes_done_,
                                          " backward passes of this step: call it before the "
                                          "step's first pass"));
  }
  passes_per_step_ = passes;
}

void DistributedOptimizer::finish_pass() {
  ++passes_done_;
  if (passes_done_ < passes_per_step_) reset_pass();
}

void DistributedOptimizer::hand_off(size_t b) {
  BucketState& s = state_[b];
  if (reducer_) {
    // Queued after the pack; the reduction waits for it on the device.
    if (prescale_ != 1.0f) backend_.scale(buckets_[b].numel, prescale_, s.buffer.data());
    reducer_->mark_ready(b, backend_.native_stream());
  } else {
    backend_.synchronize();  // the packed buffer is complete before another thread reads it
    if (!on_host_) s.host.copy_from(s.buffer);
  }
  if (!config_.overlap) return;  // synchronize() reduces it
  {
    std::lock_guard<std::mutex> lock(mutex_);
    label_step_ = inner_.steps() + 1;
    // The last bucket with the communication thread idle: nothing is left to
    // overlap it with, so synchronize() reduces it on this thread (no wake-up
    // of the communication thread and back).
    if (!reducer_ && b + 1 == state_.size() && next_bucket_ == b) {
      reduce_inline_ = true;
      return;
    }
    s.ready = true;
  }
  work_cv_.notify_one();
}

float DistributedOptimizer::reduce_gradients() {
  const auto start = Clock::now();
  TimelineSpan span(config_.timeline, "synchronize", "communication wait");
  // With k > 1 the reducing pass must have begun (announced gradients);
  // with k = 1 a backward run without the callback is allowed.
  const bool reducing_pass_begun =
      passes_done_ + 1 == passes_per_step_ && (announced_count_ > 0 || passes_per_step_ == 1);
  if (passes_done_ < passes_per_step_ && !reducing_pass_begun) {
    throw DistributedError(detail::concat("synchronize() after ", passes_done_, " of ",
                                          passes_per_step_,
                                          " backward passes (backward_passes_per_step)"));
  }
  if (passes_done_ < passes_per_step_) {
    // The reducing pass is incomplete: take the gradients nobody announced
    // (backward without the callback) from Parameter::grad, in announce order.
    for (size_t i = params_.size(); i-- > 0;) {
      if (!announced_[i]) on_grad_ready(i);
    }
  }
  std::exception_ptr error;
  if (passthrough_) {
    // One rank, one pass, nothing to round: the gradients are already final.
  } else if (config_.overlap) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (reduce_inline_) {
      // The communication thread is idle and waits for a bucket that is
      // never marked ready: the last bucket is this thread's to reduce.
      reduce_inline_ = false;
      lock.unlock();
      const size_t b = state_.size() - 1;
      try {
        reduce_bucket(b, Timeline::kMainThread);
        if (on_host_) unpack_on_host(b, Timeline::kMainThread);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      next_bucket_ = state_.size();
    }
    done_cv_.wait(lock, [&] { return next_bucket_ == state_.size(); });
    if (!error) error = error_;
    error_ = nullptr;
    next_bucket_ = 0;
    for (BucketState& s : state_) s.ready = false;
  } else {
    try {
      for (size_t b = 0; b < buckets_.size(); ++b) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          label_step_ = inner_.steps() + 1;
        }
        reduce_bucket(b, Timeline::kMainThread);
        if (on_host_ && !reducer_) unpack_on_host(b, Timeline::kMainThread);
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!error && reducer_) {
    try {
      reducer_->finish(backend_.native_stream());  // host waits here, once per step
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!error && (!on_host_ || reducer_) && !passthrough_) {
    for (size_t b = 0; b < buckets_.size(); ++b) unpack_on_device(b);
    if (!reducer_) backend_.synchronize();  // the host copies are free for the next step
  }
  passes_done_ = 0;
  passes_per_step_ = config_.backward_passes_per_step;
  reset_pass();
  ++steps_;
  exposed_seconds_ += seconds_since(start);
  if (error) std::rethrow_exception(error);
  return postscale_;
}

void DistributedOptimizer::synchronize() {
  const float scale = reduce_gradients();
  if (scale == 1.0f) return;
  TimelineSpan span(config_.timeline, "average", "unpack");
  for (nn::Parameter* p : params_) backend_.scale(p->grad.numel(), scale, p->grad.data());
}

void DistributedOptimizer::step(float lr) {
  float scale = reduce_gradients();
  if (config_.grad_clip_norm > 0) {
    scale *= nn::clip_coefficient(nn::global_grad_norm(params_, scale), config_.grad_clip_norm);
  }
  TimelineSpan span(config_.timeline, "inner optimizer step", "optimizer");
  inner_.step(backend_, lr, scale);
}

void DistributedOptimizer::broadcast_parameters(int root) {
  if (passes_done_ != 0 || announced_count_ != 0) {
    throw DistributedError(
        "broadcast_parameters() during a step: call it before backward or after step()");
  }
  std::vector<nn::StateTensor> state = inner_.state();
  // Check first, on every rank together, that the shapes agree.
  int64_t mine[3] = {static_cast<int64_t>(params_.size()), 0, static_cast<int64_t>(state.size())};
  for (const nn::Parameter* p : params_) mine[1] += p->value.numel();
  for (const nn::StateTensor& s : state) mine[1] += s.tensor->numel();
  int64_t theirs[3] = {mine[0], mine[1], mine[2]};
  comm_.broadcast_values(std::span<int64_t>(theirs, 3), root);
  int64_t differ = (mine[0] != theirs[0] || mine[1] != theirs[1] || mine[2] != theirs[2]) ? 1 : 0;
  comm_.allreduce(std::span<int64_t>(&differ, 1), ReduceOp::kMax);
  if (differ != 0) {
    throw DistributedError(detail::concat(
        "broadcast_parameters: the ranks built different models or optimizers (rank ", comm_.rank(),
        ": ", mine[0], " parameters, ", mine[2], " optimizer state tensors, ", mine[1],
        " values; rank ", root, ": ", theirs[0], ", ", theirs[2], ", ", theirs[1], ")"));
  }
  auto broadcast_tensor = [&](nn::Tensor& t) {
    if (t.device() == nn::Device::kCpu) {
      comm_.broadcast_values(t.span(), root);
      return;
    }
    nn::Tensor host(t.shape(), nn::Device::kCpu);
    host.copy_from(t);
    comm_.broadcast_values(host.span(), root);
    t.copy_from(host);
  };
  comm_.set_stall_label("broadcast_parameters");
  for (nn::Parameter* p : params_) broadcast_tensor(p->value);
  for (nn::StateTensor& s : state) broadcast_tensor(*s.tensor);
  int64_t steps = inner_.steps();
  float last_lr = inner_.last_lr();
  comm_.broadcast_values(std::span<int64_t>(&steps, 1), root);
  comm_.broadcast_values(std::span<float>(&last_lr, 1), root);
  inner_.set_steps(steps);
  inner_.set_last_lr(last_lr);
}

DistributedOptimizerStats DistributedOptimizer::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  DistributedOptimizerStats out = stats_;
  out.steps = steps_;
  out.exposed_seconds = exposed_seconds_;
  out.pack_seconds = pack_seconds_;
  return out;
}

void DistributedOptimizer::reset_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_ = {};
  steps_ = 0;
  exposed_seconds_ = pack_seconds_ = 0.0;
}

}  // namespace lockstep::distributed
