// Average pooling: AvgPool2d over windows is a mode of Pool2d
// (nn/layers/pool2d.h); GlobalAvgPool2d (nn.AdaptiveAvgPool2d(1) then
// flatten) averages whole planes:
//   x: (N, C, H, W) -> y: (N, C), y[n, c] = mean over H, W;  dx = dy / (H W)
#pragma once

#include "nn/layers/pool2d.h"

namespace lockstep::nn {

class GlobalAvgPool2d final : public Layer {
 public:
  std::string describe() const override { return "global_avg_pool2d"; }
  Shape output_shape(const Shape& input) const override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
};

}  // namespace lockstep::nn
