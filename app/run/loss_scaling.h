// Loss scaling in the trainer: when it is on, how a step is taken, and how
// the scaler's state travels in checkpoints (nn/grad_scaler.h has the rules).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/config/config.h"
#include "distributed/communicator.h"
#include "distributed/distributed_optimizer.h"
#include "nn/grad_scaler.h"

namespace lockstep::app {

// Loss scaling is on: loss_scaling = on, or auto with precision = fp16
// (never for fp32 or bf16 by default).
bool loss_scaling_on(const TrainConfig& config);
// The scaler of a run when loss_scaling_on(config); null otherwise.
std::unique_ptr<nn::GradScaler> make_grad_scaler(const TrainConfig& config);

// After the step's backward passes: reduces the gradients, checks the sums
// for inf/NaN, agrees with every rank (one max allreduce of a flag, so the
// ranks skip together even if their sums differed), and either takes the
// inner optimizer's step with the gradients unscaled or skips it. Returns
// true when the step was taken.
bool scaled_step(nn::GradScaler& scaler, distributed::DistributedOptimizer& dopt,
                 nn::Optimizer& inner, nn::Backend& backend, distributed::Communicator& comm,
                 const std::vector<nn::Parameter*>& params, float lr,
                 distributed::Timeline* timeline);

// "loss scaling: initial scale 65536, x2 after 2000 clean steps, x0.5 and skip on inf/NaN"
std::string describe(const nn::GradScaler& scaler);
// {"scale": ..., "growth_tracker": ...} for the checkpoint's metadata.
nlohmann::json scaler_state_json(const nn::GradScaler& scaler);
// Restores what scaler_state_json wrote; throws InputError naming `source`
// when it is malformed.
void restore_scaler_state(nn::GradScaler& scaler, const nlohmann::json& state,
                          const std::string& source);

}  // namespace lockstep::app
