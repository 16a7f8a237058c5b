// MaxPool2d: y[n,c,p,q] = max over the kernel x kernel window at
// (p*stride, q*stride), no padding, floor mode (PyTorch's defaults).
//   x: (N, C, H, W), y: (N, C, (H - k) / s + 1, (W - k) / s + 1)
// Gradient: dy goes to the first maximum of each window.
#pragma once

#include "nn/layer.h"

namespace lockstep::nn {

class MaxPool2d final : public Layer {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0);  // stride 0: = kernel

  std::string describe() const override;
  Shape output_shape(const Shape& input) const override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;

  int64_t kernel() const { return kernel_; }
  int64_t stride() const { return stride_; }

 private:
  Pool2dGeometry geometry(const Shape& input) const;
  int64_t kernel_, stride_;
};

}  // namespace lockstep::nn
