// GradScaler: dynamic loss scaling for fp16 training, with PyTorch's
// torch.amp.GradScaler semantics.
//
//   float gs = scaler.loss_factor();         // multiply the loss by scale()
//   model.loss(backend, labels, gs / (k * batch), true);  backward; allreduce
//   if (scaler.update(has_non_finite(backend, params)))  // true: step
//     optimizer.step(backend, lr, average * scaler.unscale_factor());
//
// In training, DistributedOptimizer::step does the last two lines (and the
// ranks' agreement on skipping, and clipping) when its config holds the
// scaler (distributed/distributed_optimizer.h).
//
// update(found_non_finite): a step whose reduced gradients hold an infinity
// or NaN is skipped (no weight update, no optimizer state change), the scale
// is multiplied by backoff_factor and the growth tracker resets to 0; a
// clean step counts one, and after growth_interval consecutive clean steps
// the scale is multiplied by growth_factor and the tracker resets. Scales are
// float32, as PyTorch's; with power-of-two factors the unscaled gradients
// equal the unscaled-loss gradients bit for bit (barring underflow).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/backend.h"
#include "nn/layer.h"

namespace lockstep::nn {

struct GradScalerConfig {
  float init_scale = 65536.0f;
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
};

// The state a checkpoint holds; restoring it resumes bit-exactly.
struct GradScalerState {
  float scale = 65536.0f;
  int64_t growth_tracker = 0;  // consecutive clean steps since the last change
};

class GradScaler {
 public:
  // Throws InputError on a non-positive or non-finite factor or scale, or
  // growth_interval < 1.
  explicit GradScaler(GradScalerConfig config = {});

  float scale() const { return state_.scale; }
  // What multiplies the loss gradient before backward.
  float loss_factor() const { return state_.scale; }
  // 1 / scale(), folded into the optimizer's grad_scale.
  float unscale_factor() const { return 1.0f / state_.scale; }
  // Advances the state machine after one step's reduction; returns true
  // when the step should be taken, false when it is skipped.
  bool update(bool found_non_finite);
  // Steps skipped since construction (or the last reset_skipped()).
  int64_t skipped() const { return skipped_; }
  void reset_skipped() { skipped_ = 0; }

  const GradScalerState& state() const { return state_; }
  // Throws InputError on a non-positive or non-finite scale or a negative tracker.
  void set_state(const GradScalerState& state);
  const GradScalerConfig& config() const { return config_; }

 private:
  GradScalerConfig config_;
  GradScalerState state_;
  int64_t skipped_ = 0;
};

// True when any parameter's gradient holds an infinity or NaN. CPU tensors
// are read in place; device tensors through a host copy.
bool has_non_finite(Backend& backend, const std::vector<Parameter*>& params);

}  // namespace lockstep::nn
