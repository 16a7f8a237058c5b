#include "app/run/model_buffers.h"

#include <vector>

namespace lockstep::app {
namespace {

// All buffers packed into one host array, in model order.
std::vector<float> pack(const nn::Model& model) {
  std::vector<float> out;
  for (const nn::Buffer* b : model.buffers()) {
    nn::Tensor host(b->value.shape());
    host.copy_from(b->value);
    out.insert(out.end(), host.span().begin(), host.span().end());
  }
  return out;
}

void unpack(const std::vector<float>& values, const nn::Model& model) {
  size_t at = 0;
  for (nn::Buffer* b : model.buffers()) {
    nn::Tensor host(b->value.shape());
    for (float& v : host.span()) v = values[at++];
    b->value.copy_from(host);
  }
}

}  // namespace

void broadcast_buffers(distributed::Communicator& comm, const nn::Model& model, int root) {
  if (comm.size() == 1 || model.buffers().empty()) return;
  std::vector<float> values = pack(model);
  comm.set_stall_label("broadcast of the model's buffers");
  comm.broadcast_values(std::span<float>(values), root);
  unpack(values, model);
}

void average_running_statistics(distributed::Communicator& comm, const nn::Model& model) {
  if (comm.size() == 1 || model.buffers().empty()) return;
  std::vector<float> values = pack(model);
  comm.set_stall_label("average of the BatchNorm running statistics");
  comm.allreduce(std::span<float>(values), distributed::ReduceOp::kAverage);
  unpack(values, model);
}

}  // namespace lockstep::app
