#include "nn/grad_scaler.h"

#include <cmath>
#include <cstdint>

#include "common/error.h"

namespace lockstep::nn {
namespace {

bool positive_finite(double x) {
  return std::isfinite(x) && x > 0;
}

}  // namespace

GradScaler::GradScaler(GradScalerConfig config) : config_(config) {
  if (!positive_finite(config_.init_scale)) {
    fail_input("loss scale: initial scale ", config_.init_scale, " must be finite and > 0");
  }
  if (!positive_finite(config_.growth_factor) || !positive_finite(config_.backoff_factor)) {
    fail_input("loss scale: growth factor ", config_.growth_factor, " and backoff factor ",
               config_.backoff_factor, " must be finite and > 0");
  }
  if (config_.growth_interval < 1) {
    fail_input("loss scale: growth interval ", config_.growth_interval, " must be >= 1");
  }
  state_.scale = config_.init_scale;
}

bool GradScaler::update(bool found_non_finite) {
  if (found_non_finite) {
    state_.scale *= config_.backoff_factor;
    state_.growth_tracker = 0;
    ++skipped_;
    return false;
  }
  if (++state_.growth_tracker == config_.growth_interval) {
    // PyTorch keeps the old scale when growing would overflow float32.
    const float grown = state_.scale * config_.growth_factor;
    if (std::isfinite(grown)) state_.scale = grown;
    state_.growth_tracker = 0;
  }
  return true;
}

void GradScaler::set_state(const GradScalerState& state) {
  if (!positive_finite(state.scale) || state.growth_tracker < 0) {
    fail_input("loss scale state: scale ", state.scale, " must be finite and > 0 and growth ",
               "tracker ", state.growth_tracker, " >= 0");
  }
  state_ = state;
}

bool has_non_finite(Backend& backend, const std::vector<Parameter*>& params) {
  std::vector<ConstFloats> grads;
  grads.reserve(params.size());
  for (const Parameter* p : params) grads.push_back({p->grad.data(), p->grad.numel()});
  return backend.any_non_finite(grads);
}

}  // namespace lockstep::nn
