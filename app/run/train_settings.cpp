#include "app/run/train_settings.h"

#include "app/platform/placement.h"

#include <algorithm>
#include <cstdlib>

namespace lockstep::app {

int compute_threads(const TrainConfig& config, const distributed::Communicator& comm) {
  if (config.threads > 0) return static_cast<int>(config.threads);
  return default_threads(affinity_count(), online_cpus(), comm.local_size());
}

distributed::DistributedOptimizerConfig dopt_config(const TrainConfig& c) {
  distributed::DistributedOptimizerConfig d;
  d.op = c.reduce_op == "sum" ? distributed::ReduceOp::kSum : distributed::ReduceOp::kAverage;
  d.gradient_predivide_factor = c.gradient_predivide_factor;
  d.first_bucket_mb = c.first_bucket_mb;
  d.bucket_cap_mb = c.bucket_cap_mb;
  d.allreduce_chunk_mb = c.allreduce_chunk_mb;
  d.compression = distributed::parse_compression(c.compression);
  d.backward_passes_per_step = static_cast<int>(c.backward_passes_per_step);
  d.overlap = c.overlap;
  d.grad_clip_norm = c.grad_clip_norm;
  // A debug check, not a setting (it is not in the fingerprint): a gradient
  // written while MPI reads its bucket ends the run (host_reduction.h).
  d.verify_buckets = std::getenv("LOCKSTEP_VERIFY_BUCKETS") != nullptr;
  return d;
}

nn::OptimizerConfig optimizer_config(const TrainConfig& c) {
  nn::OptimizerConfig o;
  o.kind = c.optimizer;
  o.momentum = static_cast<float>(c.momentum);
  o.dampening = static_cast<float>(c.dampening);
  o.nesterov = c.nesterov;
  o.momentum_correction = c.momentum_correction;
  o.beta1 = c.adam_beta1;
  o.beta2 = c.adam_beta2;
  o.eps = static_cast<float>(c.adam_eps);
  o.weight_decay = static_cast<float>(c.weight_decay);
  o.decay_bn_and_bias = c.weight_decay_bn_bias;
  return o;
}

nn::LrScheduleConfig schedule_config(const TrainConfig& c) {
  nn::LrScheduleConfig s;
  s.lr = c.lr;
  s.schedule = c.lr_schedule;
  s.milestones = c.lr_milestones;
  s.gamma = c.lr_gamma;
  s.epochs = c.epochs;
  s.min_lr = c.lr_min;
  s.scaling = c.lr_scaling;
  s.warmup_epochs = c.warmup_epochs;
  return s;
}

distributed::LivenessPolicy liveness_policy(const TrainConfig& config) {
  distributed::LivenessPolicy liveness;
  liveness.timeout_seconds = config.liveness_timeout_s;
  liveness.heartbeat_seconds = config.heartbeat_interval_s;
  return liveness;
}

}  // namespace lockstep::app
