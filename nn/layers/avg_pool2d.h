// Average pooling.
//
// AvgPool2d (nn.AvgPool2d, no padding, floor mode):
//   x: (N, C, H, W) -> y: (N, C, P, Q), y = mean of each kernel x kernel window
//   dx = dy / kernel^2 spread over the window (summed where windows overlap)
// GlobalAvgPool2d (nn.AdaptiveAvgPool2d(1) then flatten):
//   x: (N, C, H, W) -> y: (N, C), y[n, c] = mean over H, W;  dx = dy / (H W)
#pragma once

#include "nn/layer.h"

namespace lockstep::nn {

class AvgPool2d final : public Layer {
 public:
  explicit AvgPool2d(int64_t kernel, int64_t stride = 0);  // stride 0: = kernel

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

class GlobalAvgPool2d final : public Layer {
 public:
  std::string describe() const override { return "global_avg_pool2d"; }
  Shape output_shape(const Shape& input) const override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
};

}  // namespace lockstep::nn
