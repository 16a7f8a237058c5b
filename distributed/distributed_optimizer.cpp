#include "distributed/distributed_optimizer.h"

#include <cmath>

#include "common/clock.h"
#include "common/error.h"
#include "distributed/device_reducer.h"
#include "distributed/device_reduction.h"
#include "distributed/host_reduction.h"
#include "nn/grad_clip.h"

namespace lockstep::distributed {
namespace {

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

void check_parameters(const std::vector<nn::Parameter*>& params, nn::Device device) {
  for (const nn::Parameter* p : params) {
    if (p->value.device() != device || p->grad.device() != device ||
        p->grad.numel() != p->value.numel()) {
      fail_input("distributed optimizer: parameter ", p->name, " (",
                 nn::to_string(p->value.device()),
                 ") must have a gradient of the same size on the backend's device (",
                 nn::to_string(device), ")");
    }
  }
}

}  // namespace

DistributedOptimizer::DistributedOptimizer(Communicator& comm, nn::Backend& backend,
                                           const std::vector<nn::Parameter*>& params,
                                           nn::Optimizer& inner, DistributedOptimizerConfig config)
    : comm_(comm), backend_(backend), params_(params), inner_(inner), config_(config) {
  validate(config_);
  Communicator& grad_comm = config_.gradient_comm != nullptr ? *config_.gradient_comm : comm;
  passes_per_step_ = config_.backward_passes_per_step;
  const double f = config_.gradient_predivide_factor;
  const auto prescale = static_cast<float>(1.0 / f);
  postscale_ = config_.op == ReduceOp::kAverage ? static_cast<float>(f / grad_comm.size()) : 1.0f;
  // One rank, one pass, nothing to round: the reduction is the identity.
  const bool passthrough = grad_comm.size() == 1 && passes_per_step_ == 1 &&
                           config_.compression == Compression::kNone && f == 1.0;
  DeviceReducer* reducer = nullptr;
  if (!passthrough && config_.compression == Compression::kNone) {
    reducer = grad_comm.device_reducer();
  }
  check_parameters(params_, backend_.device());
  // Gradients kept in the buckets: host tensors, no accumulation, reduced by MPI.
  const bool views =
      !passthrough && backend_.device() == nn::Device::kCpu && !reducer && passes_per_step_ == 1;
  layout_ = std::make_unique<BucketLayout>(params_, backend_.device(), config_.first_bucket_mb,
                                           config_.bucket_cap_mb, !passthrough, views);
  if (reducer) {
    strategy_ = std::make_unique<DeviceReduction>(*layout_, grad_comm, *reducer, backend_,
                                                  config_.overlap, prescale);
  } else if (!passthrough) {
    strategy_ = std::make_unique<HostReduction>(
        *layout_, grad_comm, backend_,
        HostReductionConfig{config_.overlap, config_.allreduce_chunk_mb, config_.compression,
                            prescale, config_.grad_scaler != nullptr, config_.verify_buckets});
  }
  set_timeline(config_.timeline);
  reset_pass();
}

// The strategy (and its thread) goes before the layout gives the gradients back.
DistributedOptimizer::~DistributedOptimizer() {
  strategy_.reset();
}

void DistributedOptimizer::set_timeline(Timeline* timeline) {
  config_.timeline = timeline;
  if (strategy_) strategy_->set_timeline(timeline);
}

void DistributedOptimizer::reset_pass() {
  announced_.assign(params_.size(), false);
  announced_count_ = 0;
  pending_.resize(layout_->size());
  for (size_t b = 0; b < layout_->size(); ++b) pending_[b] = layout_->bucket(b).params.size();
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
  if (strategy_) {
    const size_t b = layout_->bucket_of(i);
    {
      TimelineSpan span(config_.timeline, layout_->names(b).pack, "pack");
      layout_->pack(i, passes_done_ == 0, backend_);
    }
    if (--pending_[b] == 0 && will_reduce()) strategy_->bucket_ready(b, inner_.steps() + 1);
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

void DistributedOptimizer::check_reduce_allowed() const {
  // With k > 1 the reducing pass must have begun (announced gradients);
  // with k = 1 a backward run without the callback is allowed.
  const bool reducing_pass_begun =
      passes_done_ + 1 == passes_per_step_ && (announced_count_ > 0 || passes_per_step_ == 1);
  if (passes_done_ < passes_per_step_ && !reducing_pass_begun) {
    throw DistributedError(detail::concat("synchronize() after ", passes_done_, " of ",
                                          passes_per_step_,
                                          " backward passes (backward_passes_per_step)"));
  }
}

float DistributedOptimizer::reduce_gradients() {
  const auto start = Clock::now();
  TimelineSpan span(config_.timeline, "synchronize", "communication wait");
  check_reduce_allowed();
  if (passes_done_ < passes_per_step_) {
    // The reducing pass is incomplete: take the gradients nobody announced
    // (backward without the callback) from Parameter::grad, in announce order.
    for (size_t i = params_.size(); i-- > 0;) {
      if (!announced_[i]) on_grad_ready(i);
    }
  }
  std::exception_ptr error;
  if (strategy_) {
    try {
      strategy_->finish(inner_.steps() + 1);
    } catch (...) {
      error = std::current_exception();
    }
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

bool DistributedOptimizer::found_non_finite_on_any_rank() {
  TimelineSpan span(config_.timeline, "non-finite gradient check", "optimizer");
  int64_t found = nn::has_non_finite(backend_, params_) ? 1 : 0;
  if (comm_.size() > 1) {
    comm_.set_stall_label("loss scaling: non-finite gradient flag");
    comm_.allreduce(std::span<int64_t>(&found, 1), ReduceOp::kMax);
  }
  return found != 0;
}

bool DistributedOptimizer::step(double lr) {
  float scale = reduce_gradients();
  if (nn::GradScaler* scaler = config_.grad_scaler) {
    scale *= scaler->unscale_factor();
    if (!scaler->update(found_non_finite_on_any_rank())) {
      TimelineSpan span(config_.timeline, "step skipped (inf/NaN gradients)", "optimizer");
      return false;
    }
  }
  if (config_.grad_clip_norm > 0) {
    scale *= nn::clip_coefficient(nn::global_grad_norm(params_, scale), config_.grad_clip_norm);
  }
  TimelineSpan span(config_.timeline, "inner optimizer step", "optimizer");
  inner_.step(backend_, lr, scale);
  return true;
}

DistributedOptimizerStats DistributedOptimizer::stats() const {
  DistributedOptimizerStats out;
  if (strategy_) {
    const ReductionStats r = strategy_->stats();
    out.allreduces = r.allreduces;
    out.bytes_reduced = r.bytes_reduced;
    out.allreduce_seconds = r.allreduce_seconds;
    out.unpack_seconds = r.unpack_seconds;
  }
  out.steps = steps_;
  out.exposed_seconds = exposed_seconds_;
  out.pack_seconds = pack_seconds_;
  return out;
}

void DistributedOptimizer::reset_stats() {
  if (strategy_) strategy_->reset_stats();
  steps_ = 0;
  exposed_seconds_ = pack_seconds_ = 0.0;
}

}  // namespace lockstep::distributed
