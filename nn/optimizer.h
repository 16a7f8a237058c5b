// Optimizers with PyTorch's exact update rules (torch.optim.SGD and Adam).
// An optimizer owns its state tensors (momentum buffers, moments), named
// after the parameter they belong to so checkpoints can hold them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/enum_table.h"
#include "nn/backend.h"
#include "nn/layer.h"

namespace lockstep::nn {

enum class OptimizerKind { kSgd, kAdam, kAdamW };

inline constexpr EnumEntry<OptimizerKind, const char*> kOptimizerNames[] = {
    {OptimizerKind::kSgd, "sgd"}, {OptimizerKind::kAdam, "adam"}, {OptimizerKind::kAdamW, "adamw"}};

inline const char* to_string(OptimizerKind kind) {
  return value_of(kOptimizerNames, kind).value_or("?");
}

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  float momentum = 0.0f;   // sgd
  float dampening = 0.0f;  // sgd
  bool nesterov = false;   // sgd
  // sgd: when the learning rate changes between steps, scale the momentum
  // buffer's contribution by new_lr / old_lr (Goyal et al. 2017, Horovod).
  bool momentum_correction = true;
  double beta1 = 0.9, beta2 = 0.999;  // adam (double: see AdamParams)
  float eps = 1e-8f;                  // adam
  // sgd, adam: L2 added to the gradient; adamw: decoupled, w *= 1 - lr wd
  // before the Adam step (torch.optim.AdamW).
  float weight_decay = 0.0f;
  // false: no weight decay on parameters with at most one dimension
  // (BatchNorm weights and biases, every bias).
  bool decay_bn_and_bias = true;
};

// A named state tensor, for checkpoints and broadcasts.
struct StateTensor {
  std::string name;  // "conv1.weight.momentum_buffer"
  Tensor* tensor;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string describe() const = 0;
  // One update of every parameter from its .grad * grad_scale with learning
  // rate lr (grad_scale: the distributed optimizer's deferred 1 / ranks).
  // lr is a double as PyTorch's; SGD's float kernels round it once.
  virtual void step(Backend& backend, double lr, float grad_scale) = 0;
  void step(Backend& backend, double lr) { step(backend, lr, 1.0f); }
  // Every state tensor, in a fixed order.
  virtual std::vector<StateTensor> state() = 0;
  // Number of steps taken (restored from checkpoints).
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }
  // The learning rate of the last step (for momentum correction).
  double last_lr() const { return last_lr_; }
  void set_last_lr(double lr) { last_lr_ = lr; }

 protected:
  int64_t steps_ = 0;
  double last_lr_ = 0.0;
};

// Builds the optimizer over `params` (tensors on `device`); throws
// InputError on settings the kind refuses.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config,
                                          const std::vector<Parameter*>& params, Device device);

}  // namespace lockstep::nn
