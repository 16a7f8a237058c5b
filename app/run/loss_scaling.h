// Loss scaling in the trainer: when it is on, and how the scaler's state
// travels in checkpoints (nn/grad_scaler.h has the rules; the scaled step
// itself is DistributedOptimizer::step's).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/config/config.h"
#include "nn/grad_scaler.h"

namespace lockstep::app {

// Loss scaling is on: loss_scaling = on, or auto with precision = fp16
// (never for fp32 or bf16 by default).
bool loss_scaling_on(const TrainConfig& config);
// The scaler of a run when loss_scaling_on(config); null otherwise.
std::unique_ptr<nn::GradScaler> make_grad_scaler(const TrainConfig& config);

// "loss scaling: initial scale 65536, x2 after 2000 clean steps, x0.5 and skip on inf/NaN"
std::string describe(const nn::GradScaler& scaler);
// {"scale": ..., "growth_tracker": ...} for the checkpoint's metadata.
nlohmann::json scaler_state_json(const nn::GradScaler& scaler);
// Restores what scaler_state_json wrote; throws InputError naming `source`
// when it is malformed.
void restore_scaler_state(nn::GradScaler& scaler, const nlohmann::json& state,
                          const std::string& source);

}  // namespace lockstep::app
