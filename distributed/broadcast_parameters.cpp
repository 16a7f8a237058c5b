// DistributedOptimizer::broadcast_parameters (distributed_optimizer.h):
// rank 0's weights and optimizer state to every rank, after a shape check.
#include "common/error.h"
#include "distributed/distributed_optimizer.h"

namespace lockstep::distributed {

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
  double last_lr = inner_.last_lr();
  comm_.broadcast_values(std::span<int64_t>(&steps, 1), root);
  comm_.broadcast_values(std::span<double>(&last_lr, 1), root);
  inner_.set_steps(steps);
  inner_.set_last_lr(last_lr);
}

}  // namespace lockstep::distributed
