#include "nn/optimizer.h"

#include <initializer_list>
#include <utility>

#include "common/error.h"

namespace lockstep::nn {
namespace {

// The weight decay of parameter p under config c.
float decay_of(const OptimizerConfig& c, const Parameter& p) {
  return c.decay_bn_and_bias || p.value.ndim() > 1 ? c.weight_decay : 0.0f;
}

// Per-parameter state tensors, created zero on the parameter's device.
std::vector<Tensor> zeros_like(const std::vector<Parameter*>& params, Device device) {
  std::vector<Tensor> out;
  out.reserve(params.size());
  for (const Parameter* p : params) out.emplace_back(p->value.shape(), device);
  return out;
}

// The state tensors of `params`, parameter by parameter: for each parameter
// i, one entry (params[i]->name + suffix, &tensors[i]) per (tensors, suffix)
// of `kinds` that has an element i.
std::vector<StateTensor> named_state(
    const std::vector<Parameter*>& params,
    std::initializer_list<std::pair<std::vector<Tensor>*, const char*>> kinds) {
  std::vector<StateTensor> out;
  for (size_t i = 0; i < params.size(); ++i) {
    for (const auto& [tensors, suffix] : kinds) {
      if (i < tensors->size()) out.push_back({params[i]->name + suffix, &(*tensors)[i]});
    }
  }
  return out;
}

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerConfig& c, const std::vector<Parameter*>& params, Device device)
      : config_(c), params_(params) {
    if (c.momentum < 0 || c.dampening < 0 || c.weight_decay < 0) {
      fail_input("sgd: momentum, dampening and weight_decay must be >= 0");
    }
    if (c.nesterov && (c.momentum <= 0 || c.dampening != 0)) {
      fail_input("sgd: nesterov needs momentum > 0 and dampening = 0");
    }
    if (c.momentum != 0) velocity_ = zeros_like(params, device);
  }

  std::string describe() const override {
    return detail::concat("sgd(momentum=", config_.momentum, ", dampening=", config_.dampening,
                          ", weight_decay=", config_.weight_decay,
                          ", nesterov=", config_.nesterov ? "true" : "false", ")");
  }

  void step(Backend& backend, double lr, float grad_scale) override {
    SgdParams p;
    p.lr = static_cast<float>(lr);
    p.grad_scale = grad_scale;
    p.momentum = config_.momentum;
    // Momentum correction: the buffer holds gradients scaled for the old lr.
    if (config_.momentum_correction && last_lr_ > 0 && lr != last_lr_) {
      p.momentum = static_cast<float>(p.momentum * (lr / last_lr_));
    }
    p.dampening = config_.dampening;
    p.nesterov = config_.nesterov;
    p.first_step = steps_ == 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      Parameter& w = *params_[i];
      p.weight_decay = decay_of(config_, w);
      backend.sgd_update(w.value.numel(), p, w.value.data(), w.grad.data(),
                         velocity_.empty() ? nullptr : velocity_[i].data());
    }
    ++steps_;
    last_lr_ = lr;
  }

  std::vector<StateTensor> state() override {
    return named_state(params_, {{&velocity_, ".momentum_buffer"}});
  }

 private:
  OptimizerConfig config_;
  std::vector<Parameter*> params_;
  std::vector<Tensor> velocity_;
};

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerConfig& c, const std::vector<Parameter*>& params, Device device)
      : config_(c),
        params_(params),
        m_(zeros_like(params, device)),
        v_(zeros_like(params, device)) {
    if (!(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1 && c.eps > 0)) {
      fail_input(to_string(c.kind), ": need 0 <= beta1, beta2 < 1 and eps > 0");
    }
    if (c.weight_decay < 0) fail_input(to_string(c.kind), ": weight_decay must be >= 0");
  }

  std::string describe() const override {
    return detail::concat(to_string(config_.kind), "(beta1=", config_.beta1,
                          ", beta2=", config_.beta2, ", eps=", config_.eps,
                          ", weight_decay=", config_.weight_decay, ")");
  }

  void step(Backend& backend, double lr, float grad_scale) override {
    AdamParams p;
    p.lr = lr;
    p.grad_scale = grad_scale;
    p.beta1 = config_.beta1;
    p.beta2 = config_.beta2;
    p.eps = config_.eps;
    p.step = steps_ + 1;
    const bool decoupled = config_.kind == OptimizerKind::kAdamW;
    for (size_t i = 0; i < params_.size(); ++i) {
      Parameter& w = *params_[i];
      const float decay = decay_of(config_, w);
      // AdamW: w *= 1 - lr wd first, then Adam without L2.
      if (decoupled && decay != 0.0f) {
        backend.scale(w.value.numel(), static_cast<float>(1.0 - lr * static_cast<double>(decay)),
                      w.value.data());
      }
      p.weight_decay = decoupled ? 0.0f : decay;
      backend.adam_update(w.value.numel(), p, w.value.data(), w.grad.data(), m_[i].data(),
                          v_[i].data());
    }
    ++steps_;
    last_lr_ = lr;
  }

  std::vector<StateTensor> state() override {
    return named_state(params_, {{&m_, ".exp_avg"}, {&v_, ".exp_avg_sq"}});
  }

 private:
  OptimizerConfig config_;
  std::vector<Parameter*> params_;
  std::vector<Tensor> m_, v_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config,
                                          const std::vector<Parameter*>& params, Device device) {
  switch (config.kind) {
    case OptimizerKind::kSgd:
      return std::make_unique<Sgd>(config, params, device);
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW:
      return std::make_unique<Adam>(config, params, device);
  }
  fail_input("unknown optimizer kind ", static_cast<int>(config.kind));
}

}  // namespace lockstep::nn
