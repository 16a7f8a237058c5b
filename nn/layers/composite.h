// Composite: a layer made of child layers (Sequential, ResidualBlock). Its
// parameters and buffers are its children's, in children() order; its
// backward is backward_announcing() with nobody listening, so a composite
// implements only that one.
#pragma once

#include <vector>

#include "nn/layer.h"

namespace lockstep::nn {

class Composite : public Layer {
 public:
  // The children, in the order of their parameters.
  virtual std::vector<Layer*> children() const = 0;

  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  std::vector<Parameter*> parameters() override;
  std::vector<Buffer*> buffers() override;
  // The children's, then reset_scratch(device).
  void reset_parameters(uint64_t seed, Device device) override;

 protected:
  // Replaces the composite's own intermediate tensors by empty ones on
  // `device`.
  virtual void reset_scratch(Device device) = 0;
};

}  // namespace lockstep::nn
