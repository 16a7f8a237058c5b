// Linear: y = x W^T + b, as PyTorch's nn.Linear.
//   x: (N, in), W: (out, in), b: (out), y: (N, out)
// Gradients: dx = dy W, dW = dy^T x, db = sum over rows of dy.
// Initialisation (PyTorch default): W, b ~ U(-1/sqrt(in), 1/sqrt(in)).
#pragma once

#include "nn/layer.h"

namespace lockstep::nn {

class Linear final : public Layer {
 public:
  Linear(int64_t in_features, int64_t out_features);

  std::string describe() const override;
  Shape output_shape(const Shape& input) const override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  void reset_parameters(uint64_t seed, Device device) override;

 private:
  int64_t in_, out_;
  Parameter weight_, bias_;
};

}  // namespace lockstep::nn
