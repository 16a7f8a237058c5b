// Max and average pooling, one layer in two modes (as cuDNN's pooling
// descriptor has them), with PyTorch's defaults (nn.MaxPool2d,
// nn.AvgPool2d): a kernel x kernel window every stride pixels (stride 0:
// = kernel), no padding, floor mode.
//   x: (N, C, H, W), y: (N, C, (H - k) / s + 1, (W - k) / s + 1), H, W >= k
//   max:     y = max of each window; dy goes to the first maximum of each
//            window
//   average: y = mean of each window; dx = dy / kernel^2 spread over the
//            window (summed where windows overlap)
#pragma once

#include <cstdint>

#include "nn/layer.h"

namespace lockstep::nn {

class Pool2d : public Layer {
 public:
  enum class Mode { kMax, kAverage };

  // Throws InputError on a kernel below 1 or a negative stride.
  Pool2d(Mode mode, int64_t kernel, int64_t stride);

  std::string describe() const override;  // "max_pool2d(k2, s2)", "avg_pool2d(k2, s2)"
  Shape output_shape(const Shape& input) const override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;

  Mode mode() const { return mode_; }
  int64_t kernel() const { return kernel_; }
  int64_t stride() const { return stride_; }

 private:
  Pool2dGeometry geometry(const Shape& input) const;
  Mode mode_;
  int64_t kernel_, stride_;
};

class MaxPool2d final : public Pool2d {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0) : Pool2d(Mode::kMax, kernel, stride) {}
};

class AvgPool2d final : public Pool2d {
 public:
  explicit AvgPool2d(int64_t kernel, int64_t stride = 0) : Pool2d(Mode::kAverage, kernel, stride) {}
};

}  // namespace lockstep::nn
