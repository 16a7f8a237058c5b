#include "nn/layers/composite.h"

namespace lockstep::nn {

void Composite::backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor* dx) {
  backward_announcing(backend, x, y, dy, dx, {});
}

std::vector<Parameter*> Composite::parameters() {
  std::vector<Parameter*> out;
  for (Layer* child : children()) {
    for (Parameter* p : child->parameters()) out.push_back(p);
  }
  return out;
}

std::vector<Buffer*> Composite::buffers() {
  std::vector<Buffer*> out;
  for (Layer* child : children()) {
    for (Buffer* b : child->buffers()) out.push_back(b);
  }
  return out;
}

void Composite::reset_parameters(uint64_t seed, Device device) {
  for (Layer* child : children()) child->reset_parameters(seed, device);
  reset_scratch(device);
}

}  // namespace lockstep::nn
