// What a TrainConfig means for the objects it configures: the thread count
// of a rank and the settings of the optimizer, the learning-rate schedule and
// the gradient reduction. Values are taken as validated (validate()).
#pragma once

#include "app/config/config.h"
#include "distributed/communicator.h"
#include "distributed/distributed_optimizer.h"
#include "distributed/liveness.h"
#include "nn/lr_schedule.h"
#include "nn/optimizer.h"

namespace lockstep::app {

// Resolves config.threads = 0: app/platform/placement.h default_threads from this
// process's affinity mask and the ranks on its node.
int compute_threads(const TrainConfig& config, const distributed::Communicator& comm);

distributed::DistributedOptimizerConfig dopt_config(const TrainConfig& config);
nn::OptimizerConfig optimizer_config(const TrainConfig& config);
nn::LrScheduleConfig schedule_config(const TrainConfig& config);
// liveness_timeout_s and heartbeat_interval_s (train and evaluate).
distributed::LivenessPolicy liveness_policy(const TrainConfig& config);

}  // namespace lockstep::app
