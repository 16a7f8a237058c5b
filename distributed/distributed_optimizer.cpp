#include "distributed/distributed_optimizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "nn/error.h"

namespace lockstep::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int64_t mib_to_bytes(double mb, const char* key) {
  if (!std::isfinite(mb) || mb < 0)
    fail_input("distributed optimizer: ", key, " = ", mb, " must be >= 0");
  return static_cast<int64_t>(mb * 1024.0 * 1024.0);
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
  if (c.backward_passes_per_step < 1) {
    fail_input("distributed optimizer: backward_passes_per_step = ", c.backward_passes_per_step,
               " must be >= 1");
  }
}

}  // namespace

std::vector<GradientBucket> assign_buckets(const std::vector<int64_t>& numels,
                                           double first_bucket_mb, double bucket_cap_mb) {
  const int64_t cap = mib_to_bytes(bucket_cap_mb, "bucket_cap_mb");
  const int64_t first = std::min(mib_to_bytes(first_bucket_mb, "first_bucket_mb"), cap);
  std::vector<GradientBucket> buckets;
  GradientBucket current;
  for (size_t i = numels.size(); i-- > 0;) {
    const int64_t limit = buckets.empty() ? first : cap;
    const int64_t bytes = numels[i] * static_cast<int64_t>(sizeof(float));
    if (!current.params.empty() && (cap == 0 || current.bytes() + bytes > limit)) {
      buckets.push_back(std::move(current));
      current = {};
    }
    current.params.push_back(i);
    current.offsets.push_back(current.numel);
    current.numel += numels[i];
  }
  if (!current.params.empty()) buckets.push_back(std::move(current));
  return buckets;
}

DistributedOptimizer::DistributedOptimizer(Communicator& comm, nn::Backend& backend,
                                           const std::vector<nn::Parameter*>& params,
                                           nn::Optimizer& inner, DistributedOptimizerConfig config)
    : comm_(comm), backend_(backend), params_(params), inner_(inner), config_(config) {
  validate(config_);
  passes_per_step_ = config_.backward_passes_per_step;
  passthrough_ = comm_.size() == 1 && passes_per_step_ == 1 &&
                 config_.compression == Compression::kNone &&
                 config_.gradient_predivide_factor == 1.0;
  const double f = config_.gradient_predivide_factor;
  prescale_ = static_cast<float>(1.0 / f);
  postscale_ = config_.op == ReduceOp::kAverage ? static_cast<float>(f / comm_.size()) : 1.0f;
  on_host_ = backend_.device() == nn::Device::kCpu;

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
  for (size_t b = 0; b < buckets_.size(); ++b) {
    BucketState& s = state_[b];
    if (!passthrough_) {
      s.buffer = nn::Tensor({buckets_[b].numel}, backend_.device());
      if (!on_host_) s.host = nn::Tensor({buckets_[b].numel}, nn::Device::kCpu);
    }
    s.pack_name = "pack bucket " + std::to_string(b);
    s.allreduce_name = "allreduce bucket " + std::to_string(b);
    s.unpack_name = "unpack bucket " + std::to_string(b);
    for (size_t j = 0; j < buckets_[b].params.size(); ++j) {
      param_bucket_[buckets_[b].params[j]] = b;
      param_offset_[buckets_[b].params[j]] = buckets_[b].offsets[j];
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
}

void DistributedOptimizer::reset_pass() {
  announced_.assign(params_.size(), false);
  announced_count_ = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) state_[b].pending = buckets_[b].params.size();
}

void DistributedOptimizer::accumulate(size_t i, bool first_pass) {
  const BucketState& s = state_[param_bucket_[i]];
  TimelineSpan span(config_.timeline, s.pack_name, "pack");
  const nn::Tensor& grad = params_[i]->grad;
  float* dst = state_[param_bucket_[i]].buffer.data() + param_offset_[i];
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

void DistributedOptimizer::finish_pass() {
  ++passes_done_;
  if (passes_done_ < passes_per_step_) reset_pass();
}

void DistributedOptimizer::hand_off(size_t b) {
  backend_.synchronize();  // the packed buffer is complete before another thread reads it
  BucketState& s = state_[b];
  if (!on_host_) s.host.copy_from(s.buffer);
  if (!config_.overlap) return;  // synchronize() reduces it
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s.ready = true;
    label_step_ = inner_.steps() + 1;
  }
  work_cv_.notify_one();
}

void DistributedOptimizer::comm_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] {
      return stop_ || (next_bucket_ < state_.size() && state_[next_bucket_].ready);
    });
    if (stop_) return;
    const size_t b = next_bucket_;
    lock.unlock();
    std::exception_ptr error;
    try {
      reduce_bucket(b, Timeline::kCommThread);
      if (on_host_) unpack_on_host(b);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) {
      error_ = error;
      next_bucket_ = state_.size();  // the rest of this step is abandoned
    } else {
      ++next_bucket_;
    }
    if (next_bucket_ == state_.size()) done_cv_.notify_all();
  }
}

// Called on the communication thread (overlap) or in synchronize(): only
// host memory, no backend calls.
void DistributedOptimizer::reduce_bucket(size_t b, int tid) {
  BucketState& s = state_[b];
  std::span<float> data(s.host_data(), static_cast<size_t>(buckets_[b].numel));
  if (prescale_ != 1.0f) {
    for (float& v : data) v *= prescale_;
  }
  const Compression compression = config_.compression;
  float local_max = 0.0f;
  if (compression != Compression::kNone) {
    local_max = max_abs(data);
    round_to_16bit(data, compression);
  }
  int64_t step = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    step = label_step_;
  }
  comm_.set_stall_label(detail::concat("step ", step, " bucket ", b));
  const auto start = Clock::now();
  {
    TimelineSpan span(config_.timeline, s.allreduce_name, "allreduce", tid);
    comm_.allreduce(data, ReduceOp::kSum);
  }
  const double elapsed = seconds_since(start);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.allreduce_seconds += elapsed;
    stats_.bytes_reduced += buckets_[b].bytes();
    ++stats_.allreduces;
  }
  if (compression == Compression::kNone) return;
  const float sum_max = max_abs(data);
  if (round_to_16bit(data, compression)) return;
  // Every rank sees the non-finite sum, so every rank throws here together.
  const std::string format = to_string(compression);
  float rounded_max = local_max;
  round_to_16bit(std::span<float>(&rounded_max, 1), compression);
  const bool local = !std::isfinite(rounded_max);
  const float shown = local ? local_max : sum_max;
  if (std::isnan(shown) || (compression == Compression::kBf16)) {
    throw DistributedError(detail::concat(
        "non-finite gradient in bucket ", b, " (", format, " compression, max |g| = ", shown,
        local ? " on this rank" : " in the sum", "): the loss diverged; lower the learning rate"));
  }
  throw DistributedError(
      detail::concat("fp16 gradient overflow in bucket ", b, " (max |g| = ", shown, " > 65504",
                     local ? "" : detail::concat(" in the sum over ", comm_.size(), " ranks"),
                     "): use bf16, gradient_predivide_factor, or a smaller lr"));
}

void DistributedOptimizer::unpack_on_host(size_t b) {
  BucketState& s = state_[b];
  const GradientBucket& bucket = buckets_[b];
  const auto start = Clock::now();
  TimelineSpan span(config_.timeline, s.unpack_name, "unpack",
                    config_.overlap ? Timeline::kCommThread : Timeline::kMainThread);
  const float* data = s.host_data();
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    nn::Tensor& grad = params_[bucket.params[j]]->grad;
    const float* src = data + bucket.offsets[j];
    float* dst = grad.data();
    const int64_t n = grad.numel();
    if (postscale_ == 1.0f) {
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    } else {
      for (int64_t k = 0; k < n; ++k) dst[k] = src[k] * postscale_;
    }
  }
  const double elapsed = seconds_since(start);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.unpack_seconds += elapsed;
}

void DistributedOptimizer::unpack_on_device(size_t b) {
  BucketState& s = state_[b];
  const GradientBucket& bucket = buckets_[b];
  const auto start = Clock::now();
  TimelineSpan span(config_.timeline, s.unpack_name, "unpack");
  s.buffer.copy_from(s.host);
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    nn::Tensor& grad = params_[bucket.params[j]]->grad;
    backend_.copy(grad.numel(), s.buffer.data() + bucket.offsets[j], grad.data());
    if (postscale_ != 1.0f) backend_.scale(grad.numel(), postscale_, grad.data());
  }
  const double elapsed = seconds_since(start);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.unpack_seconds += elapsed;
}

void DistributedOptimizer::synchronize() {
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
    done_cv_.wait(lock, [&] { return next_bucket_ == state_.size(); });
    error = error_;
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
        if (on_host_) unpack_on_host(b);
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!error && !on_host_ && !passthrough_) {
    for (size_t b = 0; b < buckets_.size(); ++b) unpack_on_device(b);
    backend_.synchronize();
  }
  passes_done_ = 0;
  reset_pass();
  ++steps_;
  exposed_seconds_ += seconds_since(start);
  if (error) std::rethrow_exception(error);
}

void DistributedOptimizer::step(float lr) {
  synchronize();
  TimelineSpan span(config_.timeline, "inner optimizer step", "optimizer");
  inner_.step(backend_, lr);
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
