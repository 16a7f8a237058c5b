// Shape-preserving layers without parameters.
//
// ReLU:       y = max(x, 0)                  dx = dy * (y > 0)
// LogSoftmax: y = x - logsumexp(x) per row    dx = dy - exp(y) * sum(dy)
//             x, y: (N, classes)
// Flatten:    (N, C, H, W) -> (N, C*H*W)      dx = dy reshaped
#pragma once

#include "nn/layer.h"

namespace lockstep::nn {

class ReLU final : public Layer {
 public:
  std::string describe() const override { return "relu"; }
  Shape output_shape(const Shape& input) const override { return input; }
  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
};

class LogSoftmax final : public Layer {
 public:
  std::string describe() const override { return "log_softmax"; }
  Shape output_shape(const Shape& input) const override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
};

class Flatten final : public Layer {
 public:
  std::string describe() const override { return "flatten"; }
  Shape output_shape(const Shape& input) const override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
};

}  // namespace lockstep::nn
